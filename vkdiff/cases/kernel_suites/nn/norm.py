"""Norms of ``NativeLayerNorm.cpp``, ``GroupNorm.cpp`` and ``BatchNorm.cpp``, on every route, at their edges.

Routes (case option ``route``): layer norm ``buffer`` and ``texture`` (width- and channels-packed:
the shader reduces along the packed dim or across texels); group and batch norm ``texture`` only
(channels-packed, as the C++ and the partitioner require). Inputs come from ``reduce``'s edge
generator over the normalized elements: row 0 all negative, row 1 all equal (variance 0: rstd is
``1/sqrt(eps)``), ``big`` rows of ``|x| ≥ 256`` and a large mean with a small spread (squares
overflow float16). Layer norm's normalized dim ≡ 3, 2, 1 (mod 4) with ranks 1-4; group norm's
channels ≡ 2, 1, 3 (mod 4) with one and several channels per group; weights and biases are
N(1, 0.5²) and N(0, 0.5²) constants. Sizes the constants do not fix (layer norm's leading dims, batch
norm's N, H, W) also run below the bound; group norm does not, as its ``N`` and ``HxW`` are scalar
arguments, which the harness keeps from the built graph. Batch norm's running stats come from the rng (variance
``U(0.1, 4)``), with one channel's variance 0 so ``eps`` decides it.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernel_suites.tensor.reduce import DTYPES, reduction_input
from vkdiff.cases.kernels import KernelCase, register_test_suite

EPS = 1e-5


def _dims(shape: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
    return tuple((name, size) for name, size in zip("NCHW"[-len(shape):], shape))


def norm_case(name: str, op: str, shape: tuple[int, ...], dtype: str, storage: str, route: str,
              layout: str = "width", flags: tuple[str, ...] = (), extra: tuple[tuple[str, int], ...] = ()) -> KernelCase:
    """A case whose id names its route; ``extra`` adds named sizes such as the group count ``g``."""
    return KernelCase(op=op, name=name, shape=_dims(shape) + extra, dtype=dtype, storage=storage, layout=layout,
                      options=(("route", route),), flags=flags)


def _affine(rng: np.random.Generator, size: int, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    weight = (1 + 0.5 * rng.standard_normal(size)).astype(dtype)
    return weight, (0.5 * rng.standard_normal(size)).astype(dtype)


def _input_shape(case: KernelCase) -> tuple[int, ...]:
    return tuple(v for k, v in case.shape if k in "NCHW")


def layer_norm_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """Rows over the last dim from the edge generator; ``normalized_shape = [W]``."""
    shape = _input_shape(case)
    x = reduction_input(shape, [len(shape) - 1], case.np_dtype, case.flags, rng)
    weight, bias = _affine(rng, shape[-1], case.np_dtype)
    return {"input": x, "normalized_shape": [shape[-1]], "weight": weight, "bias": bias, "eps": EPS}


def group_norm_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """Groups of ``C/group × H × W`` elements from the edge generator (rows: (n, group))."""
    n, c, h, w = _input_shape(case)
    group = case.size("g")
    grouped = reduction_input((n, group, (c // group) * h * w), [2], case.np_dtype, case.flags, rng)
    weight, bias = _affine(rng, c, case.np_dtype)
    return {"input": grouped.reshape(n, c, h, w), "weight": weight, "bias": bias, "N": n, "C": c, "HxW": h * w,
            "group": group, "eps": EPS}


def batch_norm_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """Per-channel rows from the edge generator; running stats drawn, one variance 0."""
    shape = _input_shape(case)
    x = reduction_input(shape, [0, 2, 3], case.np_dtype, case.flags, rng)
    c = shape[1]
    weight, bias = _affine(rng, c, case.np_dtype)
    mean = rng.standard_normal(c).astype(case.np_dtype)
    var = rng.uniform(0.1, 4.0, c)
    var[0] = 0.0
    return {"input": x, "weight": weight, "bias": bias, "running_mean": mean,
            "running_var": var.astype(case.np_dtype), "momentum": 0.1, "eps": EPS}


LAYER_SHAPES = (((3, 5, 6), "width"), ((3, 5, 6), "channels"), ((2, 1, 7, 9), "width"), ((67,), "width"),
                ((4, 13), "height"), ((1, 3, 1, 70), "width"))
"""Normalized dim 6, 9, 67, 13, 70 (≡ 2, 1, 3, 1, 2 mod 4; 67 and 70 exceed one 64-wide workgroup)."""


@register_test_suite("aten.native_layer_norm.default", make_args=layer_norm_args, resizable=("N", "C", "H"))
def native_layer_norm_suite() -> Iterator[KernelCase]:
    op = "aten.native_layer_norm.default"
    for dtype, (shape, layout) in itertools.product(DTYPES, LAYER_SHAPES):
        yield norm_case("native_layer_norm", op, shape, dtype, "texture3d", "texture", layout)
        if layout == "width":
            yield norm_case("native_layer_norm", op, shape, dtype, "buffer", "buffer")
    for dtype, storage in itertools.product(DTYPES, ("buffer", "texture3d")):
        route = "buffer" if storage == "buffer" else "texture"
        yield norm_case("native_layer_norm", op, (3, 5, 6), dtype, storage, route, flags=("big",))


GROUP_SHAPES = (((2, 6, 5, 7), 3), ((1, 9, 3, 3), 3), ((2, 3, 1, 5), 1), ((1, 8, 4, 4), 8), ((2, 4, 6, 1), 2))
"""Channels 6, 9, 3, 8, 4 (≡ 2, 1, 3, 0, 0 mod 4); 1, 2, 3 and C channels per group; size-1 dims."""


# Not resizable: its ``N`` and ``HxW`` are scalar arguments (see the module docstring).
@register_test_suite("aten.native_group_norm.default", make_args=group_norm_args)
def native_group_norm_suite() -> Iterator[KernelCase]:
    op = "aten.native_group_norm.default"
    for dtype, (shape, group) in itertools.product(DTYPES, GROUP_SHAPES):
        yield norm_case("native_group_norm", op, shape, dtype, "texture3d", "texture", "channels",
                        extra=(("g", group),))
    for dtype in DTYPES:
        yield norm_case("native_group_norm", op, (2, 6, 5, 7), dtype, "texture3d", "texture", "channels",
                        flags=("big",), extra=(("g", 3),))


BATCH_SHAPES = ((2, 6, 5, 7), (1, 3, 4, 5), (2, 9, 1, 2), (1, 4, 3, 3))
"""Channels ≡ 2, 3, 1, 0 (mod 4): the last texel of each batch is partly padding."""


@register_test_suite("aten._native_batch_norm_legit_no_training.default", make_args=batch_norm_args,
                     resizable=("N", "H", "W"))
def native_batch_norm_suite() -> Iterator[KernelCase]:
    op = "aten._native_batch_norm_legit_no_training.default"
    for dtype, shape in itertools.product(DTYPES, BATCH_SHAPES):
        yield norm_case("batch_norm", op, shape, dtype, "texture3d", "texture", "channels")
    for dtype in DTYPES:
        yield norm_case("batch_norm", op, (2, 6, 5, 7), dtype, "texture3d", "texture", "channels", flags=("big",))
