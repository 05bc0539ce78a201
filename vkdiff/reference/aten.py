"""The ATen ops a Vulkan delegate uses between fused ops: elementwise math, views and copies (float64).

Each function takes its op's schema arguments by name (``self``, ``other``, ``size``...).
Views follow PyTorch semantics on contiguous tensors: a ``view_copy`` is a reshape in
row-major order, a ``permute_copy`` a transpose of axes.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

__all__ = ["add", "sub", "mul", "div", "sigmoid", "silu", "tanh", "exp", "neg", "abs_", "view_copy", "squeeze_copy", "unsqueeze_copy",
           "to_copy", "permute_copy"]


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def add(self, other, alpha: float = 1) -> np.ndarray:
    """``self + alpha * other`` (``aten.add.Tensor``)."""
    return _f64(self) + (1 if alpha is None else alpha) * _f64(other)


def sub(self, other, alpha: float = 1) -> np.ndarray:
    """``self - alpha * other`` (``aten.sub.Tensor``)."""
    return _f64(self) - (1 if alpha is None else alpha) * _f64(other)


def mul(self, other) -> np.ndarray:
    return _f64(self) * _f64(other)


def div(self, other) -> np.ndarray:
    return _f64(self) / _f64(other)


def sigmoid(self) -> np.ndarray:
    """``1 / (1 + exp(-x))``."""
    return 1.0 / (1.0 + np.exp(-_f64(self)))


def silu(self) -> np.ndarray:
    """``x * sigmoid(x)``."""
    x = _f64(self)
    return x / (1.0 + np.exp(-x))


def tanh(self) -> np.ndarray:
    """``tanh(x)``: ``-1`` below ``x ≈ -19`` and ``1`` above ``19`` in float64, never NaN for finite ``x``."""
    return np.tanh(_f64(self))


def exp(self) -> np.ndarray:
    """``e^x`` (``inf`` past ``x ≈ 709``; a float32 output overflows past ``88.7``)."""
    with np.errstate(over="ignore"):
        return np.exp(_f64(self))


def neg(self) -> np.ndarray:
    """``-x``."""
    return -_f64(self)


def abs_(self) -> np.ndarray:
    """``|x|``."""
    return np.abs(_f64(self))


def view_copy(self, size: Sequence[int]) -> np.ndarray:
    """Row-major reshape to ``size`` (one ``-1`` allowed), as ``aten.view_copy`` / ``aten._unsafe_view``."""
    return np.array(self).reshape([int(s) for s in size])


def squeeze_copy(self, dim: Sequence[int]) -> np.ndarray:
    """Drop the listed axes that have size 1 (others are kept, as PyTorch does)."""
    x = np.asarray(self)
    axes = tuple(d % x.ndim for d in dim if x.shape[d % x.ndim] == 1) if x.ndim else ()
    return np.squeeze(x, axis=axes).copy()


def unsqueeze_copy(self, dim: int) -> np.ndarray:
    """Insert an axis of size 1 at ``dim`` (negative counts from the end of the result)."""
    x = np.asarray(self)
    return np.expand_dims(x, dim if dim >= 0 else x.ndim + 1 + dim).copy()


def to_copy(self, dtype: Optional[str] = None) -> np.ndarray:
    """A copy, rounded to ``dtype`` when given (``aten._to_copy``; layout/device arguments do not change values)."""
    x = np.array(self)
    return x if dtype is None else x.astype(np.dtype(dtype))


def permute_copy(self, dims: Sequence[int]) -> np.ndarray:
    return np.transpose(np.asarray(self), [int(d) for d in dims]).copy()
