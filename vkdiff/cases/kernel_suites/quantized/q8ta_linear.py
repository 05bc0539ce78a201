"""Static-int8 linears with int8x4 activations: ``et_vk.q8ta_linear`` (``Q8taLinear.cpp``) and
``et_vk.q8ta_linear_gemv`` (``Q8taLinearGemv.cpp``), int8 codes in and out, compared exactly.

Inputs and outputs are int8x4 buffers in the one layout each C++ accepts: ``PACKED_INT8_4H4W`` for the tiled
op, ``PACKED_INT8_4W`` for the GEMV (the partitioner's choice; other layouts are refused, see the launcher's
tests). Weights are int8 ``[N, K]`` codes in [-127, 127] with weight sums, scales and bias padded to a
multiple of 4 as ``make_q8ta_linear_custom_op`` pads them. Every case runs both routes (option ``route``):
``dot`` (``q8ta_linear[_gemv]_float``, int8 dot product) and ``fallback`` (``*_fallback_float`` under the
``no-dot-product`` profile).

Edges (flags): zero points at the int8 extremes (``zp_lo``: input and output -128, ``zp_hi``: both 127),
an output scale that saturates most codes at both ends (``saturate``), every weight code ±127
(``extreme``), ``relu``, no bias; K = 4 and K / 4 not a multiple of the GEMV's 64 lanes; N not a multiple
of 4 (N = 1, 6, 13) nor of the 8-channel tile (N = 20); M = 1 and M not a multiple of the 4-row tile;
batch dims (``B``: one batch, and several); N past the packed weight's 2-D texture limit (``N4 > 16384`` on
lavapipe: the weight is packed into a buffer). Below the bound over M (``q8ta_linear``; the GEMV has one row
and no resize function).
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

LINEAR = "et_vk.q8ta_linear.default"
GEMV = "et_vk.q8ta_linear_gemv.default"
LAYOUTS = {LINEAR: "int8x4_4h4w", GEMV: "int8x4_4w"}
"""The int8x4 layout each op's ``check_packed_dim_info`` accepts."""

ROUTES = {"dot": None, "fallback": "no-dot-product"}
"""Route → the routing profile that takes it (None: the device's own, int8 dot product assumed)."""

LINEAR_SHAPES = ((4, 32, 8), (13, 100, 20), (3, 4, 13), (1, 36, 6), (40, 260, 68), (7, 64, 1))
"""(M, K, N): whole tiles; odd N4 and K not a multiple of 8; K = 4, N % 4 = 1; one row, N % 4 = 2;
several workgroups each way; N = 1."""
GEMV_SHAPES = ((32, 8), (260, 20), (4, 13), (36, 6), (1028, 68), (64, 1))
"""(K, N): K / 4 below, above (65, 257) and far below the 64 lanes; N as in ``LINEAR_SHAPES``."""

EDGE_FLAGS = (("bias", "relu"), ("bias", "saturate"), ("bias", "zp_lo", "relu"), ("bias", "zp_hi"),
              ("bias", "extreme"), ())
"""Data edges, each on one mid-sized shape of each op (``extreme`` on a longer K)."""
BATCHES = ((1, 7), (2, 5))
"""(B, M) of the ``[B, M, K]`` cases (M = 1 for the GEMV): one batch, and two."""
WIDE_N = 131076
"""N whose packed weight ``[K4, N4 * 4]`` (N4 = 32769) is wider than a 2-D texture on lavapipe (16384) and NVIDIA's
driver (32768): packed into a buffer on both."""

ZERO_POINTS = {"zp_lo": (-128, -128), "zp_hi": (127, 127)}
"""Flag → (input zero point, output zero point); otherwise (-9, 5)."""
INPUT_SCALE = 0.02
WEIGHT_SCALE = 0.02
"""Weight scales are ``WEIGHT_SCALE / sqrt(K)`` times U(0.5, 1.5)."""
SPAN = 4.0
"""Output codes span ``SPAN`` typical magnitudes of the float output over 120 steps (2000 with ``saturate``:
most codes clip at -128 or 127)."""


def zero_points(case: KernelCase) -> tuple[int, int]:
    """(input, output) zero point of the case."""
    return next((ZERO_POINTS[f] for f in case.flags if f in ZERO_POINTS), (-9, 5))


def typical_output(case: KernelCase) -> float:
    """The root mean square of the float output before the bias, from the distributions the codes are drawn from
    (x uniform over int8, w uniform over [-127, 127] or ±127, mean weight scale): the same for every draw, so a
    smaller run below the bound keeps the graph's scalars."""
    z_in = zero_points(case)[0]
    x_rms = np.sqrt((256.0**2 - 1) / 12 + (-0.5 - z_in) ** 2)
    w_rms = 127.0 if case.has("extreme") else np.sqrt(127.0 * 128.0 / 3)
    return INPUT_SCALE * WEIGHT_SCALE * x_rms * w_rms


def output_scale(case: KernelCase) -> float:
    """Fixed per case: ``SPAN`` typical magnitudes (bias included) over 120 codes, or 2000 with ``saturate``."""
    typical = typical_output(case) * (np.sqrt(2.0) if case.has("bias") else 1.0)
    return float(np.float32(SPAN * typical / (2000.0 if case.has("saturate") else 120.0)))


def q8ta_case(op: str, sizes: tuple[tuple[str, int], ...], route: str, flags: tuple[str, ...]) -> KernelCase:
    """A case of ``op`` on its own int8x4 layout; the route (and its profile) are launcher options."""
    profile = ROUTES[route]
    options = (("route", route),) + ((("profile", profile),) if profile else ())
    name = "q8ta_linear_gemv" if op == GEMV else "q8ta_linear"
    return KernelCase(op=op, name=name, shape=sizes, dtype="int8", storage="buffer", layout=LAYOUTS[op],
                      options=options, flags=flags)


def _padded(values: np.ndarray, n: int, dtype: Any) -> np.ndarray:
    """``values`` zero-padded to a multiple of 4 entries, as the export pass pads per-channel params."""
    out = np.zeros(-(-n // 4) * 4, dtype)
    out[:n] = values
    return out


def _weights(rng: np.random.Generator, n: int, k: int, extreme: bool) -> np.ndarray:
    """int8 ``[N, K]`` codes in [-127, 127] with both ends present; ``extreme``: every code ±127."""
    if extreme:
        return np.where(rng.random((n, k)) < 0.5, -127, 127).astype(np.int8)
    w = rng.integers(-127, 128, (n, k)).astype(np.int8)
    w[0, 0], w[-1, -1] = -127, 127
    return w


def make_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """Full-range int8 codes (both ends present), symmetric int8 weights with their true sums, positive scales,
    a bias of the output's typical size; the scalars are fixed per case (``output_scale``)."""
    sizes = case.sizes
    m, k, n = sizes["M"], sizes["K"], sizes["N"]
    x = rng.integers(-128, 128, (*((sizes["B"],) if "B" in sizes else ()), m, k)).astype(np.int8)
    x.reshape(-1)[:2] = (-128, 127)
    z_in, z_out = zero_points(case)
    w = _weights(rng, n, k, case.has("extreme"))
    scales = (rng.uniform(0.5, 1.5, n) * (WEIGHT_SCALE / np.sqrt(k))).astype(np.float32)
    bias = (rng.standard_normal(n) * typical_output(case)).astype(np.float32) if case.has("bias") else None
    return {"x": x, "input_scale": INPUT_SCALE, "input_zero_point": z_in, "weights": w,
            "weight_sums": _padded(w.astype(np.int32).sum(axis=1), n, np.int32),
            "weight_scales": _padded(scales, n, np.float32), "output_scale": output_scale(case),
            "output_zero_point": z_out, "bias": None if bias is None else _padded(bias, n, np.float32),
            "activation": "relu" if case.has("relu") else "none"}


def _edge_and_batch_cases(mid: tuple[tuple[str, int], ...], long: tuple[tuple[str, int], ...],
                          batch: Any) -> Iterator[tuple[tuple[tuple[str, int], ...], tuple[str, ...]]]:
    """(sizes, flags) of the data edges (on ``mid``, ``extreme`` on ``long``) and of the batched cases."""
    for flags in EDGE_FLAGS:
        yield (long if "extreme" in flags else mid), flags
    for b, m in BATCHES:
        yield batch(b, m), ("bias",)


@register_test_suite(LINEAR, make_args=make_args, sampled=False, resizable=("M",))
def q8ta_linear_suite() -> Iterator[KernelCase]:
    grid = [((("M", m), ("K", k), ("N", n)), ("bias",)) for m, k, n in LINEAR_SHAPES]
    edges = _edge_and_batch_cases((("M", 13), ("K", 100), ("N", 20)), (("M", 13), ("K", 260), ("N", 20)),
                                  lambda b, m: (("B", b), ("M", m), ("K", 32), ("N", 20)))
    for sizes, flags in [*grid, *edges]:
        for route in ROUTES:
            yield q8ta_case(LINEAR, sizes, route, flags)
    yield q8ta_case(LINEAR, (("M", 5), ("K", 8), ("N", WIDE_N)), "dot", ("bias",))


@register_test_suite(GEMV, make_args=make_args, sampled=False)
def q8ta_linear_gemv_suite() -> Iterator[KernelCase]:
    grid = [((("M", 1), ("K", k), ("N", n)), ("bias",)) for k, n in GEMV_SHAPES]
    edges = _edge_and_batch_cases((("M", 1), ("K", 260), ("N", 20)), (("M", 1), ("K", 1028), ("N", 20)),
                                  lambda b, m: (("B", b), ("M", 1), ("K", 32), ("N", 20)))
    for sizes, flags in [*grid, *edges]:
        for route in ROUTES:
            yield q8ta_case(GEMV, sizes, route, flags)
    yield q8ta_case(GEMV, (("M", 1), ("K", 8), ("N", WIDE_N)), "dot", ("bias",))
