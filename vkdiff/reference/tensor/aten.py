"""The ATen ops a Vulkan delegate uses between fused ops: elementwise math, views and copies (float64).

Each function takes its op's schema arguments by name (``self``, ``other``, ``size``...).
Views follow PyTorch semantics on contiguous tensors: a ``view_copy`` is a reshape in
row-major order, a ``permute_copy`` a transpose of axes.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

__all__ = ["add", "sub", "mul", "div", "div_mode", "pow_", "minimum", "eq", "lt", "le", "gt", "ge", "bitwise_and",
           "bitwise_or", "logical_and", "logical_or", "sigmoid", "silu", "tanh", "exp", "neg", "abs_", "cos", "sin", "sqrt", "rsqrt",
           "log10", "round_", "clamp", "relu", "relu6", "hardtanh", "hardswish", "hardsigmoid", "hardshrink",
           "leaky_relu", "gelu", "bitwise_not", "full", "full_like", "arange", "zeros", "ones", "zeros_like",
           "ones_like", "view_copy", "squeeze_copy", "unsqueeze_copy", "to_copy",
           "permute_copy"]


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


def div_mode(self, other, rounding_mode: Optional[str] = None) -> np.ndarray:
    """``self / other``, then floored or truncated as ``rounding_mode`` says (``aten.div.Tensor_mode``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        quotient = _f64(self) / _f64(other)
    mode = None if rounding_mode is None else str(rounding_mode).strip('"')
    return np.floor(quotient) if mode == "floor" else np.trunc(quotient) if mode == "trunc" else quotient


def pow_(self, exponent) -> np.ndarray:
    """``self ** exponent``: real for a negative base with an integral exponent, NaN otherwise."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.power(_f64(self), _f64(exponent))


def minimum(self, other) -> np.ndarray:
    """Element-wise minimum, NaN propagated (``torch.minimum``)."""
    return np.minimum(_f64(self), _f64(other))


def _compare(fn):
    def compare(self, other) -> np.ndarray:
        return fn(_f64(self), _f64(other))

    compare.__doc__ = f"``{fn.__name__}`` element-wise, a bool tensor (NaN compares false, ``ne`` aside)."
    return compare


eq, lt, le, gt, ge = (_compare(fn) for fn in (np.equal, np.less, np.less_equal, np.greater, np.greater_equal))


def bitwise_and(self, other) -> np.ndarray:
    return np.bitwise_and(np.asarray(self), np.asarray(other))


def bitwise_or(self, other) -> np.ndarray:
    return np.bitwise_or(np.asarray(self), np.asarray(other))


def logical_and(self, other) -> np.ndarray:
    return np.logical_and(np.asarray(self), np.asarray(other))


def logical_not(self) -> np.ndarray:
    return np.logical_not(np.asarray(self))


def logical_or(self, other) -> np.ndarray:
    return np.logical_or(np.asarray(self), np.asarray(other))


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


def cos(self) -> np.ndarray:
    return np.cos(_f64(self))


def sin(self) -> np.ndarray:
    return np.sin(_f64(self))


def sqrt(self) -> np.ndarray:
    """``√x``: NaN below zero."""
    with np.errstate(invalid="ignore"):
        return np.sqrt(_f64(self))


def rsqrt(self) -> np.ndarray:
    """``1/√x``: ``inf`` at zero, NaN below."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return 1.0 / np.sqrt(_f64(self))


def log10(self) -> np.ndarray:
    """``log10 x``: ``-inf`` at zero, NaN below."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.log10(_f64(self))


def round_(self) -> np.ndarray:
    """Nearest integer, ties to even (``torch.round``: ``round(2.5) == 2``)."""
    return np.round(_f64(self))


def clamp(self, min=None, max=None) -> np.ndarray:
    """``min(max(x, min), max)``, NaN kept (``aten.clamp``; an absent bound is no bound)."""
    x = _f64(self)
    low = -np.inf if min is None else float(min)
    high = np.inf if max is None else float(max)
    return np.where(np.isnan(x), x, np.minimum(np.maximum(x, low), high))


def relu(self) -> np.ndarray:
    """``max(x, 0)``, NaN kept."""
    return clamp(self, 0.0)


def relu6(self) -> np.ndarray:
    return clamp(self, 0.0, 6.0)


def hardtanh(self, min_val=-1.0, max_val=1.0) -> np.ndarray:
    return clamp(self, min_val, max_val)


def hardswish(self) -> np.ndarray:
    """``x · relu6(x + 3) / 6``."""
    x = _f64(self)
    return x * clamp(x + 3.0, 0.0, 6.0) / 6.0


def hardsigmoid(self) -> np.ndarray:
    """``relu6(x + 3) / 6``."""
    return clamp(_f64(self) + 3.0, 0.0, 6.0) / 6.0


def hardshrink(self, lambd=0.5) -> np.ndarray:
    """``x`` where ``|x| > lambd``, else 0."""
    x = _f64(self)
    return np.where((x > lambd) | (x < -lambd) | np.isnan(x), x, 0.0)


def leaky_relu(self, negative_slope=0.01) -> np.ndarray:
    """``x`` above zero, ``negative_slope · x`` at and below."""
    x = _f64(self)
    return np.where(x > 0, x, x * float(negative_slope))


_ERF = np.frompyfunc(math.erf, 1, 1)


def gelu(self, approximate: str = "none") -> np.ndarray:
    """``x · Φ(x)`` with the exact ``erf`` (``approximate="none"``) or PyTorch's tanh approximation."""
    x = _f64(self)
    if str(approximate).strip('"') == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + _ERF(x / math.sqrt(2.0)).astype(np.float64))


def bitwise_not(self) -> np.ndarray:
    """``~x``: logical not for bool, two's complement for integers."""
    x = np.asarray(self)
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


def full(size: Sequence[int], fill_value, dtype: Optional[str] = None, **unused) -> np.ndarray:
    """``fill_value`` everywhere (float64 unless an integer or bool ``dtype`` is asked for)."""
    kind = np.dtype(dtype).kind if dtype is not None else "f"
    return np.full([int(s) for s in size], fill_value, np.float64 if kind == "f" else dtype)


def full_like(self, fill_value, dtype: Optional[str] = None, **unused) -> np.ndarray:
    return full(np.shape(self), fill_value, dtype if dtype is not None else np.asarray(self).dtype.name)


def arange(start, end, step=1, dtype: Optional[str] = None, **unused) -> np.ndarray:
    """``start, start + step, …`` below ``end`` (float64 unless an integer ``dtype`` is asked for)."""
    kind = np.dtype(dtype).kind if dtype is not None else "f"
    values = np.arange(start, end, 1 if step is None else step, dtype=np.float64)
    return values if kind == "f" else values.astype(dtype)


def zeros(size: Sequence[int], dtype: Optional[str] = None, **unused) -> np.ndarray:
    return full(size, 0, dtype)


def ones(size: Sequence[int], dtype: Optional[str] = None, **unused) -> np.ndarray:
    return full(size, 1, dtype)


def zeros_like(self, dtype: Optional[str] = None, **unused) -> np.ndarray:
    return full_like(self, 0, dtype)


def ones_like(self, dtype: Optional[str] = None, **unused) -> np.ndarray:
    return full_like(self, 1, dtype)


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
