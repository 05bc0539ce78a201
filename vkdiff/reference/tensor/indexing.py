"""Indexing, joining and selection ops (``cat``, ``split_with_sizes_copy``, ``gather``, ``index_select``,
``index.Tensor``, ``pixel_shuffle``, ``unfold_copy``, ``repeat_interleave``, ``where``), ``tan`` and the
tensor-scalar ops (``pow.Tensor_Scalar``, ``eq/ne/lt/le/gt/ge.Scalar``), with ATen's semantics.

Copies are exact: float inputs come back as float64 holding the same values, integer and bool
inputs keep their dtype. Index arguments may be int32 (what ET-VK stores) or int64; an index out
of range raises ``IndexError`` as ATen does (``index.Tensor`` accepts ``-size <= i < size``;
``index_select`` and ``gather`` only ``0 <= i < size``).

Scalar comparisons follow ATen's type promotion: a Python scalar does not raise a tensor's
dtype category, so a float scalar is first rounded to a float tensor's dtype (``x == 0.1`` on
float16 compares with ``float16(0.1)``), and an int tensor against a float scalar compares in the
default float dtype (float32).

====================  ==================================================================
op                    formula
====================  ==================================================================
cat                   ``out[..., o_k + j, ...] = tensors[k][..., j, ...]`` along ``dim``
split_with_sizes      ``out_k = self[..., o_k : o_k + s_k, ...]``, ``o_k = sum(s[:k])``
gather                ``out[i_0..i_n] = self[i_0.., index[i_0..i_n] (at dim), ..i_n]``
index_select          ``out = take(self, index, axis=dim)``
index.Tensor          ``out = self[indices...]`` (None: the whole dim)
pixel_shuffle         ``out[n, c, h·r + i, w·r + j] = self[n, c·r² + i·r + j, h, w]``
unfold_copy           ``out[..., k, ..., t] = self[..., k·step + t, ...]``
repeat_interleave     ``out[..., i, ...] = self[..., i // repeats, ...]`` along ``dim``
where                 ``condition ? self : other`` (broadcast)
tan                   ``tan(x)``
pow.Tensor_Scalar     ``x ** e`` (negative base: real for integral ``e``, NaN otherwise)
====================  ==================================================================
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

__all__ = ["cat", "split_with_sizes_copy", "gather", "index_select", "index_tensor", "pixel_shuffle", "unfold_copy",
           "repeat_interleave", "where", "tan", "pow_scalar", "compare_scalar"]


def _values(x) -> np.ndarray:
    """Float inputs as float64 (same values), others unchanged."""
    x = np.asarray(x)
    return x.astype(np.float64) if x.dtype.kind == "f" else np.array(x)


def _checked(index, size: int, negative: bool) -> np.ndarray:
    """``index`` as int64, ``IndexError`` outside ``[0, size)`` (or ``[-size, size)`` when ``negative``)."""
    index = np.asarray(index).astype(np.int64)
    low = -size if negative else 0
    if index.size and (index.min() < low or index.max() >= size):
        raise IndexError(f"index out of range: indices must lie in [{low}, {size}), got "
                         f"[{index.min()}, {index.max()}]")
    return index


def cat(tensors: Sequence, dim: int = 0) -> np.ndarray:
    """``torch.cat``: join along ``dim`` (a negative ``dim`` counts from the end)."""
    return np.concatenate([_values(t) for t in tensors], axis=int(dim))


def split_with_sizes_copy(self, split_sizes: Sequence[int], dim: int = 0) -> tuple[np.ndarray, ...]:
    """``torch.split(self, split_sizes, dim)`` as copies; the sizes must sum to ``self.shape[dim]``."""
    x = _values(self)
    if sum(int(s) for s in split_sizes) != x.shape[int(dim)]:
        raise ValueError(f"split_with_sizes: sizes {list(split_sizes)} do not sum to {x.shape[int(dim)]}")
    cuts = np.cumsum([int(s) for s in split_sizes])[:-1]
    return tuple(np.ascontiguousarray(part) for part in np.split(x, cuts, axis=int(dim)))


def gather(self, dim: int, index, sparse_grad: bool = False) -> np.ndarray:
    """``torch.gather``: ``index`` no larger than ``self`` in every dim but ``dim``."""
    x = _values(self)
    dim = int(dim) % x.ndim
    index = _checked(index, x.shape[dim], negative=False)
    if index.ndim != x.ndim or any(i > s for d, (i, s) in enumerate(zip(index.shape, x.shape)) if d != dim):
        raise ValueError(f"gather: index {index.shape} does not fit self {x.shape} outside dim {dim}")
    return np.take_along_axis(x[tuple(slice(0, n) if d != dim else slice(None) for d, n in enumerate(index.shape))],
                              index, axis=dim)


def index_select(self, dim: int, index) -> np.ndarray:
    """``torch.index_select`` with a 1-D (or scalar) index."""
    x = _values(self)
    dim = int(dim) % x.ndim
    return np.take(x, _checked(np.reshape(index, -1), x.shape[dim], negative=False), axis=dim)


def index_tensor(self, indices: Sequence[Optional[np.ndarray]]) -> np.ndarray:
    """``self[indices]`` (``aten.index.Tensor``): None keeps a dim; negative indices count from the end."""
    x = _values(self)
    key = tuple(slice(None) if i is None else _checked(i, x.shape[d], negative=True) for d, i in enumerate(indices))
    return np.array(x[key])


def pixel_shuffle(self, upscale_factor: int) -> np.ndarray:
    """``torch.pixel_shuffle``: ``[*, C·r², H, W] → [*, C, H·r, W·r]``."""
    x, r = _values(self), int(upscale_factor)
    *batch, c, h, w = x.shape
    if c % (r * r):
        raise ValueError(f"pixel_shuffle: channels {c} not divisible by {r}²")
    y = x.reshape(*batch, c // (r * r), r, r, h, w)
    n = len(batch)
    y = y.transpose(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return np.ascontiguousarray(y.reshape(*batch, c // (r * r), h * r, w * r))


def unfold_copy(self, dimension: int, size: int, step: int) -> np.ndarray:
    """``Tensor.unfold(dimension, size, step)`` as a copy: windows along ``dimension`` as a new last dim."""
    x = _values(self)
    dim = int(dimension) % x.ndim
    count = (x.shape[dim] - int(size)) // int(step) + 1
    windows = [np.take(x, np.arange(k * step, k * step + size), axis=dim) for k in range(count)]
    stacked = np.stack(windows, axis=dim)
    return np.ascontiguousarray(np.moveaxis(stacked, dim + 1, -1))


def repeat_interleave(self, repeats: int, dim: Optional[int] = None, output_size: Optional[int] = None) -> np.ndarray:
    """``torch.repeat_interleave(self, repeats, dim)``; ``dim=None`` flattens first."""
    x = _values(self)
    return np.repeat(x.reshape(-1) if dim is None else x, int(repeats), axis=0 if dim is None else int(dim))


def where(condition, self, other) -> np.ndarray:
    """``torch.where(condition, self, other)`` with broadcasting; a NaN in the chosen branch is kept."""
    return np.where(np.asarray(condition, bool), _values(self), _values(other))


def tan(self) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.tan(_values(self))


def _promoted(self, scalar) -> tuple[np.ndarray, object]:
    """ATen's promotion of (tensor, Python scalar) for a comparison: the operands in the computation dtype."""
    x = np.asarray(self)
    if x.dtype.kind == "f":
        return x.astype(np.float64), float(np.asarray(scalar).astype(x.dtype))
    if isinstance(scalar, (float, np.floating)):
        return x.astype(np.float32).astype(np.float64), float(np.float32(scalar))
    return x.astype(np.int64), int(scalar)


def pow_scalar(self, exponent) -> np.ndarray:
    """``self ** exponent`` (``aten.pow.Tensor_Scalar``), float64; ``0 ** 0`` is 1."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.power(_values(self).astype(np.float64), float(exponent))


def compare_scalar(fn):
    """``aten.<cmp>.Scalar``: ``fn(self, other)`` after ATen's promotion, a bool tensor (NaN: false, ``ne`` true)."""
    def compare(self, other) -> np.ndarray:
        x, scalar = _promoted(self, other)
        return fn(x, scalar)

    compare.__name__ = compare.__qualname__ = f"{fn.__name__}_scalar"
    compare.__doc__ = f"``{fn.__name__}`` against a scalar after ATen's type promotion (a bool tensor)."
    return compare
