"""The glue ops of the default model cases as kernel cases: ``add``, ``sub``, ``mul`` and ``div`` (with
broadcasting), ``view_copy`` (the activations are in ``unary``, the other binary ops in ``binary``).

Shapes cover a width that is not a multiple of 4 (texture padding), a leading batch, and,
for ``mul`` and ``div``, an operand broadcast along the packed (width) dim, which the texture shaders
handle with their ``*_broadcast_packed_dim`` spec constants. Every case runs width-, channels- and
height-packed (then ``bcast_w`` broadcasts along an unpacked dim).
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

SHAPES = ((1, 7, 64), (2, 5, 13), (3, 1, 6))
"""(B, H, W): the delegates' [1, 7, 64]; W % 4 != 0 with a batch; one row."""


BHW = ("B", "H", "W")
"""Every size of the inputs: the suites also run below their cases' sizes (``resize_binary_op_node``)."""


def _case(op: str, name: str, shape: tuple[int, int, int], dtype: str, storage: str, layout: str,
          flags: tuple[str, ...] = ()) -> KernelCase:
    b, h, w = shape
    return KernelCase(op=op, name=name, shape=(("B", b), ("H", h), ("W", w)), dtype=dtype, storage=storage,
                      layout=layout, flags=flags)


def _x(case: KernelCase, rng: np.random.Generator) -> np.ndarray:
    return (rng.standard_normal(tuple(case.sizes.values())) * 2).astype(case.np_dtype)


def add_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    return {"self": _x(case, rng), "other": _x(case, rng), "alpha": 1.0}


def mul_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    other = _x(case, rng)
    if case.has("bcast_w"):
        other = np.ascontiguousarray(other[..., :1])
    return {"self": _x(case, rng), "other": other}


def view_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    b, h, w = case.sizes.values()
    return {"self": _x(case, rng), "size": [b * h, w]}


LAYOUTS = ("width", "channels", "height")
"""The delegates use width packing; ET-VK's elementwise and view shaders take any packed dim."""


def _grid() -> Iterator[tuple]:
    return itertools.product(SHAPES, ("fp32", "fp16"), ("buffer", "texture3d"), LAYOUTS)


@register_test_suite("aten.add.Tensor", make_args=add_args, resizable=BHW, sampled=False)
def add_suite() -> Iterator[KernelCase]:
    for shape, dtype, storage, layout in _grid():
        yield _case("aten.add.Tensor", "add", shape, dtype, storage, layout)


@register_test_suite("aten.sub.Tensor", make_args=add_args, resizable=BHW)
def sub_suite() -> Iterator[KernelCase]:
    for shape, dtype, storage, layout in _grid():
        yield _case("aten.sub.Tensor", "sub", shape, dtype, storage, layout)


@register_test_suite("aten.div.Tensor", make_args=mul_args, resizable=BHW)
def div_suite() -> Iterator[KernelCase]:
    for shape, dtype, storage, layout in _grid():
        yield _case("aten.div.Tensor", "div", shape, dtype, storage, layout)
        yield _case("aten.div.Tensor", "div", shape, dtype, storage, layout, flags=("bcast_w",))


@register_test_suite("aten.mul.Tensor", make_args=mul_args, resizable=BHW, sampled=False)
def mul_suite() -> Iterator[KernelCase]:
    for shape, dtype, storage, layout in _grid():
        yield _case("aten.mul.Tensor", "mul", shape, dtype, storage, layout)
        yield _case("aten.mul.Tensor", "mul", shape, dtype, storage, layout, flags=("bcast_w",))


@register_test_suite("aten.view_copy.default", make_args=view_args, sampled=False)
def view_suite() -> Iterator[KernelCase]:
    for shape, dtype, storage, layout in _grid():
        yield _case("aten.view_copy.default", "view_copy", shape, dtype, storage, layout)
