"""``et_vk.linear_q4gsw``: the live path of the given tree, plus ``QuantizedLinear.cpp``'s tiled/coop path.

The foundation sweep runs whatever implementation the tree registers for the op
(``Q4gswLinear.cpp``'s ``__w_4x8`` shaders since v1.4.0, ``QuantizedLinear.cpp`` before).
The ``linear_q4gsw_tiled`` cases force ``QuantizedLinear.cpp`` (``impl``): on current
trees that path is dq8ca's weight-only fallback, and its buffer-weight and bias
variants run there. Boundary shapes the C++ tests skip: M > K/2 and M > K, N % 8 in
1..4, one row, K not a multiple of 128, fp16 at K = 4096.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import M1, KernelCase, register_test_suite

OP = "et_vk.linear_q4gsw.default"

M_SIZES = (1, 4, 13, 64)
K_SIZES = (64, 256, 4096)
N_SIZES = (40, 64, 4096)
GROUP_SIZES = (32, 64, 128)
DTYPES = ("fp32", "fp16")
IO_STORAGES = ("buffer", "texture3d")


def linear_case(m: int, k: int, n: int, g: int, dtype: str, storage: str, name: str = "linear_q4gsw",
                **knobs) -> KernelCase:
    return KernelCase(op=OP, name=name, shape=(("M", m), ("K", k), ("N", n), ("g", g)),
                      dtype=dtype, storage=storage, **knobs)


TILED = (("impl", "QuantizedLinear.cpp"),)
"""Options forcing ``QuantizedLinear.cpp``'s implementation."""
BOUNDARY = ((96, 160, 44, 32), (200, 160, 52, 32), (1, 96, 36, 32), (33, 224, 48, 32))
"""(M, K, N, g): M > K/2, M > K, one row with N % 8 == 4, K % 128 != 0 and odd M."""


def make_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """Normal activations, uniformly random packed int4 weights and positive scales in ET-VK's layout.

    Every byte value is equally likely, so all 16 codes appear in both nibbles. Scales are
    drawn as ``[K/gs, N4*4]`` (transposed, width padded to 4 with zeros, as the pass stores
    them) in the case dtype, so the reference evaluates exactly the constants the shader reads.
    """
    m, k, n, g = (case.size(d) for d in "MKNg")
    dtype = case.np_dtype
    x = rng.standard_normal((m, k)).astype(dtype)
    weights = rng.integers(0, 256, (n, k // 2), dtype=np.uint8)
    per_channel = (rng.uniform(0.5, 1.5, (n, k // g)) / (8 * np.sqrt(k))).astype(np.float32)
    scales = np.zeros((k // g, -(-n // 4) * 4), dtype)
    scales[:, :n] = per_channel.T
    bias = rng.standard_normal(n).astype(dtype) if case.has("bias") else None
    return {"self": x, "weights": weights, "weight_scales": scales, "group_size": g, "bias": bias}


@register_test_suite(OP, make_args=make_args, sampled=False)
def linear_q4gsw_suite() -> Iterator[KernelCase]:
    for m, k, n, g, dtype, storage in itertools.product(M_SIZES, K_SIZES, N_SIZES, GROUP_SIZES, DTYPES, IO_STORAGES):
        if k % g == 0:
            yield linear_case(m, k, n, g, dtype, storage)
    for (m, k, n, g), dtype, storage in itertools.product(BOUNDARY, DTYPES, IO_STORAGES):
        yield linear_case(m, k, n, g, dtype, storage)
    for m, dtype, storage in itertools.product((1, M1), DTYPES, IO_STORAGES):
        yield linear_case(m, 256, 40, 32, dtype, storage, flags=("bias",))
        tiled = dict(name="linear_q4gsw_tiled", options=TILED)
        yield linear_case(m, 256, 40, 32, dtype, storage, **tiled, flags=("bias",))
        yield linear_case(m, 256, 40, 32, dtype, storage, name="linear_q4gsw_tiled",
                          options=(*TILED, ("weight_storage", "buffer")))
    for m, k, n, g, dtype, storage in itertools.product((1, 13), (256, 4096), (40, 4096), (32, 128), DTYPES,
                                                        IO_STORAGES):
        yield linear_case(m, k, n, g, dtype, storage, name="linear_q4gsw_tiled", options=TILED)


ALIAS = "et_vk.q4gsw_linear.default"


@register_test_suite(ALIAS, make_args=make_args, resizable=("M",))
def q4gsw_linear_suite() -> Iterator[KernelCase]:
    """The op's second name (the same C++ function): GEMV and GEMM, bias, both dtypes and storages, below the
    bound over M (a GEMM graph run at M = 1 switches to the GEMV shader)."""
    for (m, k, n, g), dtype, storage in itertools.product(((1, 256, 40, 32), (13, 256, 40, 32), (64, 160, 44, 32)),
                                                          DTYPES, IO_STORAGES):
        yield dataclasses.replace(linear_case(m, k, n, g, dtype, storage, name="q4gsw_linear"), op=ALIAS)
    for dtype in DTYPES:
        yield dataclasses.replace(linear_case(M1, 256, 40, 32, dtype, "buffer", name="q4gsw_linear",
                                              flags=("bias",)), op=ALIAS)
