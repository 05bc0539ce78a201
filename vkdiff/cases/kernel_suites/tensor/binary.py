"""The ops of ET-VK's ``BinaryOp.cpp`` beyond add/sub/mul/div: floor division, pow, minimum, comparisons and
bitwise/logical and/or, at the edges where their shaders differ from ATen.

Shapes: equal operands, ``other`` broadcast along the packed (width) dim and along the
batch, and a rank-1 width ≡ 3 (mod 4). Edges written first: equal pairs and pairs one
float ulp apart (comparisons and ``eq``), negative quotients (``div`` with ``trunc`` and
``floor``), negative bases with integral exponents and ``0 ** 0`` (``pow``); ``special``
cases add zero divisors, NaN and ±inf. Comparisons and logical ops write bool tensors,
which ET-VK stores as ``rgba8uint`` textures (naga has no 8-bit storage buffers), so they
run on textures only.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

COMPARISONS = ("eq", "lt", "le", "gt", "ge")
LOGICAL = ("bitwise_and", "bitwise_or", "logical_and", "logical_or")
OPS = {"div_mode": "aten.div.Tensor_mode", "pow": "aten.pow.Tensor_Tensor", "minimum": "aten.minimum.default",
       **{name: f"aten.{name}.Tensor" for name in COMPARISONS},
       "bitwise_and": "aten.bitwise_and.Tensor", "bitwise_or": "aten.bitwise_or.Tensor",
       "logical_and": "aten.logical_and.default", "logical_or": "aten.logical_or.default"}
SHAPES = (((3, 5, 6), (3, 5, 6)), ((3, 5, 6), (3, 5, 1)), ((3, 5, 6), (1, 5, 6)), ((67,), (67,)))
"""(self, other): equal, broadcast along the packed width, along the batch, rank 1."""


def _dims(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
    names = "CHW"[-len(a):]
    return tuple((n, s) for n, s in zip(names, a)) + tuple((f"o{n}", s) for n, s in zip(names, b))


def binary_case(name: str, shapes, dtype: str, storage: str, flags: tuple[str, ...] = ()) -> KernelCase:
    a, b = shapes
    return KernelCase(op=OPS[name], name=name, shape=_dims(a, b), dtype=dtype, storage=storage, flags=flags)


def _shapes(case: KernelCase) -> tuple[tuple[int, ...], tuple[int, ...]]:
    sizes = case.sizes
    return (tuple(v for k, v in sizes.items() if not k.startswith("o")),
            tuple(v for k, v in sizes.items() if k.startswith("o")))


def _float_pair(case: KernelCase, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """N(0, 2²) operands, ``other``'s first elements equal to ``self``'s, the next one ulp above."""
    a_shape, b_shape = _shapes(case)
    dtype = case.np_dtype
    a, b = (rng.standard_normal(a_shape) * 2).astype(dtype), (rng.standard_normal(b_shape) * 2).astype(dtype)
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    k = min(4, flat_b.size // 4)
    flat_b[:k] = flat_a[:k]
    flat_b[k:2 * k] = np.nextafter(flat_a[k:2 * k], np.asarray(np.inf, dtype))
    return a, b


def _lead(flat_a: np.ndarray, flat_b: np.ndarray, edge_a: list[float], edge_b: list[float]) -> None:
    """Write the edge pairs first, as many as both operands hold (a smaller run below the bound holds fewer)."""
    n = min(len(edge_a), flat_a.size, flat_b.size)
    flat_a[:n], flat_b[:n] = edge_a[:n], edge_b[:n]


def binary_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    if case.name in LOGICAL:
        a_shape, b_shape = _shapes(case)
        return {"self": rng.random(a_shape) < 0.5, "other": rng.random(b_shape) < 0.5}
    a, b = _float_pair(case, rng)
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    if case.name == "pow":
        flat_a[:] = np.abs(flat_a)
        _lead(flat_a, flat_b, [-2.0, -2.0, -1.5, 0.0, 3.0], [2.0, 3.0, 2.0, 0.0, -1.0])
        np.clip(flat_b, -4, 4, out=flat_b)
    if case.name == "div_mode":
        _lead(flat_a, flat_b, [-7.0, 7.0, -1.0, 5.0], [2.0, -2.0, 3.0, 0.5])
    if case.has("special"):
        _lead(flat_a[::-1], flat_b[::-1], [np.nan, np.inf, -np.inf, 0.0, 1.0][::-1], [1.0, np.inf, 0.0, 0.0, 0.0][::-1])
    args: dict[str, Any] = {"self": a, ("exponent" if case.name == "pow" else "other"): b}
    if case.name == "div_mode":
        args["rounding_mode"] = "trunc" if case.has("trunc") else "floor"
    return args


def _cases(name: str) -> Iterator[KernelCase]:
    if name in LOGICAL:
        for shapes in SHAPES:
            yield binary_case(name, shapes, "bool", "texture3d")
        return
    storages = ("texture3d",) if name in COMPARISONS else ("buffer", "texture3d")
    for shapes, dtype, storage in itertools.product(SHAPES, ("fp32", "fp16"), storages):
        yield binary_case(name, shapes, dtype, storage)
    for dtype, storage in itertools.product(("fp32", "fp16"), storages):
        yield binary_case(name, SHAPES[0], dtype, storage, flags=("special",))
    if name == "div_mode":
        for dtype, storage in itertools.product(("fp32", "fp16"), storages):
            yield binary_case(name, SHAPES[0], dtype, storage, flags=("trunc",))


def _register(name: str) -> None:
    def suite() -> Iterator[KernelCase]:
        yield from _cases(name)

    suite.__qualname__ = f"{name}_binary_suite"
    register_test_suite(OPS[name], make_args=binary_args, resizable=("C", "H", "W", "oC", "oH", "oW"))(suite)


for _name in OPS:
    _register(_name)
