"""2-D pooling (``Pool.cpp``) and upsampling (``Upsample.cpp``): texture3d, channels packed, as ET-VK accepts them.

Pooling windows are named flags: ``k2s2`` (stride = kernel), ``k3s2p1`` (padding, stride ≠ kernel),
``k3x2s1x2p1x0`` (non-square), ``k3s1p1d2`` (dilation), with ``ceil`` (ceil_mode) on sizes where it adds
an output row and column.
``neg`` makes every input negative, so a padded max window is all negative: padding must act as
-inf, not 0. avg pool adds ``nopad`` (count_include_pad false) and ``div5`` (divisor_override);
``big`` float16 inputs sit near the half maximum, where a half window sum overflows although the
mean (ATen sums in float) does not. ``max_pool2d_with_indices`` checks the indices exactly.

Upsampling configs: output sizes (``o8x12`` doubles 4x6, ``o7x9`` is non-integer, ``o2x3`` halves,
``o1x4`` one row), scale factors (``x2``, ``x1p5`` non-integer, ``x0p5`` downsampling); bilinear with
``ac`` (align_corners) or not. ``big`` float16 inputs alternate ±near-max, where a bilinear blend
computed as ``a + w (b - a)`` in half would overflow. Shapes: batch 1 and 2, channels ≡ 1, 3 (mod 4).
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

POOL_SHAPES = ((2, 5, 9, 11), (3, 8, 7))
"""(N, C, H, W) with C ≡ 1 (mod 4) and odd H, W; a 3-D (C, H, W) input."""
WINDOWS: dict[str, dict[str, list[int]]] = {
    "k2s2": {"kernel_size": [2, 2], "stride": [2, 2], "padding": [0, 0], "dilation": [1, 1]},
    "k3s2p1": {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1], "dilation": [1, 1]},
    "k3x2s1x2p1x0": {"kernel_size": [3, 2], "stride": [1, 2], "padding": [1, 0], "dilation": [1, 1]},
    "k3s1p1d2": {"kernel_size": [3, 3], "stride": [1, 1], "padding": [1, 1], "dilation": [2, 2]},
}
"""Pooling windows by flag (``dilation`` is dropped for avg pool, whose schema has none)."""
CEIL_SHAPES = {"k2s2": (2, 5, 9, 11), "k3s2p1": (1, 6, 10, 12)}
"""Per window, a shape where ``ceil_mode`` adds an output row and column (odd sizes for k2s2, even for k3s2p1)."""
UPSAMPLE_SHAPES = ((1, 5, 4, 6), (2, 3, 4, 6))
UPSAMPLE: dict[str, dict[str, Any]] = {
    "o8x12": {"output_size": [8, 12], "scale_factors": None},
    "o7x9": {"output_size": [7, 9], "scale_factors": None},
    "o2x3": {"output_size": [2, 3], "scale_factors": None},
    "o1x4": {"output_size": [1, 4], "scale_factors": None},
    "x2": {"output_size": None, "scale_factors": [2.0, 2.0]},
    "x1p5": {"output_size": None, "scale_factors": [1.5, 1.5]},
    "x0p5": {"output_size": None, "scale_factors": [0.5, 0.5]},
}
"""Output size or scale factors by flag, for a 4x6 input plane."""
HALF_NEAR_MAX = 60000.0
POOL_RESIZABLE = ("N", "C")
"""Sizes that shrink below the bound; H and W do not: at 1 a 2-wide or dilated window (and ``x0p5``) has no output."""


def _dims(shape: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
    return tuple(zip("NCHW"[-len(shape):], shape))


def _case(op: str, shape: tuple[int, ...], dtype: str, flags: tuple[str, ...]) -> KernelCase:
    full = f"aten.{op}.vec" if op.startswith("upsample") else f"aten.{op}.default"
    return KernelCase(op=full, name=op, shape=_dims(shape), dtype=dtype, storage="texture3d", layout="channels",
                      flags=flags)


def _input(case: KernelCase, rng: np.random.Generator) -> np.ndarray:
    """N(0, 1.5²) values; ``neg``: all below -0.5; ``big`` (float16): near ±the half maximum."""
    shape = tuple(case.sizes.values())
    x = rng.standard_normal(shape) * 1.5
    if case.has("neg"):
        x = -np.abs(x) - 0.5
    if case.has("big"):
        sign = np.where(np.indices(shape).sum(axis=0) % 2 == 0, 1.0, -1.0)
        x = (HALF_NEAR_MAX - rng.uniform(0, 4000, shape)) * (sign if case.name.startswith("upsample") else 1.0)
    return x.astype(case.np_dtype)


def make_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """The op's arguments by schema name; windows and sizes from the case's flags."""
    x = _input(case, rng)
    if case.name.startswith("upsample"):
        config = next(UPSAMPLE[f] for f in case.flags if f in UPSAMPLE)
        args = {"input": x, **config}
        if case.name == "upsample_bilinear2d":
            args["align_corners"] = case.has("ac")
        return args
    window = dict(next(WINDOWS[f] for f in case.flags if f in WINDOWS))
    args = {"self": x, **window, "ceil_mode": case.has("ceil")}
    if case.name == "avg_pool2d":
        del args["dilation"]
        args["count_include_pad"] = not case.has("nopad")
        args["divisor_override"] = 5 if case.has("div5") else None
    return args


def _max_cases(op: str) -> Iterator[KernelCase]:
    for shape, window in itertools.product(POOL_SHAPES, WINDOWS):
        yield _case(op, shape, "fp32", (window,))
    for window, shape in CEIL_SHAPES.items():
        yield _case(op, shape, "fp32", (window, "ceil"))
        yield _case(op, shape, "fp16", (window, "ceil"))
    for window in ("k3s2p1", "k3s1p1d2"):
        yield _case(op, POOL_SHAPES[0], "fp32", (window, "neg"))
        yield _case(op, POOL_SHAPES[1], "fp16", (window, "neg"))
    yield _case(op, POOL_SHAPES[1], "fp16", ("k3s2p1", "big"))


@register_test_suite("aten.max_pool2d.default", make_args=make_args, resizable=POOL_RESIZABLE)
def max_pool2d_suite() -> Iterator[KernelCase]:
    yield from _max_cases("max_pool2d")


@register_test_suite("aten.max_pool2d_with_indices.default", make_args=make_args, resizable=POOL_RESIZABLE)
def max_pool2d_with_indices_suite() -> Iterator[KernelCase]:
    yield from _max_cases("max_pool2d_with_indices")


@register_test_suite("aten.avg_pool2d.default", make_args=make_args, resizable=POOL_RESIZABLE)
def avg_pool2d_suite() -> Iterator[KernelCase]:
    windows = ("k2s2", "k3s2p1", "k3x2s1x2p1x0")
    for shape, window in itertools.product(POOL_SHAPES, windows):
        yield _case("avg_pool2d", shape, "fp32", (window,))
        yield _case("avg_pool2d", shape, "fp16", (window,))
    for extra in (("nopad",), ("ceil",), ("nopad", "ceil"), ("div5",)):
        shape = CEIL_SHAPES["k3s2p1"] if "ceil" in extra else POOL_SHAPES[0]
        yield _case("avg_pool2d", shape, "fp32", ("k3s2p1", *extra))
    yield _case("avg_pool2d", POOL_SHAPES[1], "fp32", ("k3x2s1x2p1x0", "nopad", "ceil"))
    yield _case("avg_pool2d", POOL_SHAPES[1], "fp16", ("k2s2", "big"))
    yield _case("avg_pool2d", POOL_SHAPES[1], "fp16", ("k3s2p1", "nopad", "big"))


def _upsample_cases(op: str) -> Iterator[KernelCase]:
    corners = (("ac",), ()) if op == "upsample_bilinear2d" else ((),)
    for config, ac in itertools.product(UPSAMPLE, corners):
        yield _case(op, UPSAMPLE_SHAPES[0], "fp32", (config, *ac))
    for config, ac in itertools.product(("o8x12", "x1p5"), corners):
        yield _case(op, UPSAMPLE_SHAPES[1], "fp32", (config, *ac))
        yield _case(op, UPSAMPLE_SHAPES[1], "fp16", (config, *ac))
    yield _case(op, UPSAMPLE_SHAPES[0], "fp16", ("o7x9", "big"))


@register_test_suite("aten.upsample_nearest2d.vec", make_args=make_args, resizable=POOL_RESIZABLE)
def upsample_nearest2d_suite() -> Iterator[KernelCase]:
    yield from _upsample_cases("upsample_nearest2d")


@register_test_suite("aten.upsample_bilinear2d.vec", make_args=make_args, resizable=POOL_RESIZABLE)
def upsample_bilinear2d_suite() -> Iterator[KernelCase]:
    yield from _upsample_cases("upsample_bilinear2d")
