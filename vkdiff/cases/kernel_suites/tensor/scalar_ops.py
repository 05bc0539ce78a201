"""``Tan.cpp``'s ``tan`` and ``BinaryScalarOp.cpp``'s tensor-scalar ops (``pow.Tensor_Scalar``,
``eq/ne/lt/le/gt/ge.Scalar``), at the edges where their shaders differ from ATen.

``tan`` runs ranks 1 to 4 (width ≡ 3, 2, 1 mod 4, size-1 dims) in both storages and dtypes; its inputs
lead with the edges: signed zeros, ±π/4, values one float step either side of ±π/2 (where ``tan``
is ±1e7 in float32), ``|x|`` of 10, 1e2, 1e4 and 1e5 (3.2e4 in float16; argument reduction); ``special`` cases add NaN and
±inf. ``pow`` runs one exponent per flag: integral (``e2``, ``e3``, ``e-1``) and fractional (``e0p5``,
``e2p5``) with negative bases, zeros (``0 ** 0``, ``0 ** -1``) and bases of magnitude 1. Comparisons
run against a scalar ``s`` (``s0p1``: 0.1, inexact in both float dtypes; ``sinf``: +inf) with the
input holding ``s`` rounded to the tensor's dtype and its two neighbours one ulp away; ``special``
inputs add NaN and ±inf; int32 tensors run against an int scalar (``s2``) and a float one (``s1p5``,
the ``int32_float`` variants). Comparisons write bool tensors (``rgba8ui`` textures); one buffer case
per op shows naga's missing 8-bit storage buffers (NOT_SUPPORTED).
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

FLOATS = ("fp32", "fp16")
STORAGES = ("buffer", "texture3d")
SHAPES = ((67,), (3, 5, 6), (2, 1, 7, 9), (1, 4, 1, 2))
"""Ranks 1-4; width ≡ 3, 2, 1, 2 (mod 4); size-1 dims."""
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
EXPONENTS = {"e2": 2.0, "e3": 3.0, "e-1": -1.0, "e0p5": 0.5, "e2p5": 2.5, "e0": 0.0}
"""``pow`` exponent by flag."""
SCALARS = {"s0p1": 0.1, "sinf": float("inf"), "s2": 2, "s1p5": 1.5}
"""Comparison scalar by flag (``s2`` is a Python int)."""
SPECIAL = (np.nan, np.inf, -np.inf)
DIMS = ("N", "C", "H", "W")
"""Every size of ``self``: the suites also run below their cases' sizes (``resize_tan_node``,
``resize_binary_scalar_op_node``)."""


def _dims(shape: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
    return tuple(zip("NCHW"[-len(shape):], shape))


def _case(op: str, name: str, shape: tuple[int, ...], dtype: str, storage: str, flags: tuple[str, ...] = (),
          layout: str = "width") -> KernelCase:
    return KernelCase(op=op, name=name, shape=_dims(shape), dtype=dtype, storage=storage, flags=flags, layout=layout)


def _lead(x: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``x`` with its first elements replaced by ``values`` (as many as fit)."""
    flat = x.reshape(-1)
    values = values[:flat.size]
    flat[:values.size] = values
    return x


def tan_edges(dtype: np.dtype, special: bool) -> np.ndarray:
    """Edges of ``tan`` in ``dtype``: zeros, ±π/4, the neighbours of ±π/2, large ``|x|``."""
    half_pi = np.asarray(np.pi / 2, dtype)
    near = [np.nextafter(half_pi, dtype.type(0)), np.nextafter(half_pi, dtype.type(4))]
    large = min(1e5, float(np.finfo(dtype).max) / 2)
    values = [0.0, -0.0, np.pi / 4, -np.pi / 4, *near, *(-v for v in near), 10.0, -100.0, 1e4, -large]
    return np.array(list(SPECIAL if special else ()) + values, np.float64).astype(dtype)


def tan_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    x = rng.uniform(-1.5, 1.5, tuple(case.sizes.values())).astype(case.np_dtype)
    return {"self": _lead(x, tan_edges(case.np_dtype, case.has("special")))}


@register_test_suite("aten.tan.default", make_args=tan_args, resizable=DIMS)
def tan_suite() -> Iterator[KernelCase]:
    for shape, dtype, storage in itertools.product(SHAPES, FLOATS, STORAGES):
        yield _case("aten.tan.default", "tan", shape, dtype, storage)
    for dtype, storage in itertools.product(FLOATS, STORAGES):
        yield _case("aten.tan.default", "tan", SHAPES[1], dtype, storage, ("special",))
    yield _case("aten.tan.default", "tan", SHAPES[2], "fp32", "texture3d", layout="channels")


def pow_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    x = (rng.standard_normal(tuple(case.sizes.values())) * 2).astype(case.np_dtype)
    edges = np.array([-2.0, -1.5, -1.0, 0.0, -0.0, 1.0, 3.0, 0.5], case.np_dtype)
    exponent = next(EXPONENTS[f] for f in case.flags if f in EXPONENTS)
    return {"self": _lead(x, edges), "exponent": exponent}


@register_test_suite("aten.pow.Tensor_Scalar", make_args=pow_args, resizable=DIMS)
def pow_suite() -> Iterator[KernelCase]:
    for flag, dtype, storage in itertools.product(EXPONENTS, FLOATS, STORAGES):
        yield _case("aten.pow.Tensor_Scalar", "pow_scalar", SHAPES[1], dtype, storage, (flag,))
    yield _case("aten.pow.Tensor_Scalar", "pow_scalar", SHAPES[0], "fp32", "texture3d", ("e2",))
    yield _case("aten.pow.Tensor_Scalar", "pow_scalar", SHAPES[2], "fp32", "texture3d", ("e2",), layout="channels")


def compare_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """Values around the scalar (itself in the tensor's dtype and one ulp either side) lead the input."""
    shape = tuple(case.sizes.values())
    scalar = next(SCALARS[f] for f in case.flags if f in SCALARS)
    if case.dtype == "int32":
        x = rng.integers(-4, 5, shape).astype(np.int32)
        return {"self": _lead(x, np.array([2, 1, 3, -2], np.int32)), "other": scalar}
    dtype = case.np_dtype
    x = rng.standard_normal(shape).astype(dtype)
    s = np.asarray(scalar, dtype)
    finite = np.isfinite(s)
    around = [s, np.nextafter(s, dtype.type(-np.inf)), np.nextafter(s, dtype.type(np.inf)) if finite else -s,
              np.asarray(scalar, np.float64)]
    lead = np.array(list(SPECIAL if case.has("special") else ()) + around, np.float64).astype(dtype)
    return {"self": _lead(x, lead), "other": scalar}


def _compare_cases(name: str) -> Iterator[KernelCase]:
    op = f"aten.{name}.Scalar"
    stem = f"{name}_scalar"
    for dtype, flags in itertools.product(FLOATS, (("s0p1",), ("sinf",), ("s0p1", "special"))):
        yield _case(op, stem, SHAPES[1], dtype, "texture3d", flags)
    for flag in ("s2", "s1p5"):
        yield _case(op, stem, SHAPES[1], "int32", "texture3d", (flag,))
    yield _case(op, stem, SHAPES[0], "fp32", "texture3d", ("s0p1",))
    yield _case(op, stem, SHAPES[2], "fp32", "texture3d", ("s0p1",), layout="channels")
    yield _case(op, stem, SHAPES[1], "fp32", "buffer", ("s0p1",))


def _register(name: str) -> None:
    def suite() -> Iterator[KernelCase]:
        yield from _compare_cases(name)

    suite.__qualname__ = f"{name}_scalar_suite"
    register_test_suite(f"aten.{name}.Scalar", make_args=compare_args, resizable=DIMS)(suite)


for _name in COMPARISONS:
    _register(_name)
