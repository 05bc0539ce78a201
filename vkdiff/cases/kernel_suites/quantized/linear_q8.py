"""Linears whose activations are float at the op boundary and whose weights are quantized per output channel.

``QuantizedLinearQCSNW.cpp``: ``aten._weight_int8pack_mm`` (int8 weights, any code, -128 included) and
``et_vk.linear_qcs4w`` (4-bit codes, even k in the high nibble). Routes (option ``route``, checked by the
launcher): ``tiled_o4x{R}`` with R = 3, 4, 2, 1 output rows per thread, the first dividing M; ``coop`` for
M == 1; ``fallback`` (int8 only: the naive ``linear_qcs8w`` shader) when K or N is not a multiple of 4 or
the input has batches, in texture3d also from a channels-packed input through ``view_copy``. K past the
2-D texture limit (K = 32772) puts the int8 weight in a buffer (``wbuffer``).

``QuantizedLinear.cpp``: ``et_vk.linear_q8csw`` (weight-only, always the tiled shader) and
``et_vk.linear_q8ta_q8csw`` (static per-tensor int8 activations: ``quantize_and_pack_4h4w_per_tensor`` then
``linear_q8ta_q8csw_tiled``, route ``int8``; route ``tiled`` with the ``no-dot-product`` profile, where the C++
runs ``linear_q8csw_tiled`` on the float input). A packed weight with ``K / 4`` rows past the 2-D texture limit
(K = 131076) is a buffer. ``QuantizedLinearRequant.cpp``: ``et_vk.q4gsw_requant`` (exact int32 output).

Edges: zero points -128 and 127 (``zp_lo``, ``zp_hi``); input scales that saturate the int8 activation
codes (``saturate``); weight codes at ±127 and -128 where the scheme allows it (``extreme``); K and N not
multiples of 4 nor of the tile widths (N % 8 == 4); one row (GEMV) and M large enough for full tiles; latent
weights past the 4-bit range and zero scales (``q4gsw_requant``); below the bound over M.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

INT8PACK = "aten._weight_int8pack_mm.default"
QCS4W = "et_vk.linear_qcs4w.default"
STORAGES = ("buffer", "texture3d")
MAX_2D = 32768
"""The largest 2-D texture extent the wide cases are declared against: lavapipe and Adreno report 16384, NVIDIA's
driver 32768 (past both, the declared weight storage holds on each)."""
WIDE_K = MAX_2D + 4
"""K past the 2-D texture limit: the transposed int8 weight ``[K, N]`` of the tiled/coop routes goes to a buffer."""


def qcsnw_route(m: int, k: int, n: int, b: int = 1, layout: str = "width", nbits: int = 8) -> str:
    """The route ``QuantizedLinearQCSNW.cpp`` takes, restated from ``can_use_tiled_impl`` / ``can_use_coop_impl``."""
    if b != 1 or k % 4 or n % 4 or layout != "width":
        return "fallback" if nbits == 8 else "refused"
    if m == 1:
        return "coop"
    return f"tiled_o4x{next((r for r in (3, 4, 2) if m % r == 0), 1)}"


def _qcsnw_case(op: str, name: str, m: int, k: int, n: int, dtype: str, storage: str, b: int | None = None,
                layout: str = "width", flags: tuple[str, ...] = ()) -> KernelCase:
    nbits = 4 if op == QCS4W else 8
    route = qcsnw_route(m, k, n, b or 1, layout, nbits)
    options = () if route == "refused" else (("route", route),)
    if nbits == 8 and route != "fallback" and k > MAX_2D:
        options += (("weight_storage", "buffer"),)
    shape = ((("B", b),) if b else ()) + (("M", m), ("K", k), ("N", n))
    return KernelCase(op=op, name=name, shape=shape, dtype=dtype, storage=storage, options=options, flags=flags,
                      layout=layout)


def _activations(case: KernelCase, rng: np.random.Generator) -> np.ndarray:
    """Normal activations with a per-row offset (``[B, M, K]`` when the case has B)."""
    sizes = case.sizes
    shape = ((sizes["B"],) if "B" in sizes else ()) + (sizes["M"], sizes["K"])
    return (rng.standard_normal(shape) + rng.uniform(-1, 1, shape[:-1] + (1,))).astype(case.np_dtype)


def _with_extremes(codes: np.ndarray, values: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """``codes`` with each of ``values`` written at a random place of every row (every row sees every extreme)."""
    n, k = codes.shape
    for value in values:
        codes[np.arange(n), rng.integers(0, k, n)] = value
    return codes


def int8pack_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """Activations, uniform int8 codes with -128, -127 and 127 in every row (all ±127/-128 with ``extreme``),
    positive scales near ``1 / (74 sqrt(K))`` so outputs are O(1)."""
    n, k = case.size("N"), case.size("K")
    if case.has("extreme"):
        codes = rng.choice(np.array([-128, -127, 127], np.int8), (n, k))
    else:
        codes = _with_extremes(rng.integers(-128, 128, (n, k), dtype=np.int8), (-128, -127, 127), rng)
    scales = (rng.uniform(0.5, 1.5, n) / (74 * np.sqrt(k))).astype(case.np_dtype)
    return {"self": _activations(case, rng), "mat2": codes, "scales": scales}


def qcs4w_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """Activations, uniformly random bytes (every nibble, so codes -8 and 7 in both halves), scales near
    ``1 / (4.6 sqrt(K))``."""
    n, k = case.size("N"), case.size("K")
    weight = rng.integers(0, 256, (n, k // 2), dtype=np.uint8)
    weight[:, 0], weight[:, -1] = 0x0F, 0xF0  # codes -8 and 7 in both nibbles of every row
    scales = (rng.uniform(0.5, 1.5, n) / (4.6 * np.sqrt(k))).astype(case.np_dtype)
    return {"self": _activations(case, rng), "weight": weight, "scales": scales}


INT8PACK_SHAPES = ((4, 64, 16), (3, 64, 16), (2, 96, 8), (13, 64, 12), (13, 64, 64), (12, 256, 20),
                   (64, 128, 36), (1, 256, 16), (1, 64, 12), (1, 1024, 64), (5, 30, 16), (5, 64, 13), (1, 30, 8))
"""(M, K, N): tiled o4x4, o4x3, o4x2, o4x1 with N % 8 == 4, o4x1 with 64 columns (below the bound at M = 12 the
global size counts 3-row tiles of a 1-row shader past one 64-wide workgroup), o4x3 with N % 8 == 4, full tiles at
M = 64; coop (N % 8 == 4 once); the fallback for K % 4 != 0, N % 4 != 0, and K % 4 != 0 at M = 1."""


@register_test_suite(INT8PACK, make_args=int8pack_args, resizable=("M",))
def weight_int8pack_mm_suite() -> Iterator[KernelCase]:
    for (m, k, n), storage in itertools.product(INT8PACK_SHAPES, STORAGES):
        yield _qcsnw_case(INT8PACK, "weight_int8pack_mm", m, k, n, "fp32", storage)
    for storage in STORAGES:
        yield _qcsnw_case(INT8PACK, "weight_int8pack_mm", 5, 64, 16, "fp32", storage, b=2)
        yield _qcsnw_case(INT8PACK, "weight_int8pack_mm", 4, 64, 16, "fp32", storage, flags=("extreme",))
        yield _qcsnw_case(INT8PACK, "weight_int8pack_mm", 1, 64, 16, "fp32", storage, flags=("extreme",))
        for m, k, n in ((4, 64, 16), (1, 64, 16), (5, 30, 16)):
            yield _qcsnw_case(INT8PACK, "weight_int8pack_mm", m, k, n, "fp16", storage)
    for m in (1, 4):  # a buffer input: a [M, 32772] texture3d exceeds the 3-D texture limit
        yield _qcsnw_case(INT8PACK, "weight_int8pack_mm", m, WIDE_K, 8, "fp32", "buffer")
    for m, b in ((5, 2), (4, 1)):
        yield _qcsnw_case(INT8PACK, "weight_int8pack_mm", m, 64, 16, "fp32", "texture3d", b=b, layout="channels")


QCS4W_SHAPES = ((4, 64, 16), (3, 128, 8), (2, 64, 32), (13, 64, 16), (13, 64, 64), (12, 64, 12), (4, 64, 20),
                (64, 256, 64), (1, 64, 16), (1, 256, 64), (4, 30, 16), (4, 64, 10))
"""(M, K, N): tiled o4x4, o4x3, o4x2, o4x1 (with 64 columns: see ``INT8PACK_SHAPES``); N % 8 == 4 twice; full
tiles at M = 64; coop; refused K % 4 != 0 and N % 4 != 0."""


@register_test_suite(QCS4W, make_args=qcs4w_args, resizable=("M",))
def linear_qcs4w_suite() -> Iterator[KernelCase]:
    for (m, k, n), storage in itertools.product(QCS4W_SHAPES, STORAGES):
        yield _qcsnw_case(QCS4W, "linear_qcs4w", m, k, n, "fp32", storage)
    for storage in STORAGES:
        yield _qcsnw_case(QCS4W, "linear_qcs4w", 6, 64, 16, "fp32", storage, b=1)
        yield _qcsnw_case(QCS4W, "linear_qcs4w", 4, 64, 16, "fp32", storage, b=2)
        yield _qcsnw_case(QCS4W, "linear_qcs4w", 4, 64, 16, "fp16", storage)


Q8CSW = "et_vk.linear_q8csw.default"
Q8TA = "et_vk.linear_q8ta_q8csw.default"
WIDE_K4 = 4 * MAX_2D + 4
"""K with ``K / 4`` packed weight rows past the 2-D texture limit: the packed weight is a buffer."""


def _pad4(values: np.ndarray) -> np.ndarray:
    """Zero-padded to a multiple of 4, as ET-VK's fusion passes store per-channel scales, sums and bias."""
    return np.concatenate([values, np.zeros(-len(values) % 4, values.dtype)])


def _q8csw_weight(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """Symmetric int8 codes in [-127, 127] with ±127 in every row (only ±127 with ``extreme``), padded scales
    near ``1 / (73 sqrt(K))`` and, with ``bias``, a padded normal bias."""
    n, k = case.size("N"), case.size("K")
    if case.has("extreme"):
        codes = rng.choice(np.array([-127, 127], np.int8), (n, k))
    else:
        codes = _with_extremes(rng.integers(-127, 128, (n, k), dtype=np.int8), (-127, 127), rng)
    scales = (rng.uniform(0.5, 1.5, n) / (73 * np.sqrt(k))).astype(case.np_dtype)
    bias = _pad4(rng.standard_normal(n).astype(case.np_dtype)) if case.has("bias") else None
    return {"weights": codes, "weight_scales": _pad4(scales), "bias": bias}


def q8csw_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    return {"x": _activations(case, rng), **_q8csw_weight(case, rng)}


def input_qparams(case: KernelCase) -> tuple[float, int]:
    """Per-tensor asymmetric int8 qparams for the activations' range, as a PT2E observer chooses them: ``[-4, 4]``
    (``[0, 4]`` with ``zp_lo``: zero point -128; ``[-4, 0]`` with ``zp_hi``: 127); ``saturate`` shrinks the scale
    eightfold so most codes clip at -128 or 127. Fixed per case, not per draw: a smaller run below the bound keeps
    the graph's scalars."""
    low, high = (0.0 if case.has("zp_lo") else -4.0), (0.0 if case.has("zp_hi") else 4.0)
    scale = float(np.float32((high - low) / 255.0 / (8 if case.has("saturate") else 1)))
    return scale, int(np.clip(np.round(-128 - low / scale), -128, 127))


def q8ta_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """Activations (none negative with ``zp_lo``: zero point -128; none positive with ``zp_hi``: 127), their
    per-tensor qparams, q8csw weights with their true per-channel sums."""
    x = _activations(case, rng)
    if case.has("zp_lo"):
        x = np.abs(x)
    elif case.has("zp_hi"):
        x = -np.abs(x)
    scale, zero = input_qparams(case)
    weight = _q8csw_weight(case, rng)
    sums = _pad4(weight["weights"].astype(np.int64).sum(axis=1).astype(np.int32))
    return {"x": x, "input_scale": scale, "input_zero_point": zero, "weights": weight["weights"],
            "weight_sums": sums, "weight_scales": weight["weight_scales"], "bias": weight["bias"]}


def _q8_case(op: str, name: str, m: int, k: int, n: int, dtype: str, storage: str, route: str | None,
             b: int | None = None, flags: tuple[str, ...] = (), profile: str | None = None) -> KernelCase:
    options = ((("route", route),) if route else ()) + ((("weight_storage", "buffer"),) if k > 4 * MAX_2D else ())
    options += (("profile", profile),) if profile else ()
    shape = ((("B", b),) if b else ()) + (("M", m), ("K", k), ("N", n))
    return KernelCase(op=op, name=name, shape=shape, dtype=dtype, storage=storage, options=options, flags=flags)


Q8_SHAPES = ((4, 64, 16), (13, 64, 20), (4, 64, 36), (1, 64, 16), (40, 128, 36), (5, 64, 13), (3, WIDE_K4, 8))
"""(M, K, N): aligned; M % 4 != 0 with N % 8 == 4 (q8ta's 8-wide tiles); N % 8 == 4 past one workgroup's
columns; one row; full tiles at M = 40; N % 4 != 0; a buffer weight."""
Q8TA_BELOW_BOUND = (("M", 4), ("K", 64), ("N", 16))
"""The one int8-route shape run below the bound (the route has no resize function: every smaller run fails the
same way, and would hide the other cases' first verdicts)."""


def q8ta_resizable(case: KernelCase) -> tuple[str, ...]:
    """M for the weight-only route (it resizes) and for one plain int8-route case per storage."""
    plain = case.shape == Q8TA_BELOW_BOUND and not case.flags and case.dtype == "fp32"
    return ("M",) if dict(case.options).get("route") == "tiled" or plain else ()
Q8_REFUSED = (4, 30, 16)
"""K % 4 != 0: ``quantized_linear_impl`` refuses it."""


@register_test_suite(Q8CSW, make_args=q8csw_args, resizable=("M",))
def linear_q8csw_suite() -> Iterator[KernelCase]:
    for (m, k, n), storage in itertools.product(Q8_SHAPES, STORAGES):
        if k <= 4 * MAX_2D or storage == "buffer":
            yield _q8_case(Q8CSW, "linear_q8csw", m, k, n, "fp32", storage, "tiled")
    for storage in STORAGES:
        yield _q8_case(Q8CSW, "linear_q8csw", *Q8_REFUSED, "fp32", storage, None)
        yield _q8_case(Q8CSW, "linear_q8csw", 5, 64, 16, "fp32", storage, "tiled", b=2)
        yield _q8_case(Q8CSW, "linear_q8csw", 13, 64, 20, "fp32", storage, "tiled", flags=("bias",))
        yield _q8_case(Q8CSW, "linear_q8csw", 4, 64, 16, "fp32", storage, "tiled", flags=("extreme",))
        for m, k, n in ((4, 64, 16), (13, 256, 20), (1, 64, 16)):
            yield _q8_case(Q8CSW, "linear_q8csw", m, k, n, "fp16", storage, "tiled", flags=("bias",))


@register_test_suite(Q8TA, make_args=q8ta_args, resizable=q8ta_resizable)
def linear_q8ta_q8csw_suite() -> Iterator[KernelCase]:
    for (m, k, n), storage in itertools.product(Q8_SHAPES, STORAGES):
        if k <= 4 * MAX_2D or storage == "buffer":
            yield _q8_case(Q8TA, "linear_q8ta_q8csw", m, k, n, "fp32", storage, "int8")
    for storage in STORAGES:
        yield _q8_case(Q8TA, "linear_q8ta_q8csw", *Q8_REFUSED, "fp32", storage, None)
        yield _q8_case(Q8TA, "linear_q8ta_q8csw", 5, 64, 16, "fp32", storage, "int8", b=2)
        yield _q8_case(Q8TA, "linear_q8ta_q8csw", 13, 64, 20, "fp32", storage, "int8", flags=("bias",))
        for edge in ("zp_lo", "zp_hi", "saturate", "extreme"):
            yield _q8_case(Q8TA, "linear_q8ta_q8csw", 8, 64, 16, "fp32", storage, "int8", flags=(edge,))
        yield _q8_case(Q8TA, "linear_q8ta_q8csw", 4, 64, 16, "fp16", storage, "int8")
        yield _q8_case(Q8TA, "linear_q8ta_q8csw", 4, 64, 16, "fp32", storage, "tiled", profile="no-dot-product")
        yield _q8_case(Q8TA, "linear_q8ta_q8csw", 4, 64, 16, "fp32", storage, "tiled", flags=("bias",),
                       profile="no-dot-product")


REQUANT = "et_vk.q4gsw_requant.default"
REQUANT_SHAPES = ((16, 32, 32), (32, 64, 32), (12, 16, 16), (20, 64, 16), (64, 256, 64), (4, 4, 4), (8, 128, 128))
"""(N, K, group size): one group; two; N % 8 == 4 (the padded ``0x88888888`` tile); N4 odd with four groups;
a bigger grid; the smallest; group 128."""
REQUANT_REFUSED = ((10, 32, 32), (16, 48, 32), (16, 30, 2))
"""N % 4 != 0; K % group_size != 0; K % 4 != 0 with a group size not a multiple of 4."""


def requant_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """Scales ``[K / g, N]`` (some zero with ``zero_scale``); latent weights whose quotients ``latent / scale`` lie
    0.2 or more from a ``.5`` tie (the shader divides without correct rounding) and reach past [-8, 7] so codes
    clamp (every one, 45 to 700 times past, with ``saturate``); float16 latent with ``half``."""
    n, k, g = case.size("N"), case.size("K"), case.size("g")
    scales = rng.uniform(0.005, 0.02, (-(-k // g), n)).astype(np.float32)
    codes = rng.integers(-11, 12, (n, k))
    if case.has("saturate"):  # |quotient| >= 0.7 * 64: every code clamps
        codes = np.where(codes == 0, 1, codes) * 64
    target = codes + rng.uniform(-0.3, 0.3, (n, k))
    latent = (target * scales.T[:, np.arange(k) // g]).astype(np.float16 if case.has("half") else np.float32)
    if case.has("zero_scale"):
        scales[rng.integers(0, scales.shape[0], 3), rng.integers(0, n, 3)] = 0
    return {"latent": latent, "scales": scales, "group_size": g}


def _requant_case(n: int, k: int, g: int, storage: str = "buffer", flags: tuple[str, ...] = ()) -> KernelCase:
    return KernelCase(op=REQUANT, name="q4gsw_requant", shape=(("N", n), ("K", k), ("g", g)), dtype="int32",
                      storage=storage, flags=flags)


@register_test_suite(REQUANT, make_args=requant_args)
def q4gsw_requant_suite() -> Iterator[KernelCase]:
    """The packed output is exact (int32). Not resizable: the latent is a weight, and ``scales`` (a constant)
    is laid out for the built N, so no smaller latent has a defined result."""
    for n, k, g in REQUANT_SHAPES:
        yield _requant_case(n, k, g)
    for flag in ("zero_scale", "saturate"):
        yield _requant_case(32, 64, 32, flags=(flag,))
        yield _requant_case(12, 16, 16, flags=(flag,))
    for n, k, g in REQUANT_REFUSED:
        yield _requant_case(n, k, g)
    yield _requant_case(16, 32, 32, "texture3d")
    yield _requant_case(16, 32, 32, flags=("half",))
