"""The static-int8 convolutions with int8x4 activations (``Q8taConv2d*.cpp``): ``et_vk.q8ta_conv2d`` (its im2col
and general routes), ``_general``, ``_im2col``, ``_pw``, ``_dw`` and ``_transposed``.

Routes (option ``route``, checked by the launchers): ``general``, ``im2col``, ``pw``, ``dw``, ``transposed``, each
dot-product one also as ``<route>_fallback`` under the routing profile ``no-dot-product`` (a device without
``VK_KHR_shader_integer_dot_product``); ``profile=mali`` takes im2col for grouped convs too. Layouts: the input and
output are int8x4 buffers in every layout the C++ accepts (4C, 4C1W, 4W4C; the pointwise op's input 4W4C only),
the output's apart from the input's through option ``out_layout``; real models resolve ``q8ta_conv2d``'s input to 4C
(im2col) or 4C1W (general) and the depthwise input to 4C1W (``ResolveLayouts.cpp``).

Arguments are what the fusion pattern writes (:func:`pattern_weight`: weight matrices in its ``(kh, kw, ic)``
order; sums, scales and bias padded to 4). Inputs are uniform int8 codes with -128 and 127 first,
weights uniform in [-127, 127] with ±127 first. Qparams come from the flags (never from the generator, so the
below-the-bound runs keep them): ``s_x = 0.02``, ``s_w`` ≈ 0.01, and ``s_o`` set from the fan-in so the output
codes spread over about ±48 around ``z_o``; flags ``zlo`` (both zero points -128) and ``zhi`` (127), ``sat``
(``s_o`` / 6: most codes saturate), ``sat32`` (``y / s_o`` past 2³¹: the shader's float → int conversion is out
of range before its clamp), ``w127`` (every weight ±127), ``relu``, ``bias``. Edges: channels ≡ 1, 2, 3 (mod 4)
(the depthwise weight padded to 4 as ``align_width`` pads it); kernels 1×1, 3×3, 5×5 and non-square; stride,
padding, dilation (``sw``/``pw`` name a width stride / padding differing from the height's); H or W of 1; groups,
a grouped 1×1 conv (the pattern sends it to ``q8ta_conv2d_pw``) and 3 output channels per group (the C++ accepts it,
the pattern does not); batch 2 (the shaders compute batch 0 only); the route boundaries of ``q8ta_conv2d`` (``ICg``
32, ``H_out·W_out`` 4096) and its ``(4, 2, 8)`` local size. Below the bound: N, H and W shrink where the geometry
stays valid at 1.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

CONV = "et_vk.q8ta_conv2d.default"
GENERAL = "et_vk.q8ta_conv2d_general.default"
IM2COL = "et_vk.q8ta_conv2d_im2col.default"
PW = "et_vk.q8ta_conv2d_pw.default"
DW = "et_vk.q8ta_conv2d_dw.default"
TRANSPOSED = "et_vk.q8ta_conv2d_transposed.default"
LAYOUTS = ("int8x4_4c", "int8x4_4c1w", "int8x4_4w4c")
"""The int8x4 layouts ``q8ta_conv2d_check_packed_dim_info`` accepts."""
NO_DOT = "no-dot-product"
INPUT_SCALE = 0.02
WEIGHT_SCALE = 0.01
CODE_SPREAD = 48.0
"""Standard deviation (in output codes) of the requantized output before the flags' changes."""
ZERO_POINTS = {"zlo": (-128, -128), "zhi": (127, 127)}
"""Flag → (input zero point, output zero point); otherwise (3, -5)."""


def q8_case(op: str, route: str, *, c: int, h: int, w: int, o: int, kh: int, kw: int | None = None, s: int = 1,
            p: int = 0, d: int = 1, g: int = 1, n: int = 1, sw: int | None = None, pw: int | None = None,
            op_pad: int | None = None, layout: str = "int8x4_4c1w", out: str | None = None,
            profile: str | None = None, flags: tuple[str, ...] = ("bias",)) -> KernelCase:
    """A case: geometry in the id, the route (``_fallback`` added under ``no-dot-product``) and layouts as knobs."""
    shape = ([("N", n)] if n != 1 else []) + [("C", c), ("H", h), ("W", w), ("O", o), ("KH", kh), ("KW", kw or kh),
                                              ("s", s), ("p", p), ("d", d), ("g", g)]
    shape += [(k, v) for k, v in (("sw", sw), ("pw", pw), ("op", op_pad)) if v is not None]
    route = f"{route}_fallback" if profile == NO_DOT and route != "dw" else route
    options = (("route", route),) + ((("out_layout", out),) if out else ()) + (
        (("profile", profile),) if profile else ())
    name = op.split(".")[1]
    return KernelCase(op=op, name=name, shape=tuple(shape), dtype="int8", storage="buffer", layout=layout,
                      options=options, flags=flags)


def geometry(case: KernelCase) -> dict[str, Any]:
    """The conv lists of a case (H first): kernel, stride, padding, dilation (and output padding)."""
    z = case.sizes
    out = {"kernel_size": [z["KH"], z["KW"]], "stride": [z["s"], z.get("sw", z["s"])],
           "padding": [z["p"], z.get("pw", z["p"])], "dilation": [z["d"], z["d"]]}
    if "op" in z:
        out["output_padding"] = [z["op"], z["op"]]
    return out


def _codes(rng: np.random.Generator, shape: tuple[int, ...], low: int, edges: tuple[int, ...]) -> np.ndarray:
    """Uniform int8 codes in [low, 127] with ``edges`` first."""
    x = rng.integers(low, 128, size=shape).astype(np.int8)
    flat = x.reshape(-1)
    flat[: min(len(edges), flat.size)] = edges[: flat.size]
    return x


def _weights(case: KernelCase, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    if case.has("w127"):
        return (rng.choice(np.array([-127, 127], np.int8), size=shape)).astype(np.int8)
    return _codes(rng, shape, -127, (127, -127))


def fan_in(case: KernelCase) -> int:
    """Taps per output: ``KH·KW·ICg`` (transposed: about ``KH·KW·ICg / (sh·sw)`` reach each output)."""
    z = case.sizes
    taps = z["KH"] * z["KW"] * (1 if case.op == DW else z["C"] // z["g"])
    return max(1, taps // (z["s"] * z.get("sw", z["s"])) if case.op == TRANSPOSED else taps)


def qparams(case: KernelCase) -> dict[str, Any]:
    """Scales and zero points from the flags and the fan-in (the same at every size of a case)."""
    z_x, z_o = ZERO_POINTS.get(next((f for f in case.flags if f in ZERO_POINTS), ""), (3, -5))
    spread = 74.0 * 73.0 * np.sqrt(fan_in(case)) * INPUT_SCALE * WEIGHT_SCALE
    s_o = spread / CODE_SPREAD / (6.0 if case.has("sat") else 1.0)
    if case.has("sat32"):
        s_o = spread * 1e-10
    return {"input_scale": INPUT_SCALE, "input_zero_point": z_x, "output_scale": float(np.float32(s_o)),
            "output_zero_point": z_o}


def pad4(a: np.ndarray) -> np.ndarray:
    """The last axis zero-padded to a multiple of 4 (``align_width_and_update_state_dict``)."""
    return np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, -a.shape[-1] % 4)])


def pattern_weight(case: KernelCase, weight: np.ndarray) -> np.ndarray:
    """A module's int8 weight as ``make_q8ta_conv2d_custom_op`` stores it for ``case.op`` (conv: ``[OC, ICg, KH, KW]``
    → ``[OC, align4(KH·KW·ICg)]``; depthwise → ``[KH, KW, align4(C)]``; transposed: ``[IC, OCg, KH, KW]`` regrouped
    to ``[OC, align4(KH·KW·ICg)]``); ``tests/cases/test_q8ta_conv_suite.py`` checks it against the references
    that ``tests/reference/test_q8ta_conv.py`` checks against the pattern itself."""
    if case.op == DW:
        return pad4(weight.transpose(2, 3, 1, 0).reshape(weight.shape[2], weight.shape[3], weight.shape[0]))
    if case.op == TRANSPOSED:
        g = case.sizes["g"]
        ic, ocg, kh, kw = weight.shape
        weight = weight.reshape(g, ic // g, ocg, kh, kw).transpose(0, 2, 1, 3, 4).reshape(g * ocg, ic // g, kh, kw)
    return pad4(np.ascontiguousarray(weight.transpose(0, 2, 3, 1)).reshape(weight.shape[0], -1))


def _weight_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """The weight, its sums (over each output channel's taps) and per-channel scales, as the pattern writes them."""
    z = case.sizes
    c, o, g, kh, kw = z["C"], z["O"], z["g"], z["KH"], z["KW"]
    shape = {DW: (c, 1, kh, kw), TRANSPOSED: (c, o // g, kh, kw)}.get(case.op, (o, c // g, kh, kw))
    weights = pattern_weight(case, _weights(case, rng, shape))
    sums = weights.astype(np.int64).sum(axis=(0, 1) if case.op == DW else 1)
    scales = (rng.uniform(0.5, 1.5, o) * WEIGHT_SCALE).astype(np.float32)
    return {"weights": weights, "weight_sums": pad4(sums.astype(np.int32)), "weight_scales": pad4(scales)}


def q8ta_conv_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """The schema's arguments of any q8ta conv from the case's sizes and flags."""
    z = case.sizes
    q = qparams(case)
    x = _codes(rng, (z.get("N", 1), z["C"], z["H"], z["W"]), -128, (-128, 127))
    args: dict[str, Any] = {"x": x, "input_scale": q["input_scale"], "input_zero_point": q["input_zero_point"],
                            **_weight_args(case, rng), "output_scale": q["output_scale"],
                            "output_zero_point": q["output_zero_point"]}
    bias = rng.standard_normal(z["O"]) * q["output_scale"] * 16
    args["bias"] = pad4(bias.astype(np.float32)) if case.has("bias") else None
    args.update(geometry(case), groups=z["g"], activation="relu" if case.has("relu") else "none")
    return args


def resizable(case: KernelCase) -> tuple[str, ...]:
    """N, and H / W where the geometry still gives an output at size 1."""
    z, geo = case.sizes, geometry(case)
    names = ["N"]
    for i, dim in enumerate(("H", "W")):
        k, p, d = geo["kernel_size"][i], geo["padding"][i], geo["dilation"][i]
        valid = (k + z.get("op", 0) - 2 * p >= 1) if case.op == TRANSPOSED else (2 * p >= d * (k - 1))
        if valid:
            names.append(dim)
    return tuple(names)


@register_test_suite(CONV, make_args=q8ta_conv_args, resizable=resizable)
def q8ta_conv2d_suite() -> Iterator[KernelCase]:
    """Both routes at their boundaries, in every layout, with and without int8 dot product, and the edges."""
    c = lambda route, **kw: q8_case(CONV, route, **kw)  # noqa: E731
    for layout in LAYOUTS:
        yield c("general", c=3, h=9, w=11, o=13, kh=3, s=2, p=1, layout=layout)
        yield c("im2col", c=8, h=9, w=11, o=12, kh=3, p=1, layout=layout, flags=("bias", "relu", "zlo"))
    for profile in (None, NO_DOT):
        yield c("general", c=6, h=7, w=9, o=7, kh=3, p=1, profile=profile, out="int8x4_4w4c")
        yield c("im2col", c=8, h=9, w=11, o=12, kh=3, p=1, profile=profile, layout="int8x4_4c", out="int8x4_4c1w")
    yield c("im2col", c=32, h=66, w=66, o=8, kh=3, p=1, layout="int8x4_4c", flags=())
    yield c("general", c=8, h=65, w=65, o=8, kh=3, p=1, flags=())
    yield c("general", c=8, h=9, w=7, o=8, kh=3, p=1, g=2)
    yield c("im2col", c=8, h=9, w=7, o=8, kh=3, p=1, g=2, profile="mali")
    yield c("general", c=5, h=10, w=9, o=6, kh=3, s=2, p=2, d=2, flags=("bias", "zhi"))
    yield c("general", c=7, h=12, w=11, o=5, kh=5, p=2, flags=("sat",))
    yield c("im2col", c=8, h=9, w=10, o=9, kh=1, kw=3, p=0, pw=1, flags=("bias", "sat32"))
    yield c("im2col", c=4, h=14, w=14, o=16, kh=1, s=2, flags=("w127",))
    yield c("general", c=3, h=1, w=1, o=5, kh=3, p=1)
    yield c("general", c=2, h=1, w=9, o=3, kh=3, kw=1, p=1, pw=0, s=1, sw=2)
    yield c("general", c=6, h=16, w=16, o=32, kh=3, p=1, flags=("bias", "relu", "zlo"))
    yield c("general", n=2, c=6, h=7, w=9, o=7, kh=3, p=1)
    yield c("im2col", n=2, c=8, h=5, w=6, o=4, kh=3, p=1)
    yield c("general", c=8, h=9, w=7, o=6, kh=3, p=1, g=2, flags=())


@register_test_suite(GENERAL, make_args=q8ta_conv_args, resizable=resizable)
def q8ta_conv2d_general_suite() -> Iterator[KernelCase]:
    """The general shader where ``q8ta_conv2d`` would take im2col, and its other edges."""
    c = lambda **kw: q8_case(GENERAL, "general", **kw)  # noqa: E731
    for profile in (None, NO_DOT):
        yield c(c=8, h=9, w=11, o=12, kh=3, p=1, profile=profile, flags=("bias", "relu", "zlo"))
        yield c(c=12, h=8, w=7, o=12, kh=3, s=2, p=1, g=3, profile=profile, layout="int8x4_4w4c", out="int8x4_4c")
    yield c(c=5, h=11, w=13, o=7, kh=3, kw=5, p=1, pw=2, d=1, flags=("bias", "sat"))
    yield c(c=6, h=9, w=9, o=10, kh=1, s=2, layout="int8x4_4c", out="int8x4_4w4c", flags=("zhi",))


@register_test_suite(IM2COL, make_args=q8ta_conv_args, resizable=resizable)
def q8ta_conv2d_im2col_suite() -> Iterator[KernelCase]:
    """im2col + pointwise GEMM: grouped (Mali's route), strided, dilated, 5×5, widths not a multiple of 4."""
    c = lambda **kw: q8_case(IM2COL, "im2col", **kw)  # noqa: E731
    for profile in (None, NO_DOT):
        yield c(c=8, h=9, w=7, o=8, kh=3, p=1, g=2, profile=profile)
        yield c(c=4, h=11, w=13, o=7, kh=5, s=2, p=2, profile=profile, layout="int8x4_4w4c", flags=("relu", "zlo"))
    yield c(c=8, h=10, w=9, o=5, kh=3, p=2, d=2, layout="int8x4_4c", out="int8x4_4w4c", flags=("bias", "zhi"))
    yield c(c=16, h=6, w=5, o=16, kh=3, p=1, g=4, out="int8x4_4c", flags=("bias", "sat"))
    yield c(c=4, h=1, w=1, o=6, kh=3, p=1)


@register_test_suite(PW, make_args=q8ta_conv_args, resizable=resizable)
def q8ta_conv2d_pw_suite() -> Iterator[KernelCase]:
    """4W4C in, every output layout, channel counts off 4, deep K, 1×1 spatial, and a grouped 1×1 conv (the
    pattern routes ``groups > 1`` pointwise convs here; ``Q8taConv2dPW.cpp`` ignores groups)."""
    c = lambda **kw: q8_case(PW, "pw", kh=1, layout="int8x4_4w4c", **kw)  # noqa: E731
    for out in LAYOUTS:
        yield c(c=9, h=7, w=10, o=7, out=out)
    for profile in (None, NO_DOT):
        yield c(c=64, h=5, w=6, o=30, profile=profile, flags=("bias", "relu", "zlo"))
    yield c(c=3, h=9, w=9, o=5, flags=("zhi", "sat"))
    yield c(c=6, h=1, w=1, o=2, flags=("w127",))
    yield c(c=16, h=7, w=9, o=16, flags=("bias", "sat32"))
    yield c(c=16, h=5, w=7, o=16, g=2)
    yield c(n=2, c=8, h=3, w=5, o=4)


@register_test_suite(DW, make_args=q8ta_conv_args, resizable=resizable)
def q8ta_conv2d_dw_suite() -> Iterator[KernelCase]:
    """Every layout, channels off 4 (weights padded as the pattern pads them), kernels 3, 5, non-square, stride,
    dilation, 1×1 spatial, batch 2."""
    c = lambda **kw: q8_case(DW, "dw", **kw)  # noqa: E731
    for layout in LAYOUTS:
        yield c(c=8, h=9, w=11, o=8, kh=3, p=1, g=8, layout=layout, flags=("bias", "relu", "zlo"))
    yield c(c=6, h=10, w=9, o=6, kh=3, s=2, p=1, g=6, out="int8x4_4w4c")
    yield c(c=7, h=12, w=13, o=7, kh=5, p=2, g=7, flags=("zhi",))
    yield c(c=5, h=10, w=11, o=5, kh=3, p=2, d=2, g=5, layout="int8x4_4w4c", flags=("bias", "sat"))
    yield c(c=12, h=9, w=8, o=12, kh=1, kw=3, p=0, pw=1, g=12, flags=("w127", "sat32"))
    yield c(c=4, h=1, w=1, o=4, kh=3, p=1, g=4)
    yield c(n=2, c=8, h=6, w=7, o=8, kh=3, p=1, g=8)


@register_test_suite(TRANSPOSED, make_args=q8ta_conv_args, resizable=resizable)
def q8ta_conv2d_transposed_suite() -> Iterator[KernelCase]:
    """Stride 2 upsampling kernels (2, 3, 4), output padding, groups, non-square, every layout, the fallback."""
    c = lambda **kw: q8_case(TRANSPOSED, "transposed", **kw)  # noqa: E731
    for layout in LAYOUTS:
        yield c(c=8, h=5, w=4, o=6, kh=3, s=2, p=1, op_pad=1, layout=layout)
    yield c(c=8, h=5, w=4, o=6, kh=3, s=2, p=1, op_pad=1, profile=NO_DOT, flags=("bias", "relu", "zlo"))
    yield c(c=6, h=4, w=5, o=5, kh=2, s=2, p=0, op_pad=0, flags=("zhi", "sat"))
    yield c(c=8, h=3, w=4, o=8, kh=4, s=2, p=1, op_pad=0, g=2, out="int8x4_4w4c")
    yield c(c=3, h=4, w=3, o=7, kh=3, kw=1, s=1, p=1, pw=0, op_pad=0, flags=("w127",))
    yield c(c=5, h=1, w=1, o=3, kh=3, s=2, p=0, op_pad=1, flags=("bias", "sat32"))
    yield c(n=2, c=4, h=3, w=3, o=4, kh=3, s=2, p=1, op_pad=1)
