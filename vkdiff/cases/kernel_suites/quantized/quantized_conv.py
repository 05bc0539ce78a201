"""The quantized 2-D convolutions of ``QuantizedConvolution.cpp``, one case per route the C++ takes and per edge.

``et_vk.conv2d_q8csw`` (route ``weight_only``) and ``et_vk.conv2d_q8ta_q8csw`` (``int8``; ``weight_only`` with the
``no-dot-product`` profile, its inputs on the quantization grid (``ongrid``) so both routes compute one function)
take a float texture3d, channels-packed input (the only variants; the shaders assume it) and write a float texture3d.
``et_vk.conv2d_q8ta_q8csw_q8to`` and ``_q8to_dw`` (the same C++) take int8x4 buffers: ``dw`` (groups == C_in,
any layout), and in 4W4C ``pw`` (1×1, ``is_s1p0d1_pointwise``), ``im2col`` (1×1, or 3×3 and groups 1) and
``direct`` (larger kernels, grouped 3×3); in 4C / 4C1W ``general`` (``Q8taConv2d.cpp``'s node; 4W is refused).

Edges: input zero points -128 / 127 (``zp_lo`` / ``zp_hi``) and output ones (``ozp_lo`` / ``ozp_hi``); an output
scale that saturates most codes (``saturate``); weight codes all ±127 (``extreme``; every row holds ±127
otherwise); channels and output channels ≡ 1, 2, 3 (mod 4); stride, padding, dilation (and one asymmetric 1×1
stride, which ``is_s1p0d1_pointwise`` waves through); 1×1, 3×3, 5×5 kernels; groups (aligned and not) and
depthwise; H = W = 1; batch 2; a K past the 2-D texture limit (``wbuffer``: the packed weight in a buffer).
Below the bound: H and W shrink where ``2p ≥ d(K−1)`` keeps every smaller size valid.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

Q8CSW = "et_vk.conv2d_q8csw.default"
Q8TA = "et_vk.conv2d_q8ta_q8csw.default"
Q8TO = "et_vk.conv2d_q8ta_q8csw_q8to.default"
Q8TO_DW = "et_vk.conv2d_q8ta_q8csw_q8to_dw.default"
INT8X4 = "int8x4_4w4c"

INPUT_SCALE = 0.05
"""Scale of the float ops' activations (N(0, 2²): codes up to ±127 around the zero point)."""
CODES_SCALE = 0.02
"""Input scale of the int8 ops."""
ZERO_POINTS = {"zp_lo": -128, "zp_hi": 127}
OUT_ZERO_POINTS = {"ozp_lo": -128, "ozp_hi": 127}
WIDE_C = 131076
"""Input channels of a 1×1 conv whose packed int8 weight (K/4 = 32769 rows) passes the 2-D limit of lavapipe (16384)
and of NVIDIA's driver (32768)."""


def case(op: str, name: str, route: str | None, *, c: int, h: int, w: int, o: int, k: int, s: int = 1, p: int = 0,
         d: int = 1, g: int = 1, n: int = 1, kw: int | None = None, sw: int | None = None,
         flags: tuple[str, ...] = (), storage: str | None = None, layout: str | None = None,
         options: tuple[tuple[str, str], ...] = ()) -> KernelCase:
    """One case; ``kw``/``sw`` give a kernel width / W stride apart from ``k``/``s``."""
    shape = ((("N", n),) if n != 1 else ()) + (("C", c), ("H", h), ("W", w), ("O", o), ("K", k))
    shape += ((("Kw", kw),) if kw is not None else ()) + (("s", s),) + ((("sw", sw),) if sw is not None else ())
    shape += (("p", p), ("d", d), ("g", g))
    float_op = op in (Q8CSW, Q8TA)
    return KernelCase(op=op, name=name, shape=shape, dtype="fp32" if float_op else "int8",
                      storage=storage or ("texture3d" if float_op else "buffer"),
                      layout=layout or ("channels" if float_op else INT8X4),
                      options=((("route", route),) if route else ()) + options, flags=flags)


def _geometry(z: dict[str, int]) -> dict[str, Any]:
    return {"kernel_size": [z["K"], z.get("Kw", z["K"])], "stride": [z["s"], z.get("sw", z["s"])],
            "padding": [z["p"], z["p"]], "dilation": [z["d"], z["d"]], "groups": z["g"]}


def _pad4(a: np.ndarray) -> np.ndarray:
    """The last axis zero-padded to a multiple of 4, as the fusion pattern pads weights, scales and bias."""
    return np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, -a.shape[-1] % 4)])


def _codes(case: KernelCase, rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """Int8 weight codes in [-127, 127], each row holding -127 and 127 (one-tap rows: two of them), all ±127 with
    ``extreme``."""
    if case.has("extreme"):
        return rng.choice(np.array([-127, 127], np.int8), (rows, cols))
    codes = rng.integers(-127, 128, (rows, cols)).astype(np.int8)
    if cols == 1:
        codes.reshape(-1)[rng.choice(rows, 2, replace=False)] = (-127, 127)
        return codes
    for row in codes:
        row[rng.choice(cols, 2, replace=False)] = (-127, 127)
    return codes


def _weights(case: KernelCase, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
    """(weights in the op's layout, their padded per-channel sums, fan-in)."""
    z = case.sizes
    kh, kw = z["K"], z.get("Kw", z["K"])
    if case.op in (Q8TO, Q8TO_DW) and z["g"] == z["C"]:
        codes = _codes(case, rng, z["C"], kh * kw)
        weights = _pad4(np.ascontiguousarray(codes.T.reshape(kh, kw, z["C"])))
        return weights, _pad4(codes.sum(axis=1, dtype=np.int32)), kh * kw
    fan_in = kh * kw * z["C"] // z["g"]
    codes = _codes(case, rng, z["O"], fan_in)
    return _pad4(codes), _pad4(codes.sum(axis=1, dtype=np.int32)), fan_in


def _zero_point(case: KernelCase, table: dict[str, int], default: int) -> int:
    return next((v for f, v in table.items() if case.has(f)), default)


def quantized_conv_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """The op's arguments by schema name; scales and zero points depend on the case's flags and fan-in only,
    so a smaller run below the bound keeps the built scalars."""
    z = case.sizes
    shape = (z.get("N", 1), z["C"], z["H"], z["W"])
    weights, sums, fan_in = _weights(case, rng)
    oc = z["C"] if weights.ndim == 3 else z["O"]
    float_op = case.op in (Q8CSW, Q8TA)
    s_x = np.float32(INPUT_SCALE if float_op else CODES_SCALE)
    z_x = _zero_point(case, ZERO_POINTS, -3)
    w_scales = (rng.uniform(0.5, 1.5, oc) / (74.0 * np.sqrt(fan_in))).astype(np.float32)
    y_std = float(s_x) * 74.0
    args: dict[str, Any] = {"x": _activations(case, rng, shape, s_x, z_x)}
    if case.op != Q8CSW:
        args.update(input_scale=float(s_x), input_zero_point=z_x)
    args.update(weights=weights)
    if case.op != Q8CSW:
        args.update(weight_sums=sums)
    args.update(weight_scales=_pad4(w_scales))
    if not float_op:
        args.update(output_scale=float(np.float32(y_std / (400.0 if case.has("saturate") else 40.0))),
                    output_zero_point=_zero_point(case, OUT_ZERO_POINTS, 5))
    bias = (rng.standard_normal(oc) * y_std).astype(np.float32)
    args.update(bias=_pad4(bias) if case.has("bias") else None, **_geometry(z))
    return args


def _activations(case: KernelCase, rng: np.random.Generator, shape, s_x: np.float32, z_x: int) -> np.ndarray:
    """int8 codes (the full range, -128 and 127 included) for the int8 ops; N(0, 2²) floats, or
    ``(q - z_x) · s_x`` with ``ongrid``."""
    if case.op in (Q8TO, Q8TO_DW) or case.has("ongrid"):
        q = rng.integers(-128, 128, shape)
        q.reshape(-1)[rng.choice(q.size, 2, replace=False)] = (-128, 127)
        if not case.has("ongrid"):
            return q.astype(np.int8)
        return ((q - z_x) * s_x).astype(np.float32)
    return (rng.standard_normal(shape) * 2).astype(np.float32)


def resizable(case: KernelCase) -> tuple[str, ...]:
    """H and W may shrink to 1 when the padding covers the dilated kernel (``2p ≥ d(K−1)``)."""
    z = case.sizes
    kernel = max(z["K"], z.get("Kw", z["K"]))
    return ("H", "W") if 2 * z["p"] >= z["d"] * (kernel - 1) and z["C"] < WIDE_C else ()


def _float_routes(op: str, name: str, route: str, **extra: Any) -> Iterator[KernelCase]:
    """The float ops' geometries (one route)."""
    def c(flags: tuple[str, ...] = (), **kw: Any) -> KernelCase:
        kept = tuple(f for f in flags if op != Q8CSW or f not in ZERO_POINTS)  # conv2d_q8csw has no zero point
        return case(op, name, route, flags=kept, **{**extra, **kw})

    yield c(c=5, h=9, w=11, o=8, k=3, p=1, flags=("bias",))
    yield c(c=8, h=7, w=7, o=12, k=3, s=2, p=1, flags=("zp_lo",))
    yield c(c=3, h=10, w=9, o=6, k=3, p=2, d=2, flags=("bias", "zp_hi"))
    yield c(c=6, h=5, w=6, o=7, k=1, flags=("bias",))
    yield c(c=4, h=9, w=9, o=4, k=5, p=2)
    yield c(c=8, h=6, w=7, o=8, k=3, p=1, g=2, flags=("bias",))
    yield c(c=6, h=6, w=5, o=8, k=3, p=1, g=2, flags=("bias", "extreme"))
    yield c(c=7, h=1, w=1, o=5, k=3, p=1, flags=("bias",))


@register_test_suite(Q8CSW, make_args=quantized_conv_args, resizable=resizable)
def conv2d_q8csw_cases() -> Iterator[KernelCase]:
    """im2col + ``conv2d_q8csw_linear_tiled``: geometries, groups, batch 2, a refused group, a buffer weight."""
    yield from _float_routes(Q8CSW, "conv2d_q8csw", "weight_only")
    yield case(Q8CSW, "conv2d_q8csw", "weight_only", n=2, c=4, h=5, w=6, o=4, k=3, p=1, flags=("bias",))
    yield case(Q8CSW, "conv2d_q8csw", None, c=6, h=5, w=5, o=6, k=3, p=1, g=2)
    yield case(Q8CSW, "conv2d_q8csw", "weight_only", c=7284, h=3, w=3, o=4, k=3, flags=("bias",),
               options=(("weight_storage", "buffer"),))


@register_test_suite(Q8TA, make_args=quantized_conv_args, resizable=resizable)
def conv2d_q8ta_q8csw_cases() -> Iterator[KernelCase]:
    """``quantize_and_pack_im2col`` + ``conv2d_q8ta_q8csw_linear_tiled``, and the weight-only route."""
    yield from _float_routes(Q8TA, "conv2d_q8ta_q8csw", "int8")
    yield case(Q8TA, "conv2d_q8ta_q8csw", "int8", c=4, h=6, w=7, o=8, k=3, p=1, g=2, flags=("bias",))
    yield case(Q8TA, "conv2d_q8ta_q8csw", "int8", n=2, c=4, h=5, w=6, o=4, k=3, p=1, flags=("bias",))
    no_dot = (("profile", "no-dot-product"),)
    yield case(Q8TA, "conv2d_q8ta_q8csw", "weight_only", c=5, h=9, w=11, o=8, k=3, p=1, flags=("bias", "ongrid"),
               options=no_dot)
    yield case(Q8TA, "conv2d_q8ta_q8csw", "weight_only", c=8, h=6, w=7, o=8, k=3, p=1, g=2,
               flags=("ongrid", "zp_hi"), options=no_dot)


def _q8to_routes(op: str, name: str) -> Iterator[KernelCase]:
    """Every route of ``static_quantized_conv2d_impl`` with its edges."""
    c = lambda route, **kw: case(op, name, route, **kw)  # noqa: E731
    yield c("pw", c=8, h=5, w=7, o=12, k=1, flags=("bias",))
    yield c("pw", c=6, h=4, w=4, o=5, k=1, flags=("zp_lo", "ozp_hi"))
    yield c("pw", c=7, h=1, w=1, o=6, k=1, flags=("bias", "extreme"))
    yield c("pw", c=16, h=3, w=5, o=16, k=1, g=2, flags=("bias",))
    yield c("pw", c=8, h=3, w=5, o=8, k=1, g=2, flags=("bias",))
    yield c("pw", c=8, h=5, w=8, o=8, k=1, s=1, sw=2, flags=("bias",))
    yield c("im2col", c=8, h=7, w=9, o=8, k=3, flags=("bias", "zp_lo"))
    yield c("im2col", c=8, h=8, w=8, o=8, k=3, p=1, flags=("bias", "zp_hi"))
    yield c("im2col", c=8, h=9, w=11, o=8, k=3, p=1, flags=("bias",))
    yield c("im2col", c=5, h=9, w=10, o=7, k=3, s=2, p=1, flags=("zp_lo", "ozp_lo"))
    yield c("im2col", c=4, h=10, w=9, o=8, k=3, p=2, d=2, flags=("bias",))
    yield c("im2col", c=8, h=7, w=9, o=8, k=1, s=2, flags=("bias",))
    yield c("im2col", c=8, h=6, w=8, o=8, k=3, p=1, flags=("bias", "saturate"))
    yield c("im2col", c=4, h=1, w=1, o=4, k=3, p=1, flags=("bias",))
    yield c("im2col", n=2, c=8, h=4, w=8, o=8, k=3, p=1, flags=("bias",))
    yield c("direct", c=8, h=9, w=10, o=8, k=5, flags=("bias",))
    yield c("direct", c=8, h=9, w=9, o=8, k=5, p=2, flags=("bias",))
    yield c("direct", c=4, h=11, w=12, o=4, k=5, s=2, p=2, flags=("zp_hi",))
    yield c("direct", c=8, h=8, w=8, o=8, k=3, p=1, g=2, flags=("bias",))
    yield c("direct", c=4, h=8, w=8, o=8, k=3, p=1, g=2, flags=("bias",))
    yield c("direct", c=4, h=12, w=12, o=4, k=5, p=4, d=2, flags=("bias",))
    yield c("dw", c=12, h=7, w=9, o=12, k=3, g=12, flags=("bias", "zp_lo"))
    yield c("dw", c=8, h=8, w=8, o=8, k=3, p=1, g=8, flags=("bias", "zp_hi"))
    yield c("dw", c=8, h=9, w=11, o=8, k=3, p=1, g=8, flags=("bias",))
    yield c("dw", c=6, h=7, w=9, o=6, k=3, s=2, p=1, g=6, flags=("zp_lo", "saturate"))
    yield c("dw", c=4, h=9, w=9, o=4, k=5, p=2, g=4, flags=("bias", "extreme"))
    yield c("dw", c=4, h=1, w=1, o=4, k=1, g=4, flags=("bias",))
    yield case(op, name, "dw", c=8, h=5, w=6, o=8, k=3, p=1, g=8, flags=("bias",), layout="int8x4_4c")
    yield case(op, name, "general", c=8, h=6, w=7, o=8, k=3, p=1, flags=("bias",), layout="int8x4_4c")
    yield case(op, name, "general", c=5, h=5, w=6, o=6, k=1, flags=("zp_lo",), layout="int8x4_4c1w")
    yield case(op, name, None, c=4, h=4, w=5, o=4, k=3, p=1, flags=("bias",), layout="int8x4_4w")


@register_test_suite(Q8TO, make_args=quantized_conv_args, resizable=resizable)
def conv2d_q8ta_q8csw_q8to_cases() -> Iterator[KernelCase]:
    """``static_quantized_conv2d_impl``'s routes, plus a 1×1 conv whose packed weight needs a buffer."""
    yield from _q8to_routes(Q8TO, "conv2d_q8ta_q8csw_q8to")
    yield case(Q8TO, "conv2d_q8ta_q8csw_q8to", None, c=WIDE_C, h=1, w=1, o=4, k=1, flags=("bias",))


@register_test_suite(Q8TO_DW, make_args=quantized_conv_args, resizable=resizable)
def conv2d_q8ta_q8csw_q8to_dw_cases() -> Iterator[KernelCase]:
    """The ``_dw`` name runs the same C++: its depthwise cases and one regular conv."""
    yield from (c for c in _q8to_routes(Q8TO_DW, "conv2d_q8ta_q8csw_q8to_dw") if dict(c.options).get("route") == "dw")
    yield case(Q8TO_DW, "conv2d_q8ta_q8csw_q8to_dw", "im2col", c=8, h=6, w=8, o=8, k=3, p=1, flags=("bias",))
