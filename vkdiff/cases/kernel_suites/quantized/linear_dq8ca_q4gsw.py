"""``et_vk.linear_dq8ca_q4gsw``: int8 per-row activations × 4-bit group weights, as the 8da4w recipes lower.

Activation scales and zero points are drawn as ``choose_qparams_affine`` would give them
(per row, asymmetric, int8 range) and passed as inputs, so the kernel chain
(``quantize_and_pack_4h4w_with_group_sums`` → ``linear_dq8ca_q4gsw_*``) is judged on exactly the
qparams the reference takes. Weight sums are laid out as ET-VK's export pass lays them out
(``[K/gs, N]`` padded to 8). Knobs: dtype, io storage, ``fpzp`` (zero points allocated in
the float dtype, the ``Int8DynActInt4WeightQuantizer`` recipe). Boundary shapes the C++
tests skip: M > K/2 and M > K (issue #21423), N % 8 == 4 with several groups, group 128
(the ``o2w32`` quantize variant), one row (the ``_coop`` GEMV), fp16 at K = 4096.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

OP = "et_vk.linear_dq8ca_q4gsw.default"

GRID = [(m, k, n, g) for m, k, n, g in itertools.product((4, 13), (64, 256), (40, 64), (32, 64)) if k % g == 0]
BOUNDARY = [(40, 64, 64, 32), (100, 64, 64, 32), (13, 256, 44, 32), (13, 128, 52, 128), (1, 256, 64, 32),
            (4, 4096, 64, 128)]
"""(M, K, N, g): M > K/2, M > K, N % 8 == 4 (8 and 1 groups), group 128, one row, K = 4096."""


def dq8ca_case(m: int, k: int, n: int, g: int, dtype: str, storage: str, flags: tuple[str, ...] = ()) -> KernelCase:
    return KernelCase(op=OP, name="linear_dq8ca_q4gsw", shape=(("M", m), ("K", k), ("N", n), ("g", g)),
                      dtype=dtype, storage=storage, flags=flags)


def per_row_qparams(x: np.ndarray, float_zp: bool) -> tuple[np.ndarray, np.ndarray]:
    """Asymmetric int8 qparams of each row (range widened to include 0), as torchao chooses them."""
    rows = x.astype(np.float32)
    low, high = np.minimum(rows.min(axis=-1), 0), np.maximum(rows.max(axis=-1), 0)
    scale = np.maximum((high - low) / 255.0, np.finfo(np.float32).eps).astype(np.float32)
    zero = np.clip(np.round(-128 - low / scale), -128, 127)
    return scale, (zero.astype(np.float32) if float_zp else zero.astype(np.int8))


def make_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """Normal activations with per-row offsets, random packed weights, their true group sums, positive scales."""
    m, k, n, g = (case.size(d) for d in "MKNg")
    dtype = case.np_dtype
    x = (rng.standard_normal((m, k)) + rng.uniform(-1, 1, (m, 1))).astype(dtype)
    scale, zero = per_row_qparams(x, case.has("fpzp"))
    weights = rng.integers(0, 256, (n, k // 2), dtype=np.uint8)
    codes = np.empty((n, k), np.int32)
    codes[:, 0::2], codes[:, 1::2] = (weights & 0xF).astype(np.int32) - 8, (weights >> 4).astype(np.int32) - 8
    sums = np.zeros((k // g, -(-n // 8) * 8), np.int32)
    sums[:, :n] = codes.reshape(n, k // g, g).sum(axis=-1).T
    scales = np.zeros((k // g, -(-n // 4) * 4), dtype)
    scales[:, :n] = (rng.uniform(0.5, 1.5, (k // g, n)) / (8 * np.sqrt(k))).astype(dtype)
    return {"input": x, "input_scales": scale.astype(dtype), "input_zp": zero.astype(dtype) if case.has("fpzp")
            else zero, "weights": weights, "weight_sums": sums, "weight_scales": scales, "group_size": g,
            "bias": None}


@register_test_suite(OP, make_args=make_args, sampled=False, resizable=("M",))
def linear_dq8ca_q4gsw_suite() -> Iterator[KernelCase]:
    for (m, k, n, g), dtype, storage in itertools.product(GRID + BOUNDARY, ("fp32", "fp16"), ("buffer", "texture3d")):
        if dtype == "fp32" or k >= 256:
            yield dq8ca_case(m, k, n, g, dtype, storage)
    for (m, k, n, g), storage in itertools.product(((13, 256, 64, 32), (40, 64, 64, 32)), ("buffer", "texture3d")):
        yield dq8ca_case(m, k, n, g, "fp32", storage, flags=("fpzp",))
