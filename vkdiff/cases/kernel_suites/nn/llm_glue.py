"""The tiny Llama's glue ops as kernel cases: ``embedding``, ``slice_copy``, ``select_copy``.

Each grid holds the tiny Llama's shapes (token embedding ``[256, 64]`` table with ``[1, T]`` tokens,
the ``[32, 8]`` RoPE table sliced along dim 0, the last-token ``select`` of ``[1, T, 64]``) and a few
that move the sliced or selected dim across width (the packed dim), height, channels and batch,
with widths that leave partial texels. Embedding cases include a 32000-token vocabulary (a
Llama's) on both storages; indices are ``[B, T]`` int32 drawn over the whole vocabulary with the
first and last rows always among them. Every case runs in float32 and float16, on buffers and
on width-packed texture3d (which the C++ does not change: it adapts to the placement it is given).
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

DTYPES = ("fp32", "fp16")
IO_STORAGES = ("buffer", "texture3d")

EMBEDDING_SHAPES = ((256, 64, 1, 31), (256, 64, 1, 7), (67, 9, 3, 5), (32000, 64, 1, 9))
"""(V vocabulary, D embedding dim, B, T): the tiny Llama at T = 31 (its maximum) and 7; a width that is not a
multiple of 4 with a leading batch; a Llama vocabulary."""

SLICE_CASES = (((32, 8), 0, 5, 12, 1), ((32, 8), 0, 0, 31, 1), ((9, 9, 9), 2, 2, 9, 2), ((2, 5, 3, 10), 1, 1, 5, 2),
               ((6, 5, 3, 2), 0, 1, 6, 2), ((9, 9), -1, -4, 9, 1))
"""(sizes, dim, start, end, step): the RoPE table rows ``input_pos .. input_pos + T`` (T = 7 at 5, T = 31 at 0),
then width (strided), channels, batch, and a negative dim and start."""

SELECT_CASES = (((1, 31, 64), 1, -1), ((1, 7, 64), 1, 3), ((8, 8, 8), 0, -2), ((6, 10, 7), 2, 6),
                ((9, 2, 9, 4), 1, 1), ((9, 2, 9, 4), 0, 8))
"""(sizes, dim, index): the last token of ``[1, T, 64]``, an inner token, then batch-less dim 0, width (partial
texel), channels and batch of a 4-D tensor."""


def _dims(sizes: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
    """Sizes named by their NCHW letter (``H32-W8``)."""
    return tuple(zip("NCHW"[4 - len(sizes):], sizes))


def _values(case: KernelCase, rng: np.random.Generator) -> np.ndarray:
    sizes = tuple(v for k, v in case.shape if k in "NCHW")
    return rng.standard_normal(sizes).astype(case.np_dtype)


def embedding_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """A normal table in the case dtype and ``[B, T]`` int32 indices with repeats, rows 0 and V - 1 included."""
    v, d, b, t = (case.size(k) for k in "VDBT")
    indices = rng.integers(0, v, (b, t)).astype(np.int32)
    edge = np.array([0, v - 1], np.int32)[:indices.size]
    indices.reshape(-1)[:edge.size] = edge
    return {"weight": rng.standard_normal((v, d)).astype(case.np_dtype), "indices": indices, "padding_idx": -1,
            "scale_grad_by_freq": False, "sparse": False}


def slice_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    return {"self": _values(case, rng), "dim": case.size("dim"), "start": case.size("start"),
            "end": case.size("end"), "step": case.size("step")}


def select_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    return {"self": _values(case, rng), "dim": case.size("dim"), "index": case.size("index")}


def _knobs() -> Iterator[tuple[str, str]]:
    return itertools.product(DTYPES, IO_STORAGES)


@register_test_suite("aten.embedding.default", make_args=embedding_args, sampled=False, resizable=("B", "T"))
def embedding_suite() -> Iterator[KernelCase]:
    for (v, d, b, t), (dtype, storage) in itertools.product(EMBEDDING_SHAPES, _knobs()):
        yield KernelCase(op="aten.embedding.default", name="embedding",
                         shape=(("V", v), ("D", d), ("B", b), ("T", t)), dtype=dtype, storage=storage)


def _unselected(case: KernelCase) -> tuple[str, ...]:
    """Every dim but the sliced or selected one, whose extent the scalar arguments fix."""
    dims = [k for k, _ in case.shape if k in "NCHW"]
    return tuple(k for i, k in enumerate(dims) if i != case.size("dim") % len(dims))


@register_test_suite("aten.slice_copy.Tensor", make_args=slice_args, sampled=False, resizable=_unselected)
def slice_copy_suite() -> Iterator[KernelCase]:
    for (sizes, dim, start, end, step), (dtype, storage) in itertools.product(SLICE_CASES, _knobs()):
        shape = _dims(sizes) + (("dim", dim), ("start", start), ("end", end), ("step", step))
        yield KernelCase(op="aten.slice_copy.Tensor", name="slice_copy", shape=shape, dtype=dtype, storage=storage)


@register_test_suite("aten.select_copy.int", make_args=select_args, sampled=False, resizable=_unselected)
def select_copy_suite() -> Iterator[KernelCase]:
    for (sizes, dim, index), (dtype, storage) in itertools.product(SELECT_CASES, _knobs()):
        shape = _dims(sizes) + (("dim", dim), ("index", index))
        yield KernelCase(op="aten.select_copy.int", name="select_copy", shape=shape, dtype=dtype, storage=storage)
