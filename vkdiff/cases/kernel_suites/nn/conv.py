"""The convolution ops: ``Convolution.cpp``'s ``aten.convolution`` and ``conv_with_clamp``, ``et_vk.conv2d_gemm``,
``et_vk.conv1d_dw`` and ``et_vk.conv1d_pw``, one case per route the C++ takes and per edge.

Routes (option ``route``, checked by the launcher): ``direct``, ``im2col`` (C_out ≥ 128; one case needs two
16-MiB scratch tiles), ``pw``, ``dw`` (base shader), ``dwtile3``/``dwtile5`` (output-tile shaders),
``dwsned3``/``dwsned5`` (stride ≠ dilation), ``dwsned`` (stride ≠ dilation, kernel neither 3×3 nor 5×5),
``transposed``, ``conv1d`` (channels packed), ``conv1dpw``/``conv1ddw`` (height packed). Mali's routes take
option ``profile=mali`` (the C++'s ``device_is_mali`` answered from ``routes.toml``): ``dwtile3b1x1`` and
``im2col`` for a small C_out with a buffer scratch. The texture3d/buffer scratch past ``max_texture2d_dim``
(an output row of more than 16384 texels) is ported only.

Edges: channels ≡ 1, 2, 3 (mod 4); groups 1, between (aligned and not to 4 channels per group) and depthwise;
stride, padding, dilation; kernels 1, 3, 5 (and 2, 4 for the base depthwise shader); output padding (transposed);
clamp bounds and relu's ``(0, DBL_MAX)`` (``FuseClampPass``) for ``conv_with_clamp``; bias absent and present;
batch 1 (conv2d refuses more) and 2 (conv1d). Inputs are N(0, 2²) with ±300 first; half cases flagged ``big``
put ±0.9·65504 first and scale the weights by ``1/fan_in``. Storage: every conv shader of ``Convolution.cpp``
binds texture3d (and ``check_conv_args`` wants channels packing), so no buffer case exists; ``conv1d_dw`` /
``conv1d_pw`` have buffer variants. Geometries keep ``2·p ≥ d·(K − 1)`` so below-bound runs shrinking H, W or L
to 1 stay valid.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

RELU_MAX = 1.7976931348623157e308
"""``sys.float_info.max``: the ``output_max`` ``FuseClampPass`` writes for a fused relu."""
CLAMPS = {"clamp": (-0.5, 0.75), "relu": (0.0, RELU_MAX), "hardtanh": (-1.0, 1.0)}
"""``conv_with_clamp`` bounds by flag."""
GEOMETRY = ("K", "s", "p", "d", "g", "op")
"""Named sizes of a case that are convolution parameters, not tensor sizes."""


def conv2d_case(op: str, name: str, route: str, *, c: int, h: int, w: int, o: int, k: int, s: int = 1, p: int = 0,
                d: int = 1, g: int = 1, op_pad: int | None = None, dtype: str = "fp32",
                flags: tuple[str, ...] = ("bias",), profile: str | None = None) -> KernelCase:
    """A 2-D case: its geometry is part of the id; the route (and a routing profile) are launcher options."""
    shape = [("C", c), ("H", h), ("W", w), ("O", o), ("K", k), ("s", s), ("p", p), ("d", d), ("g", g)]
    if op_pad is not None:
        shape.append(("op", op_pad))
    options = ((("route", route),) if route else ()) + ((("profile", profile),) if profile else ())
    return KernelCase(op=op, name=name, shape=tuple(shape), dtype=dtype, storage="texture3d", layout="channels",
                      options=options, flags=flags)


def conv1d_case(op: str, name: str, route: str, *, n: int = 2, c: int, length: int, o: int, k: int, s: int = 1,
                p: int = 0, d: int = 1, g: int = 1, dtype: str = "fp32", storage: str = "texture3d",
                layout: str = "height", flags: tuple[str, ...] = ("bias",)) -> KernelCase:
    """A 1-D case (batch, channels, length, geometry); height packed unless the channels route is wanted."""
    shape = (("N", n), ("C", c), ("L", length), ("O", o), ("K", k), ("s", s), ("p", p), ("d", d), ("g", g))
    return KernelCase(op=op, name=name, shape=shape, dtype=dtype, storage=storage, layout=layout,
                      options=(("route", route),) if route else (), flags=flags)


def _data(rng: np.random.Generator, shape: tuple[int, ...], case: KernelCase) -> np.ndarray:
    """N(0, 2²) with ±300 first (``big`` half cases: ±0.9·65504 too)."""
    x = rng.standard_normal(shape) * 2
    edges = [300.0, -300.0] + ([0.9 * 65504, -0.9 * 65504] if case.has("big") else [])
    flat = x.reshape(-1)
    flat[: min(len(edges), flat.size)] = edges[: flat.size]
    return x.astype(case.np_dtype)


def conv_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """The schema's arguments of any convolution op from the case's named sizes and flags."""
    z = case.sizes
    one_d = "L" in z
    spatial = (z["L"],) if one_d else (z["H"], z["W"])
    x = _data(rng, ((z["N"] if one_d else 1), z["C"], *spatial), case)
    transposed = "op" in z
    per_group = (z["C"], z["O"] // z["g"]) if transposed else (z["O"], z["C"] // z["g"])
    fan_in = (z["C"] // z["g"]) * z["K"] ** len(spatial)
    scale = 1.0 / fan_in if case.has("big") else 1.0 / np.sqrt(fan_in)
    w = (rng.standard_normal((*per_group, *([z["K"]] * len(spatial)))) * scale).astype(case.np_dtype)
    listed = lambda v: [v] * len(spatial)  # noqa: E731
    args: dict[str, Any] = {"input": x, "weight": w,
                            "bias": rng.standard_normal(z["O"]).astype(case.np_dtype) if case.has("bias") else None,
                            "stride": listed(z["s"]), "padding": listed(z["p"]), "dilation": listed(z["d"])}
    if case.op in ("aten.convolution.default", "et_vk.conv_with_clamp.default", "et_vk.conv2d_gemm.default"):
        args.update(transposed=transposed, output_padding=listed(z.get("op", 0)))
    args["groups"] = z["g"]
    clamp = next((CLAMPS[f] for f in case.flags if f in CLAMPS), None)
    if case.op == "et_vk.conv_with_clamp.default":
        args.update(output_min=clamp[0], output_max=clamp[1])
    elif case.op in ("et_vk.conv1d_dw.default", "et_vk.conv1d_pw.default"):
        args.update(output_min=None if clamp is None else clamp[0], output_max=None if clamp is None else clamp[1])
    return args


CONV = "aten.convolution.default"


def _conv2d_routes(op: str, name: str) -> Iterator[KernelCase]:
    """The 2-D routes of ``conv`` with their edges (``aten.convolution``)."""
    c2 = lambda route, **kw: conv2d_case(op, name, route, **kw)  # noqa: E731
    for dtype in ("fp32", "fp16"):
        yield c2("direct", c=5, h=9, w=11, o=7, k=3, p=1, dtype=dtype)
        yield c2("pw", c=9, h=7, w=10, o=7, k=1, dtype=dtype)
        yield c2("dwtile3", c=6, h=9, w=11, o=6, k=3, p=1, g=6, dtype=dtype)
        yield c2("im2col", c=5, h=9, w=11, o=130, k=3, p=1, dtype=dtype)
        yield c2("transposed", c=5, h=5, w=7, o=3, k=3, s=2, p=1, op_pad=1, dtype=dtype)
    yield c2("direct", c=5, h=9, w=11, o=7, k=3, p=1, dtype="fp16", flags=("bias", "big"))
    yield c2("direct", c=6, h=10, w=11, o=6, k=3, s=2, p=2, d=2, flags=())
    yield c2("direct", c=3, h=12, w=13, o=5, k=5, p=2)
    yield c2("direct", c=8, h=9, w=7, o=8, k=3, p=1, g=2)
    yield c2("direct", c=6, h=9, w=7, o=6, k=3, p=1, g=2)
    yield c2("direct", c=6, h=9, w=7, o=9, k=3, s=2, p=1, g=3, flags=())
    yield c2("pw", c=6, h=9, w=11, o=5, k=1, s=2, p=1, flags=())
    yield c2("dwtile3", c=7, h=10, w=9, o=7, k=3, s=2, p=2, d=2, g=7, flags=())
    yield c2("dwtile5", c=7, h=11, w=12, o=7, k=5, p=2, g=7)
    yield c2("dwtile5", c=5, h=11, w=12, o=5, k=5, p=2, g=5, dtype="fp16", flags=("bias", "big"))
    yield c2("dwsned3", c=6, h=9, w=11, o=6, k=3, s=2, p=1, g=6)
    yield c2("dwsned5", c=5, h=11, w=12, o=5, k=5, s=2, p=2, g=5, flags=())
    yield c2("dw", c=6, h=7, w=9, o=6, k=1, g=6)
    yield c2("dw", c=6, h=7, w=9, o=6, k=2, p=1, g=6)
    yield c2("dw", c=5, h=8, w=9, o=5, k=4, p=2, g=5, flags=())
    yield c2("dwsned", c=6, h=7, w=9, o=6, k=1, s=2, g=6)
    yield c2("im2col", c=64, h=128, w=64, o=128, k=3, p=1)
    yield c2("transposed", c=3, h=6, w=5, o=2, k=5, s=3, p=2, op_pad=2, flags=())
    yield c2("transposed", c=6, h=5, w=6, o=4, k=3, s=2, p=1, g=2, op_pad=0)
    for dtype in ("fp32", "fp16"):
        yield c2("im2col", c=5, h=9, w=11, o=7, k=3, p=1, dtype=dtype, profile="mali")
        yield c2("dwtile3b1x1", c=6, h=9, w=11, o=6, k=3, p=1, g=6, dtype=dtype, profile="mali")


def _conv1d_routes(op: str, name: str) -> Iterator[KernelCase]:
    """The 1-D routes of ``conv``: channels packed (``conv1d``) and height packed (``conv1d_pw``/``conv1d_dw``)."""
    c1 = lambda route, **kw: conv1d_case(op, name, route, **kw)  # noqa: E731
    for dtype in ("fp32", "fp16"):
        yield c1("conv1d", c=5, length=13, o=7, k=3, p=1, layout="channels", dtype=dtype)
        yield c1("conv1dpw", c=5, length=13, o=7, k=1, dtype=dtype)
        yield c1("conv1ddw", c=6, length=13, o=6, k=3, p=1, g=6, dtype=dtype)
    yield c1("conv1d", c=6, length=14, o=6, k=3, s=2, p=1, g=2, layout="channels", flags=())
    yield c1("conv1d", c=3, length=15, o=5, k=5, p=4, d=2, layout="channels")
    yield c1("conv1dpw", c=6, length=13, o=5, k=1, s=2, flags=())
    yield c1("conv1ddw", c=7, length=15, o=7, k=5, s=2, p=4, d=2, g=7, flags=())


@register_test_suite(CONV, make_args=conv_args, resizable=("H", "W", "L"))
def convolution_suite() -> Iterator[KernelCase]:
    """Every route of ``conv`` with its edges."""
    yield from _conv2d_routes(CONV, "convolution")
    yield from _conv1d_routes(CONV, "convolution")


WITH_CLAMP = "et_vk.conv_with_clamp.default"


@register_test_suite(WITH_CLAMP, make_args=conv_args, resizable=("H", "W", "L"))
def conv_with_clamp_suite() -> Iterator[KernelCase]:
    """The clamp variants of each route, with explicit bounds, relu's and hardtanh's."""
    c2 = lambda route, flags, **kw: conv2d_case(WITH_CLAMP, "conv_with_clamp", route, flags=flags, **kw)  # noqa: E731
    c1 = lambda route, flags, **kw: conv1d_case(WITH_CLAMP, "conv_with_clamp", route, flags=flags, **kw)  # noqa: E731
    for dtype in ("fp32", "fp16"):
        yield c2("direct", ("bias", "clamp"), c=5, h=9, w=11, o=7, k=3, p=1, dtype=dtype)
        yield c2("dwtile3", ("bias", "relu"), c=6, h=9, w=11, o=6, k=3, p=1, g=6, dtype=dtype)
    yield c2("pw", ("bias", "relu"), c=9, h=7, w=10, o=7, k=1)
    yield c2("pw", ("clamp",), c=6, h=9, w=11, o=5, k=1, s=2, p=1)
    yield c2("dwtile5", ("hardtanh",), c=7, h=11, w=12, o=7, k=5, p=2, g=7)
    yield c2("dwsned3", ("bias", "clamp"), c=6, h=9, w=11, o=6, k=3, s=2, p=1, g=6)
    yield c2("dw", ("bias", "relu"), c=6, h=7, w=9, o=6, k=1, g=6)
    yield c2("im2col", ("bias", "clamp"), c=5, h=9, w=11, o=130, k=3, p=1)
    yield c2("transposed", ("bias", "hardtanh"), c=5, h=5, w=7, o=3, k=3, s=2, p=1, op_pad=1)
    yield c1("conv1d", ("bias", "clamp"), c=5, length=13, o=7, k=3, p=1, layout="channels")
    yield c1("conv1dpw", ("bias", "relu"), c=5, length=13, o=7, k=1)
    yield c1("conv1ddw", ("hardtanh",), c=6, length=13, o=6, k=3, p=1, g=6, dtype="fp16")


GEMM = "et_vk.conv2d_gemm.default"


@register_test_suite(GEMM, make_args=conv_args, resizable=("H", "W"))
def conv2d_gemm_suite() -> Iterator[KernelCase]:
    """The im2col + GEMM op itself, whatever C_out (dilation, stride, kernels 1, 3, 5)."""
    for dtype in ("fp32", "fp16"):
        yield conv2d_case(GEMM, "conv2d_gemm", "", c=5, h=9, w=11, o=7, k=3, p=1, dtype=dtype)
    yield conv2d_case(GEMM, "conv2d_gemm", "", c=5, h=9, w=11, o=7, k=3, p=1, dtype="fp16", flags=("bias", "big"))
    yield conv2d_case(GEMM, "conv2d_gemm", "", c=6, h=10, w=11, o=6, k=3, s=2, p=2, d=2, flags=())
    yield conv2d_case(GEMM, "conv2d_gemm", "", c=3, h=12, w=13, o=9, k=5, p=2)
    yield conv2d_case(GEMM, "conv2d_gemm", "", c=2, h=8, w=9, o=5, k=1)


DW = "et_vk.conv1d_dw.default"
PW = "et_vk.conv1d_pw.default"


@register_test_suite(DW, make_args=conv_args, resizable=("L",))
def conv1d_dw_suite() -> Iterator[KernelCase]:
    """Both storages the variants exist for, both dtypes, bias absent and present, a clamp."""
    for storage in ("texture3d", "buffer"):
        for dtype in ("fp32", "fp16"):
            yield conv1d_case(DW, "conv1d_dw", "", c=6, length=13, o=6, k=3, p=1, g=6, dtype=dtype, storage=storage)
        yield conv1d_case(DW, "conv1d_dw", "", c=7, length=15, o=7, k=5, s=2, p=4, d=2, g=7, storage=storage,
                          flags=())
        yield conv1d_case(DW, "conv1d_dw", "", n=1, c=5, length=9, o=5, k=3, p=1, g=5, storage=storage,
                          flags=("clamp",))
    yield conv1d_case(DW, "conv1d_dw", "", c=5, length=13, o=5, k=3, p=1, g=5, dtype="fp16", flags=("bias", "big"))


@register_test_suite(PW, make_args=conv_args, resizable=("L",))
def conv1d_pw_suite() -> Iterator[KernelCase]:
    """Both storages, both dtypes, bias absent and present, a clamp, and a stride the shader ignores."""
    for storage in ("texture3d", "buffer"):
        for dtype in ("fp32", "fp16"):
            yield conv1d_case(PW, "conv1d_pw", "", c=5, length=13, o=7, k=1, dtype=dtype, storage=storage)
        yield conv1d_case(PW, "conv1d_pw", "", c=6, length=9, o=2, k=1, storage=storage, flags=())
        yield conv1d_case(PW, "conv1d_pw", "", n=1, c=3, length=10, o=5, k=1, storage=storage, flags=("clamp",))
    yield conv1d_case(PW, "conv1d_pw", "", c=5, length=13, o=7, k=1, dtype="fp16", flags=("bias", "big"))
    yield conv1d_case(PW, "conv1d_pw", "", c=6, length=13, o=5, k=1, s=2)
