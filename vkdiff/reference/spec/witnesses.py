"""Shaders whose arithmetic rounds at every step, evaluated as one conformant device would run them.

Interval bounds cannot follow a one-pass variance: its error is the cancellation of two
rounded sums, and which way each rounding goes decides it. A *witness* instead runs the
shader's own loop in its compute dtype, rounding every operation as the GLSL writes it,
once as written and once for each liberty taken by a real, conformant implementation:
``contraction`` fuses each ``a * b + c`` the GLSL writes (one rounding), ``division``
divides as ``x * (1 / y)`` with the reciprocal rounded (within the spec's 2.5 ULP). A
witness that leaves ATen's tolerance proves the shader wrong on some conformant device;
the results between the witnesses are what such devices give.

Example::

    >>> x = np.array([[1.0, 3.0, 4.0, 10.0]], np.float16)
    >>> float(var_buffer({"self": x, "dim": [1], "unbiased": False}, "float16", frozenset())[0])
    11.25
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

__all__ = ["var_buffer", "WORKERS"]

WORKERS = 4
"""``var_buffer.glsl``'s ``NWORKERS``: invocations that split the reduced dim, each a contiguous chunk."""


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray, dtype) -> np.ndarray:
    """One rounding of the exact ``a * b + c`` (a product of float32 values is exact in float64)."""
    return (np.asarray(a, np.float64) * b + c).astype(dtype)


def _div(a: np.ndarray, b, dtype, reciprocal: bool) -> np.ndarray:
    if reciprocal:
        return (a * (dtype(1) / dtype(b))).astype(dtype)
    return (a / dtype(b)).astype(dtype)


def var_buffer(args: Mapping[str, Any], compute: str, grant: frozenset) -> np.ndarray:
    """``var_buffer.glsl``: per worker ``sum += v`` and ``sum_sq += v * v``; worker 0 adds the partials in order, then
    ``mean = sum / n``, ``var = sum_sq / n - mean * mean`` and, unbiased, ``var *= n / (n - 1)``; all in ``T``."""
    t = np.dtype(compute).type
    fused, reciprocal = "contraction" in grant, "division" in grant
    x = np.asarray(args["self"])
    dims = args.get("dim")
    axis = int(dims[0] if isinstance(dims, (list, tuple)) else dims) % x.ndim
    x = np.moveaxis(x.astype(t), axis, -1)
    r = x.shape[-1]
    q, rem = divmod(r, WORKERS)
    total, total_sq = np.zeros(x.shape[:-1], t), np.zeros(x.shape[:-1], t)
    with np.errstate(all="ignore"):
        for tid in range(WORKERS):
            start = tid * q + min(tid, rem)
            s, sq = np.zeros(x.shape[:-1], t), np.zeros(x.shape[:-1], t)
            for i in range(start, start + q + (1 if tid < rem else 0)):
                v = x[..., i]
                s = (s + v).astype(t)
                sq = _fma(v, v, sq, t) if fused else (sq + (v * v).astype(t)).astype(t)
            total, total_sq = (total + s).astype(t), (total_sq + sq).astype(t)
        mean = _div(total, r, t, reciprocal)
        square = _div(total_sq, r, t, reciprocal)
        var = _fma(-mean, mean, square, t) if fused else (square - (mean * mean).astype(t)).astype(t)
        if bool(args.get("unbiased", True)) and r > 1:
            var = (var * _div(t(r), r - 1, t, reciprocal)).astype(t)
    return var.astype(np.float64)
