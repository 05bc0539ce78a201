"""The joining, splitting and indexing ops (``Concat.cpp``, ``Split.cpp``, ``Gather.cpp``, ``IndexSelect.cpp``,
``IndexTensor.cpp``, ``PixelShuffle.cpp``, ``Unfold.cpp``, ``RepeatInterleave.cpp``, ``Where.cpp``).

Each op has a table of named configurations (input shapes, ``dim``, sizes), and a case is one
configuration in one dtype, storage and layout: the label is the case's flag, its shape the
input's. Configurations reach the edges where these shaders break: the packed width ≡ 1, 2, 3
(mod 4), ``cat``/``split`` pieces that straddle a texel along the packed dim, more than three
``cat`` inputs (a second batch and ``update_concat_offset``), ranks 1 to 4 and size-1 dims,
``index_select`` on each of its routes (width, height, channels, batch), ``index.Tensor`` on a
``self`` of rank 1 to 4, a gather with a negative ``dim``, and outputs smaller than the input.
Index tensors are int32 (ET-VK's index dtype) and lead with the edges: 0, ``size - 1``, and a
repeat; ``index.Tensor``'s ``neg`` cases use negative indices, which ATen allows there. ``where``
puts NaN in both branches (``nan``) and broadcasts; its bool condition is an ``rgba8ui`` texture,
and its buffer cases run to show naga's missing 8-bit storage buffers (NOT_SUPPORTED).
Storages and layouts are those the partitioner gives each op (``op_registry.py``):
``index_select`` channels-packed textures, ``unfold_copy`` buffers, ``repeat_interleave`` textures
(the shader has no buffer variant; the repeated dim must not be the packed one).
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator, Sequence

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

FLOATS = ("fp32", "fp16")
STORAGES = ("buffer", "texture3d")


def _dims(shape: Sequence[int]) -> tuple[tuple[str, int], ...]:
    return tuple(zip("NCHW"[-len(shape):], shape))


def _case(op: str, name: str, shape: Sequence[int], label: str, dtype: str, storage: str,
          layout: str = "width") -> KernelCase:
    return KernelCase(op=op, name=name, shape=_dims(shape), dtype=dtype, storage=storage, layout=layout,
                      flags=(label,))


def _data(shape: Sequence[int], case: KernelCase, rng: np.random.Generator) -> np.ndarray:
    """N(0, 2²) floats, or integers in [-50, 50] for int32 cases."""
    if case.dtype == "int32":
        return rng.integers(-50, 51, tuple(shape)).astype(np.int32)
    return (rng.standard_normal(tuple(shape)) * 2).astype(case.np_dtype)


def _sizes(case: KernelCase) -> tuple[int, ...]:
    """The input's sizes as the case names them (the table's at the bound, smaller below it)."""
    return tuple(v for k, v in case.shape if k in "NCHW")


def edge_indices(count: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` int32 indices into ``size``: 0, ``size - 1`` and a repeat of 0 first, the rest random."""
    index = rng.integers(0, size, count)
    index[:3] = [0, size - 1, 0][:count]
    return index.astype(np.int32)


# -- cat / split ------------------------------------------------------------------------------------------------

CAT: dict[str, tuple[tuple[tuple[int, ...], ...], int]] = {
    "w3w6": (((3, 5, 3), (3, 5, 6)), -1),
    "w1w2w3w5": (((2, 1), (2, 2), (2, 3), (2, 5)), 1),
    "h2h1h4": (((2, 3), (1, 3), (4, 3)), 0),
    "c1c3c2": (((2, 1, 3, 5), (2, 3, 3, 5), (2, 2, 3, 5)), 1),
    "n1n2": (((1, 3, 2, 5), (2, 3, 2, 5)), 0),
    "r1": (((5,), (7,)), 0),
}
"""Label → (input shapes, dim): along the packed width with texel-straddling pieces (two, and four: a second
batch), along height, channels and batch, and rank 1."""


def _cat_shapes(case: KernelCase) -> tuple[list[tuple[int, ...]], int]:
    """The label's input shapes with every dim but the concat dim taken from the case (smaller below the bound)."""
    shapes, dim = CAT[case.flags[0]]
    out = tuple(v for _, v in case.shape)
    dim %= len(out)
    return [tuple(s[i] if i == dim else out[i] for i in range(len(out))) for s in shapes], dim


def cat_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    shapes, _ = _cat_shapes(case)
    return {"tensors": [_data(s, case, rng) for s in shapes], "dim": CAT[case.flags[0]][1]}


def cat_resizable(case: KernelCase) -> tuple[str, ...]:
    """Every dim but the concat dim, whose parts the label's table fixes."""
    _, dim = _cat_shapes(case)
    return tuple(k for i, (k, _) in enumerate(case.shape) if i != dim)


@register_test_suite("aten.cat.default", make_args=cat_args, resizable=cat_resizable)
def cat_suite() -> Iterator[KernelCase]:
    for label, (shapes, dim) in CAT.items():
        out = list(shapes[0])
        out[dim] = sum(s[dim] for s in shapes)
        layouts = ("width", "channels") if len(out) >= 3 else ("width", "height")
        dtypes = FLOATS + (("int32",) if label in ("w3w6", "w1w2w3w5") else ())
        for dtype, storage, layout in itertools.product(dtypes, STORAGES, layouts):
            if dtype != "fp32" and layout != "width":
                continue
            yield _case("aten.cat.default", "cat", out, label, dtype, storage, layout)


SPLIT: dict[str, tuple[tuple[int, ...], tuple[int, ...], int]] = {
    "w3w2w4": ((3, 5, 9), (3, 2, 4), -1),
    "w1w6": ((2, 7), (1, 6), 1),
    "c1c4": ((2, 5, 3, 6), (1, 4), 1),
    "h2h3": ((3, 5, 6), (2, 3), 1),
    "r1": ((11,), (5, 6), 0),
}
"""Label → (input shape, split sizes, dim): along the packed width with straddling pieces, along channels
and height, and rank 1. The split dim is named ``S`` in ids; the other dims also run below the bound
(``Split.cpp`` registers no resize function)."""


def _split_dims(shape: Sequence[int], dim: int) -> tuple[tuple[str, int], ...]:
    """``_dims`` with the split dim named ``S`` (its size is fixed by the split sizes)."""
    return tuple(("S" if i == dim % len(shape) else k, v) for i, (k, v) in enumerate(_dims(shape)))


def split_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    _, sizes, dim = SPLIT[case.flags[0]]
    return {"self": _data(tuple(v for _, v in case.shape), case, rng), "split_sizes": list(sizes), "dim": dim}


@register_test_suite("aten.split_with_sizes_copy.default", make_args=split_args, resizable=("N", "C", "H", "W"))
def split_suite() -> Iterator[KernelCase]:
    for label, (shape, _, dim) in SPLIT.items():
        layouts = ("width", "channels") if len(shape) >= 3 else ("width",)
        dtypes = FLOATS + (("int32",) if label == "w3w2w4" else ())
        for dtype, storage, layout in itertools.product(dtypes, STORAGES, layouts):
            if dtype != "fp32" and layout != "width":
                continue
            yield KernelCase(op="aten.split_with_sizes_copy.default", name="split_with_sizes_copy",
                             shape=_split_dims(shape, dim), dtype=dtype, storage=storage, layout=layout,
                             flags=(label,))


# -- gather / index_select / index.Tensor -----------------------------------------------------------------------

GATHER: dict[str, tuple[tuple[int, ...], tuple[int, ...], int]] = {
    "dim2": ((3, 5, 6), (3, 5, 4), 2),
    "dim1": ((3, 5, 6), (2, 7, 3), 1),
    "dim0": ((4, 3, 5), (6, 3, 5), 0),
    "dimneg1": ((3, 5, 6), (3, 5, 4), -1),
    "r1": ((67,), (9,), 0),
}
"""Label → (self, index, dim): along the packed width (the output narrower than self), along height with a
longer index, along channels, a negative dim (ATen normalizes it), and rank 1."""


def gather_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    _, table_index, dim = GATHER[case.flags[0]]
    shape = _sizes(case)
    index_shape = tuple(i if d == dim % len(shape) else min(i, s) for d, (i, s) in enumerate(zip(table_index, shape)))
    size = shape[dim]
    index = rng.integers(0, size, index_shape).astype(np.int32)
    flat = index.reshape(-1)
    flat[:3] = [0, size - 1, 0][: flat.size]
    return {"self": _data(shape, case, rng), "dim": dim, "index": index}


@register_test_suite("aten.gather.default", make_args=gather_args, resizable=("N", "C", "H", "W"))
def gather_suite() -> Iterator[KernelCase]:
    for label, (shape, _, _) in GATHER.items():
        layouts = ("width", "channels") if label in ("dim2", "dim0") else ("width",)
        dtypes = FLOATS + (("int32",) if label == "dim2" else ())
        for dtype, storage, layout in itertools.product(dtypes, STORAGES, layouts):
            yield _case("aten.gather.default", "gather", shape, label, dtype, storage, layout)


INDEX_SELECT: dict[str, tuple[tuple[int, ...], int, int]] = {
    "alongW": ((3, 5, 7), 2, 4),
    "alongH": ((3, 5, 7), 1, 6),
    "alongC": ((6, 5, 7), 0, 3),
    "alongC4d": ((2, 6, 3, 5), 1, 5),
    "alongN": ((3, 6, 3, 5), 0, 2),
    "r2alongH": ((5, 7), 0, 3),
    "r1alongW": ((9,), 0, 4),
}
"""Label → (self, dim, index length ``I``): every route of ``index_select`` (width, height, channels, batch);
outputs smaller than self and one longer (repeated rows). The suite also runs below its bound: a shorter
index on the graph built for ``I`` (``IndexSelect.cpp`` registers no resize function)."""


def index_select_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    _, dim, _ = INDEX_SELECT[case.flags[0]]
    shape = tuple(v for k, v in case.shape if k != "I")
    return {"self": _data(shape, case, rng), "dim": dim, "index": edge_indices(case.size("I"), shape[dim], rng)}


@register_test_suite("aten.index_select.default", make_args=index_select_args, resizable=("I",))
def index_select_suite() -> Iterator[KernelCase]:
    for label, (shape, _, count) in INDEX_SELECT.items():
        dtypes = FLOATS + (("int32",) if label in ("alongW", "alongC", "alongN") else ())
        for dtype in dtypes:
            yield KernelCase(op="aten.index_select.default", name="index_select", shape=_dims(shape) + (("I", count),),
                             dtype=dtype, storage="texture3d", layout="channels", flags=(label,))


INDEX_TENSOR: dict[str, tuple[tuple[int, ...], int]] = {
    "r1": ((67,), 9), "r2": ((5, 7), 6), "r3": ((4, 3, 6), 3), "r4": ((5, 2, 3, 5), 7),
}
"""Label → (self, index length): ``self`` of rank 1 to 4 indexed along dim 0."""


def index_tensor_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    _, count = INDEX_TENSOR[case.flags[0]]
    shape = _sizes(case)
    index = edge_indices(count, shape[0], rng)
    if case.has("neg"):
        index[3:] -= shape[0]
        index[:2] = [-1, -shape[0]]
    return {"self": _data(shape, case, rng), "indices": [index]}


@register_test_suite("aten.index.Tensor", make_args=index_tensor_args, resizable=("N", "C", "H", "W"))
def index_tensor_suite() -> Iterator[KernelCase]:
    for label, (shape, _) in INDEX_TENSOR.items():
        storages = STORAGES if len(shape) == 1 else ("buffer",)
        for dtype, storage in itertools.product(FLOATS, storages):
            yield _case("aten.index.Tensor", "index", shape, label, dtype, storage)
    for label, storage in (("r1", "buffer"), ("r1", "texture3d"), ("r3", "buffer")):
        yield KernelCase(op="aten.index.Tensor", name="index", shape=_dims(INDEX_TENSOR[label][0]), dtype="fp32",
                         storage=storage, flags=(label, "neg"))


# -- pixel_shuffle / unfold_copy / repeat_interleave ------------------------------------------------------------

PIXEL_SHUFFLE: dict[str, tuple[tuple[int, ...], int]] = {
    "r2": ((1, 8, 3, 5), 2), "r3": ((2, 9, 2, 3), 3), "rank3": ((4, 3, 3), 2),
}
"""Label → (self, upscale factor): output widths 10, 9 and 6 (not multiples of 4); one channel out."""


def pixel_shuffle_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    _, r = PIXEL_SHUFFLE[case.flags[0]]
    return {"self": _data(_sizes(case), case, rng), "upscale_factor": r}


# C does not shrink: it stays a multiple of the squared upscale factor.
@register_test_suite("aten.pixel_shuffle.default", make_args=pixel_shuffle_args, resizable=("N", "H", "W"))
def pixel_shuffle_suite() -> Iterator[KernelCase]:
    for label, (shape, _) in PIXEL_SHUFFLE.items():
        layouts = ("width",) if label == "rank3" else ("width", "channels")
        for dtype, storage, layout in itertools.product(FLOATS, STORAGES, layouts):
            yield _case("aten.pixel_shuffle.default", "pixel_shuffle", shape, label, dtype, storage, layout)


UNFOLD: dict[str, tuple[tuple[int, ...], int, int, int]] = {
    "w3s2": ((3, 5, 9), -1, 3, 2), "h2s1": ((3, 5, 9), 1, 2, 1), "r1w4s3": ((10,), 0, 4, 3),
    "n2s1": ((2, 3, 4, 7), 0, 2, 1),
}
"""Label → (self, dimension, size, step): windows along width (a dropped tail), height, rank 1, and a window
as large as the dim."""


def unfold_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    _, dim, size, step = UNFOLD[case.flags[0]]
    return {"self": _data(_sizes(case), case, rng), "dimension": dim, "size": size, "step": step}


# Only C shrinks: N, H and W are each some label's unfolded dim, which must keep ``size`` elements.
@register_test_suite("aten.unfold_copy.default", make_args=unfold_args, resizable=("C",))
def unfold_suite() -> Iterator[KernelCase]:
    for label, (shape, _, _, _) in UNFOLD.items():
        for dtype in FLOATS:
            yield _case("aten.unfold_copy.default", "unfold_copy", shape, label, dtype, "buffer")
    yield _case("aten.unfold_copy.default", "unfold_copy", UNFOLD["w3s2"][0], "w3s2", "fp32", "buffer", "channels")


REPEAT_INTERLEAVE: dict[str, tuple[tuple[int, ...], int, int, str]] = {
    "h2": ((3, 5, 6), 1, 2, "width"), "c3": ((3, 5, 6), 0, 3, "width"), "n2c2": ((2, 3, 5, 6), 1, 2, "width"),
    "r2h3": ((5, 7), 0, 3, "width"), "w2": ((3, 5, 6), -1, 2, "channels"), "ch2": ((3, 5, 6), 1, 2, "channels"),
}
"""Label → (self, dim, repeats, layout): every non-packed dim of width- and channels-packed textures, a 4-D
``self`` with batches folded into z, and rank 2."""


def repeat_interleave_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    _, dim, repeats, _ = REPEAT_INTERLEAVE[case.flags[0]]
    return {"self": _data(_sizes(case), case, rng), "repeats": repeats, "dim": dim}


@register_test_suite("aten.repeat_interleave.self_int", make_args=repeat_interleave_args,
                     resizable=("N", "C", "H", "W"))
def repeat_interleave_suite() -> Iterator[KernelCase]:
    for label, (shape, _, _, layout) in REPEAT_INTERLEAVE.items():
        dtypes = FLOATS + (("int32",) if label == "h2" else ())
        for dtype in dtypes:
            yield _case("aten.repeat_interleave.self_int", "repeat_interleave", shape, label, dtype, "texture3d",
                        layout)


# -- where ------------------------------------------------------------------------------------------------------

WHERE: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {
    "same": ((3, 5, 6), (3, 5, 6), (3, 5, 6)),
    "bcast": ((1, 5, 6), (3, 5, 6), (5, 1)),
    "r1": ((67,), (67,), (67,)),
    "r4": ((2, 1, 7, 9), (2, 1, 7, 9), (2, 1, 7, 9)),
}
"""Label → (condition, self, other): equal shapes, a condition broadcast along channels with other broadcast
along the packed width, rank 1 and rank 4."""


def _follow(table: tuple[int, ...], table_x: tuple[int, ...], x: tuple[int, ...]) -> tuple[int, ...]:
    """A broadcast operand's shape for ``self`` of sizes ``x``: its size-1 dims stay, the rest follow ``x``."""
    return tuple(1 if t == 1 and tx != 1 else s for t, tx, s in zip(table, table_x[-len(table):], x[-len(table):]))


def where_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    table_cond, table_x, table_other = WHERE[case.flags[0]]
    x = _sizes(case)
    cond, other = (_follow(t, table_x, x) for t in (table_cond, table_other))
    condition = rng.random(cond) < 0.5
    flat = condition.reshape(-1)
    flat[:2] = [True, False][: flat.size]
    a, b = _data(x, case, rng), _data(other, case, rng)
    if case.has("nan") and min(a.size, b.size) >= 2:
        a.reshape(-1)[0], b.reshape(-1)[1], a.reshape(-1)[1], b.reshape(-1)[0] = np.nan, np.nan, np.inf, -np.inf
    return {"condition": condition, "self": a, "other": b}


@register_test_suite("aten.where.self", make_args=where_args, resizable=("N", "C", "H", "W"))
def where_suite() -> Iterator[KernelCase]:
    for label, (_, x, _) in WHERE.items():
        layouts = ("width", "channels") if label == "same" else ("width",)
        for dtype, layout in itertools.product(FLOATS, layouts):
            yield _case("aten.where.self", "where", x, label, dtype, "texture3d", layout)
    for dtype in FLOATS:
        yield KernelCase(op="aten.where.self", name="where", shape=_dims(WHERE["same"][1]), dtype=dtype,
                         storage="texture3d", flags=("same", "nan"))
        yield _case("aten.where.self", "where", WHERE["same"][1], "same", dtype, "buffer")
