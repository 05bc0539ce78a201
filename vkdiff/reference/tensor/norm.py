"""Layer, group and batch normalization as ATen defines them, in float64, with their statistics.

=====================================  =========================  =====================================
op                                     statistics over            outputs
=====================================  =========================  =====================================
native_layer_norm                      the last ``len(shape)``    ``out``, ``mean``, ``rstd`` (stats keep
                                       dims                       the normalized dims as size 1)
native_group_norm                      ``C/group × HxW`` per      ``out``, ``mean [N, group]``,
                                       (n, group)                 ``rstd [N, group]``
_native_batch_norm_legit_no_training   given running stats        ``out``, two empty tensors
=====================================  =========================  =====================================

``out = (x - mean) · rstd · weight + bias`` with ``rstd = 1 / sqrt(var + eps)`` and the biased
variance. Weight and bias are per normalized element (layer norm) or per channel (group, batch).

Note:
    ``*_accumulation`` returns ``(outputs, magnitudes)`` (one per output) for the tolerance
    policy: ``mean``: ``Σ|x| / n``; ``rstd``: ``rstd · v / (2 (var + eps))`` with
    ``v = Σ (d² + 2|d|·|x|) / n`` the variance's magnitude (relative rounding halves through the
    square root); ``out``: ``|w| · rstd · (|x| + Σ|x|/n + |d| · v / (var + eps)) + |b|``.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

__all__ = ["batch_norm_accumulation", "group_norm", "group_norm_accumulation", "layer_norm",
           "layer_norm_accumulation", "native_batch_norm_no_training"]


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _normalize(x: np.ndarray, axes: tuple[int, ...], eps: float):
    """``(d, mean, var, rstd, magnitude of mean, magnitude of var)`` over ``axes`` (kept)."""
    count = int(np.prod([x.shape[a] for a in axes]))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        mean = np.mean(x, axis=axes, keepdims=True)
        d = x - mean
        var = np.mean(d * d, axis=axes, keepdims=True)
        rstd = 1.0 / np.sqrt(var + eps)
        mean_mag = np.sum(np.abs(x), axis=axes, keepdims=True) / count
        var_mag = np.sum(d * d + 2 * np.abs(d) * np.abs(x), axis=axes, keepdims=True) / count
    return d, mean, var, rstd, mean_mag, var_mag


def _magnitudes(x, d, var, rstd, mean_mag, var_mag, eps, w, b):
    """Magnitudes of ``out`` and ``rstd`` (see the module note)."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        relative = var_mag / (var + eps)
        out = np.abs(w) * rstd * (np.abs(x) + mean_mag + np.abs(d) * relative) + np.abs(b)
        return out, rstd * relative / 2


def _layer_norm(input, normalized_shape: Sequence[int], weight, bias, eps: float):
    x = _f64(input)
    k = len(normalized_shape)
    axes = tuple(range(x.ndim - k, x.ndim))
    d, mean, var, rstd, mean_mag, var_mag = _normalize(x, axes, float(eps))
    w = np.ones(x.shape[x.ndim - k:]) if weight is None else _f64(weight)
    b = np.zeros(x.shape[x.ndim - k:]) if bias is None else _f64(bias)
    with np.errstate(invalid="ignore", over="ignore"):
        out = d * rstd * w + b
    out_mag, rstd_mag = _magnitudes(x, d, var, rstd, mean_mag, var_mag, float(eps), w, b)
    return (out, mean, rstd), (out_mag, mean_mag, rstd_mag)


def layer_norm(input, normalized_shape: Sequence[int], weight: Optional[np.ndarray], bias: Optional[np.ndarray],
               eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``aten.native_layer_norm.default``: ``(out, mean, rstd)`` over the last ``len(normalized_shape)`` dims."""
    return _layer_norm(input, normalized_shape, weight, bias, eps)[0]


def layer_norm_accumulation(input, normalized_shape, weight, bias, eps):
    """``((out, mean, rstd), (their magnitudes))``."""
    return _layer_norm(input, normalized_shape, weight, bias, eps)


def _group_norm(input, weight, bias, N: int, C: int, HxW: int, group: int, eps: float):
    x = _f64(input)
    n, c, g = int(N), int(C), int(group)
    grouped = x.reshape(n, g, (c // g) * int(HxW))
    d, mean, var, rstd, mean_mag, var_mag = _normalize(grouped, (2,), float(eps))
    per_channel = (1, c) + (1,) * (x.ndim - 2)
    w = np.ones(per_channel) if weight is None else _f64(weight).reshape(per_channel)
    b = np.zeros(per_channel) if bias is None else _f64(bias).reshape(per_channel)
    spread = [np.repeat(v, c // g, axis=1).reshape(n, c, *([1] * (x.ndim - 2))) for v in (rstd, var, mean_mag,
                                                                                          var_mag)]
    rstd_c, var_c, mean_mag_c, var_mag_c = spread
    d = d.reshape(x.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        out = d * rstd_c * w + b
    out_mag, _ = _magnitudes(x, d, var_c, rstd_c, mean_mag_c, var_mag_c, float(eps), w, b)
    _, rstd_mag = _magnitudes(grouped, np.zeros_like(grouped), var, rstd, mean_mag, var_mag, float(eps), 1.0, 0.0)
    stats = (mean.reshape(n, g), rstd.reshape(n, g))
    return (out, *stats), (out_mag, mean_mag.reshape(n, g), rstd_mag.reshape(n, g))


def group_norm(input, weight, bias, N: int, C: int, HxW: int, group: int, eps: float):
    """``aten.native_group_norm.default``: ``(out, mean [N, group], rstd [N, group])``."""
    return _group_norm(input, weight, bias, N, C, HxW, group, eps)[0]


def group_norm_accumulation(input, weight, bias, N, C, HxW, group, eps):
    """``((out, mean, rstd), (their magnitudes))``."""
    return _group_norm(input, weight, bias, N, C, HxW, group, eps)


def _batch_norm(input, weight, bias, running_mean, running_var, eps: float):
    x = _f64(input)
    per_channel = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    mean = _f64(running_mean).reshape(per_channel)
    rstd = 1.0 / np.sqrt(_f64(running_var).reshape(per_channel) + float(eps))
    w = np.ones(per_channel) if weight is None else _f64(weight).reshape(per_channel)
    b = np.zeros(per_channel) if bias is None else _f64(bias).reshape(per_channel)
    with np.errstate(invalid="ignore", over="ignore"):
        out = (x - mean) * rstd * w + b
        magnitude = (np.abs(x) + np.abs(mean)) * rstd * np.abs(w) + np.abs(b)
    empty = np.zeros((0,), np.float64)
    return (out, empty, empty), (magnitude, empty, empty)


def native_batch_norm_no_training(input, weight, bias, running_mean, running_var, momentum: float, eps: float):
    """``aten._native_batch_norm_legit_no_training.default``: ``(out, empty, empty)`` from the running stats."""
    return _batch_norm(input, weight, bias, running_mean, running_var, eps)[0]


def batch_norm_accumulation(input, weight, bias, running_mean, running_var, momentum, eps):
    """``((out, empty, empty), (magnitude, empty, empty))``."""
    return _batch_norm(input, weight, bias, running_mean, running_var, eps)
