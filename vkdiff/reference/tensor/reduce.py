"""Reductions over dims (sum, mean, amax, amin, argmax, argmin, var) and softmax, in float64.

Each function takes its ATen schema's arguments by name. ``dim`` lists may be None or empty
(reduce every dim), hold negative indices, or name several dims; ``keepdim`` keeps the
reduced dims as size 1.

=================  ======================================  ==========================================
op                 formula over the reduced dims R         NaN / inf (ATen)
=================  ======================================  ==========================================
sum                ``Σ_R x``                               propagates; ``inf + -inf`` is NaN
mean               ``Σ_R x / |R|``                         as sum
amax / amin        ``max_R x`` / ``min_R x``               NaN wins
argmax / argmin    first index of the max / min            the first NaN's index wins
var                ``Σ_R (x - mean)² / (|R| - unbiased)``  propagates
softmax            ``exp(x - max) / Σ exp(x - max)``       a NaN poisons its row
log_softmax        ``x - max - log Σ exp(x - max)``        as softmax
=================  ======================================  ==========================================

Note:
    The ``*_accumulation`` functions return ``(output, magnitude)``: the sum of absolute
    terms behind each output element, which the tolerance policy scales its rounding bound
    by (``vkdiff.datamodel.tolerance``). For a sum it is ``Σ|x|``; for a mean ``Σ|x| / n``;
    for a variance ``Σ (d² + 2|d|·|x|) / (n - unbiased)`` with ``d = x - mean`` (the rounding of
    the mean enters each deviation with ``|x|``); for softmax the output itself (the
    denominator's rounding is relative); for log_softmax ``|x| + |max| + |log Σ| + 1``.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

__all__ = ["amax", "amin", "argmax", "argmin", "log_softmax", "log_softmax_accumulation", "mean",
           "mean_accumulation", "softmax", "softmax_accumulation", "sum_", "sum_accumulation", "var",
           "var_accumulation", "reduced_axes"]


def reduced_axes(ndim: int, dim: Optional[Sequence[int] | int]) -> tuple[int, ...]:
    """Normalized axes of ``dim`` (None or empty: every axis), as ATen's ``dim_list`` is read.

    Example::

        >>> reduced_axes(3, [-1, 0])
        (0, 2)
    """
    if dim is None:
        return tuple(range(ndim))
    dims = [int(dim)] if isinstance(dim, (int, np.integer)) else [int(d) for d in dim]
    if not dims:
        return tuple(range(ndim))
    return tuple(sorted({d % max(ndim, 1) for d in dims}))


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def sum_(self, dim=None, keepdim: bool = False, dtype=None) -> np.ndarray:
    """``Σ_R x`` (``aten.sum.dim_IntList``)."""
    x = _f64(self)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.sum(x, axis=reduced_axes(x.ndim, dim), keepdims=bool(keepdim))


def sum_accumulation(self, dim=None, keepdim: bool = False, dtype=None) -> tuple[np.ndarray, np.ndarray]:
    """``(sum, Σ|x|)``."""
    return sum_(self, dim, keepdim), sum_(np.abs(_f64(self)), dim, keepdim)


def cumsum(self, dim: int, dtype=None) -> np.ndarray:
    """Inclusive prefix sums along ``dim`` (``aten.cumsum``; integer inputs sum as int64, as ATen promotes them)."""
    x = np.asarray(self)
    wide = np.int64 if x.dtype.kind in "biu" and dtype is None else np.float64
    return np.cumsum(x.astype(wide), axis=int(dim))


def mean(self, dim=None, keepdim: bool = False, dtype=None) -> np.ndarray:
    """``Σ_R x / |R|`` (``aten.mean.dim``)."""
    x = _f64(self)
    axes = reduced_axes(x.ndim, dim)
    count = int(np.prod([x.shape[a] for a in axes])) if x.ndim else 1
    return sum_(x, dim, keepdim) / count


def mean_accumulation(self, dim=None, keepdim: bool = False, dtype=None) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, Σ|x| / n)``."""
    return mean(self, dim, keepdim), mean(np.abs(_f64(self)), dim, keepdim)


def amax(self, dim=(), keepdim: bool = False) -> np.ndarray:
    """``max_R x``, NaN propagated (``aten.amax.default``)."""
    x = _f64(self)
    return np.max(x, axis=reduced_axes(x.ndim, dim), keepdims=bool(keepdim))


def amin(self, dim=(), keepdim: bool = False) -> np.ndarray:
    """``min_R x``, NaN propagated (``aten.amin.default``)."""
    x = _f64(self)
    return np.min(x, axis=reduced_axes(x.ndim, dim), keepdims=bool(keepdim))


def _arg(fn, self, dim, keepdim: bool) -> np.ndarray:
    x = _f64(self)
    if dim is None:
        found = np.asarray(fn(x.reshape(-1)), np.int64)
        return found.reshape((1,) * x.ndim) if keepdim else found
    return np.asarray(fn(x, axis=int(dim) % max(x.ndim, 1), keepdims=bool(keepdim)), np.int64)


def argmax(self, dim: Optional[int] = None, keepdim: bool = False) -> np.ndarray:
    """Index of the first maximum along ``dim`` (a NaN counts as the maximum), int64 (``aten.argmax``)."""
    return _arg(np.argmax, self, dim, keepdim)


def argmin(self, dim: Optional[int] = None, keepdim: bool = False) -> np.ndarray:
    """Index of the first minimum along ``dim`` (a NaN counts as the minimum), int64 (``aten.argmin``)."""
    return _arg(np.argmin, self, dim, keepdim)


def _deviations(self, dim) -> tuple[np.ndarray, tuple[int, ...], int]:
    x = _f64(self)
    axes = reduced_axes(x.ndim, dim)
    count = int(np.prod([x.shape[a] for a in axes])) if x.ndim else 1
    with np.errstate(invalid="ignore"):
        return x - np.mean(x, axis=axes, keepdims=True), axes, count


def var(self, dim=None, unbiased: bool = True, keepdim: bool = False) -> np.ndarray:
    """``Σ_R (x - mean)² / (|R| - unbiased)`` (``aten.var.dim``; one element unbiased: NaN, as ATen)."""
    d, axes, count = _deviations(self, dim)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.sum(d * d, axis=axes, keepdims=bool(keepdim)) / (count - int(bool(unbiased)))


def var_accumulation(self, dim=None, unbiased: bool = True, keepdim: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(var, Σ (d² + 2|d|·|x|) / (n - unbiased))`` (see the module note)."""
    d, axes, count = _deviations(self, dim)
    terms = d * d + 2 * np.abs(d) * np.abs(_f64(self))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        magnitude = np.sum(terms, axis=axes, keepdims=bool(keepdim)) / max(count - int(bool(unbiased)), 1)
    return var(self, dim, unbiased, keepdim), magnitude


def _shifted(self, dim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``x - max``, ``Σ exp(x - max)`` and ``max`` along ``dim`` (kept)."""
    x = _f64(self)
    axis = int(dim) % max(x.ndim, 1)
    with np.errstate(invalid="ignore", over="ignore"):
        top = np.max(x, axis=axis, keepdims=True)
        shifted = x - top
        total = np.sum(np.exp(shifted), axis=axis, keepdims=True)
    return shifted, total, top


def softmax(self, dim: int, half_to_float: bool = False) -> np.ndarray:
    """``exp(x - max) / Σ exp(x - max)`` along ``dim`` (``aten._softmax.default``)."""
    shifted, total, _ = _shifted(self, dim)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.exp(shifted) / total


def softmax_accumulation(self, dim: int, half_to_float: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(softmax, softmax)``: the denominator's rounding is relative to each output."""
    out = softmax(self, dim)
    return out, np.abs(out)


def log_softmax(self, dim: int, half_to_float: bool = False) -> np.ndarray:
    """``x - max - log Σ exp(x - max)`` along ``dim`` (``aten._log_softmax.default``)."""
    shifted, total, _ = _shifted(self, dim)
    with np.errstate(invalid="ignore", divide="ignore"):
        return shifted - np.log(total)


def log_softmax_accumulation(self, dim: int, half_to_float: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(log_softmax, |x| + |max| + |log Σ| + 1)``."""
    shifted, total, top = _shifted(self, dim)
    with np.errstate(invalid="ignore", divide="ignore"):
        log_total = np.log(total)
        magnitude = np.abs(_f64(self)) + np.abs(top) + np.abs(log_total) + 1
        return shifted - log_total, magnitude
