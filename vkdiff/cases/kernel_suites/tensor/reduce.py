"""Reductions of ``Reduce.cpp``, ``ArgReduce.cpp``, ``Var.cpp`` and ``Softmax.cpp``, on every route, at their edges.

Routes (the case option ``route``, checked by the launcher against what the C++ picks):
``per_row`` (last dim, buffer), ``reduce`` (one dim, texture), ``reduce2d`` (two dims, texture,
neither packed) for sum/mean/amax/amin; ``per_row`` for argmax/argmin; ``buffer`` and ``texture``
for var and softmax. Dims, negative indices and ``keepdim`` are flags (``dim-1``, ``dim0_2``,
``keepdim``): the texture routes get ``keepdim`` only, as the partitioner sends them.

Shapes: ranks 1-4 with the reduced or packed dim ≡ 1, 2, 3 (mod 4) and size-1 dims. Inputs come
from one edge generator (``reduction_input``), seeded by the case: N(0, 2²) rows with the first
reduction row all negative and the second all equal, always; ``logits`` adds rows above 88 (exp
overflows without max-subtraction) and a row below -100; ``big`` scales rows by 300 (``|x| ≥ 256``),
makes row 2 ``32752 + N(0, 1)`` (a large mean with a small spread: squares overflow float16) and
row 3 values near float16's largest in half cases (sums overflow) or up to twice it in float cases
(past 65504); ``special`` puts NaN, +inf and -inf in three rows (ATen propagates them).
Every size of the input is resizable: each case also runs at smaller sizes on the graph built for it.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator, Sequence

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

REDUCE_OPS = {"sum": "aten.sum.dim_IntList", "mean": "aten.mean.dim", "amax": "aten.amax.default",
              "amin": "aten.amin.default"}
ARG_OPS = {"argmax": "aten.argmax.default", "argmin": "aten.argmin.default"}
SOFTMAX_OPS = {"softmax": "aten._softmax.default", "log_softmax": "aten._log_softmax.default"}
DTYPES = ("fp32", "fp16")
EDGE_FLAGS = ("logits", "big", "special")
"""Edge classes beyond the all-negative and all-equal rows every case carries."""
HALF_MAX = float(np.finfo(np.float16).max)
"""65504: float16's largest; ``big`` rows reach it (float16) or pass it (float32)."""
LOGIT = 100.0
RESIZABLE = ("N", "C", "H", "W")
"""Every size of ``self`` may shrink: the suites also run below their cases' sizes (the resize functions)."""
"""Logits above 88: ``exp`` overflows float32 without max-subtraction."""


def _dims(shape: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
    return tuple((name, size) for name, size in zip("NCHW"[-len(shape):], shape))


def dim_flag(dims: Sequence[int] | None) -> str:
    """``dim-1``, ``dim0_2``; ``dimall`` for None."""
    return "dimall" if dims is None else "dim" + "_".join(str(d) for d in dims)


def dims_of(case: KernelCase) -> list[int] | None:
    """The dims a case's ``dim…`` flag names (None: ``dimall``)."""
    flag = next(f for f in case.flags if f.startswith("dim"))
    return None if flag == "dimall" else [int(d) for d in flag[3:].split("_")]


def rows_view(x: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    """``x`` with the reduced ``axes`` moved last and flattened: ``(rows, n)`` (a copy)."""
    rest = [a for a in range(x.ndim) if a not in axes]
    moved = np.transpose(x, rest + list(axes))
    n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    return moved.reshape(-1, n).copy()


def from_rows(rows: np.ndarray, shape: tuple[int, ...], axes: Sequence[int]) -> np.ndarray:
    """Inverse of ``rows_view``."""
    rest = [a for a in range(len(shape)) if a not in axes]
    order = rest + list(axes)
    moved = rows.reshape([shape[a] for a in order])
    return np.transpose(moved, np.argsort(order))


def reduction_input(shape: tuple[int, ...], axes: Sequence[int], dtype: np.dtype, flags: Sequence[str],
                    rng: np.random.Generator) -> np.ndarray:
    """The edge generator: N(0, 2²) reduction rows, row 0 all negative, row 1 all equal, then the flags' edges.

    Args:
        shape (tuple[int, ...]): the input's shape.
        axes (Sequence[int]): the reduced axes (normalized).
        dtype (np.dtype): the case's float dtype (``big`` reaches float16's largest in half cases).
        flags (Sequence[str]): ``logits``, ``big``, ``special`` (see the module docstring).
        rng (np.random.Generator): the case's generator.
    """
    rows = rows_view(rng.standard_normal(shape) * 2, axes)
    rows[0] = -np.abs(rows[0]) - 0.25
    if len(rows) > 1:
        rows[1] = 1.25
    if "logits" in flags:
        rows[len(rows) // 2:] += LOGIT
        rows[0] -= LOGIT
    if "big" in flags:
        rows *= 300.0
        if len(rows) > 2:
            rows[2] = HALF_MAX / 2 + rng.standard_normal(rows.shape[1])
        if len(rows) > 3:
            top = HALF_MAX if np.dtype(dtype) == np.float16 else 2 * HALF_MAX
            rows[3] = top * rng.uniform(0.5, 0.95, rows.shape[1])
    if "special" in flags:
        for row, value in zip(range(len(rows) - 1, -1, -1), (np.nan, np.inf, -np.inf)):
            rows[row, rng.integers(rows.shape[1])] = value
    return from_rows(rows, shape, axes).astype(dtype)


def _axes(ndim: int, dims: Sequence[int] | None) -> list[int]:
    return list(range(ndim)) if not dims else sorted({d % ndim for d in dims})


def reduce_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """``self`` from the edge generator, ``dim`` from the case's flag, ``keepdim`` if flagged."""
    shape = tuple(case.sizes.values())
    dims = dims_of(case)
    x = reduction_input(shape, _axes(len(shape), dims), case.np_dtype, case.flags, rng)
    if case.op in ARG_OPS.values():
        return {"self": x, "dim": None if dims is None else dims[0], "keepdim": case.has("keepdim")}
    if case.op == "aten.var.dim":
        return {"self": x, "dim": dims, "unbiased": not case.has("biased"), "keepdim": case.has("keepdim")}
    if case.op in SOFTMAX_OPS.values():
        return {"self": x, "dim": dims[0], "half_to_float": False}
    return {"self": x, "dim": dims, "keepdim": case.has("keepdim")}


def reduce_case(name: str, op: str, shape: tuple[int, ...], dtype: str, storage: str, route: str,
                dims: Sequence[int] | None, layout: str = "width", keepdim: bool = True,
                flags: tuple[str, ...] = ()) -> KernelCase:
    """A case whose id names its route, dims and keepdim (the launcher checks the route is the C++'s)."""
    all_flags = (dim_flag(dims),) + (("keepdim",) if keepdim else ()) + flags
    return KernelCase(op=op, name=name, shape=_dims(shape), dtype=dtype, storage=storage, layout=layout,
                      options=(("route", route),), flags=all_flags)


PER_ROW = (((67,), None, False), ((3, 5, 6), [-1], True), ((2, 1, 7, 9), [3], False), ((1, 2, 1), [-1], True))
"""Per-row shapes: width ≡ 3, 2, 1 (mod 4), ranks 1-4, ``dim=None`` on 1-D, size-1 dims and rows of one."""
ONE_DIM = (((3, 5, 6), [0], "width"), ((3, 5, 6), [-2], "width"), ((3, 5, 6), [-1], "width"),
           ((3, 5, 6), [2], "channels"), ((3, 5, 6), [-3], "channels"), ((1, 5, 3, 7), [1], "height"),
           ((1, 5, 3, 7), [-2], "height"), ((2, 3, 5, 7), [-1], "width"), ((13,), [0], "width"),
           ((1, 1, 9), [1], "width"))
"""Texture one-dim shapes: each dim reduced, packed and unpacked, negative indices, ranks 1-4."""
TWO_DIM = (((3, 5, 6), [0, 1], "width"), ((3, 5, 6), [-1, -2], "channels"), ((3, 5, 6), [0, 2], "height"),
           ((2, 5, 7, 9), [2, 3], "channels"))
"""Texture two-dim shapes: the packed dim is always the one left."""


def _reduce_suite(name: str) -> Iterator[KernelCase]:
    op = REDUCE_OPS[name]
    for dtype in DTYPES:
        for shape, dims, keep in PER_ROW:
            yield reduce_case(name, op, shape, dtype, "buffer", "per_row", dims, keepdim=keep)
        for shape, dims, layout in ONE_DIM:
            yield reduce_case(name, op, shape, dtype, "texture3d", "reduce", dims, layout)
        for shape, dims, layout in TWO_DIM:
            yield reduce_case(name, op, shape, dtype, "texture3d", "reduce2d", dims, layout)
        for flag in EDGE_FLAGS:
            yield reduce_case(name, op, (3, 5, 6), dtype, "buffer", "per_row", [-1], flags=(flag,))
            yield reduce_case(name, op, (3, 5, 6), dtype, "texture3d", "reduce", [1], "channels", flags=(flag,))


def _arg_suite(name: str) -> Iterator[KernelCase]:
    for dtype in DTYPES:
        for shape, dims, keep in PER_ROW:
            yield reduce_case(name, ARG_OPS[name], shape, dtype, "buffer", "per_row",
                              None if dims is None else dims[:1], keepdim=keep)
        for flag in EDGE_FLAGS:
            yield reduce_case(name, ARG_OPS[name], (3, 5, 6), dtype, "buffer", "per_row", [-1], flags=(flag,))


SOFTMAX_SHAPES = (((3, 5, 6), [-1], "width"), ((3, 5, 6), [0], "width"), ((3, 5, 6), [-2], "channels"),
                  ((3, 5, 12), [2], "width"), ((2, 3, 5, 7), [-1], "width"), ((1, 5, 3, 7), [1], "channels"),
                  ((67,), [0], "width"), ((4, 1), [-1], "width"), ((3, 13), [0], "height"))
"""Softmax rows: packed dim 6, 12 (the upstream out-of-bounds read), 7 (≡ 3), rank 1-4, a row of one."""


def _softmax_suite(name: str) -> Iterator[KernelCase]:
    for dtype, (shape, dims, layout) in itertools.product(DTYPES, SOFTMAX_SHAPES):
        yield reduce_case(name, SOFTMAX_OPS[name], shape, dtype, "texture3d", "texture", dims, layout, keepdim=False)
        if layout == "width":
            yield reduce_case(name, SOFTMAX_OPS[name], shape, dtype, "buffer", "buffer", dims, keepdim=False)
    for dtype, flag, storage in itertools.product(DTYPES, EDGE_FLAGS, ("buffer", "texture3d")):
        yield reduce_case(name, SOFTMAX_OPS[name], (3, 5, 12), dtype, storage,
                          "buffer" if storage == "buffer" else "texture", [-1], keepdim=False, flags=(flag,))


VAR_SHAPES = (((3, 5, 6), [-1], "width"), ((3, 5, 6), [0], "channels"), ((1, 5, 3, 7), [-2], "width"),
              ((13,), [0], "width"), ((2, 3, 5, 9), [3], "channels"), ((3, 1, 6), [1], "width"))
"""Var rows: each storage's reduce along packed and unpacked dims, ranks 1-4, a reduced dim of one (unbiased: NaN)."""


@register_test_suite("aten.var.dim", make_args=reduce_args, resizable=RESIZABLE)
def var_suite() -> Iterator[KernelCase]:
    for dtype, (shape, dims, layout) in itertools.product(DTYPES, VAR_SHAPES):
        yield reduce_case("var", "aten.var.dim", shape, dtype, "texture3d", "texture", dims, layout)
        yield reduce_case("var", "aten.var.dim", shape, dtype, "buffer", "buffer", dims)
    for dtype, storage in itertools.product(DTYPES, ("buffer", "texture3d")):
        route = "buffer" if storage == "buffer" else "texture"
        yield reduce_case("var", "aten.var.dim", (3, 5, 6), dtype, storage, route, [-1], flags=("biased",))
        yield reduce_case("var", "aten.var.dim", (3, 5, 6), dtype, storage, route, [-1], flags=("big",))
        yield reduce_case("var", "aten.var.dim", (3, 5, 6), dtype, storage, route, [-1], flags=("special",))


def _register(name: str, op: str, cases) -> None:
    def suite() -> Iterator[KernelCase]:
        yield from cases(name)

    suite.__qualname__ = f"{name}_suite"
    register_test_suite(op, make_args=reduce_args, resizable=RESIZABLE)(suite)


for _name, _op in REDUCE_OPS.items():
    _register(_name, _op, _reduce_suite)
for _name, _op in ARG_OPS.items():
    _register(_name, _op, _arg_suite)
for _name, _op in SOFTMAX_OPS.items():
    _register(_name, _op, _softmax_suite)
