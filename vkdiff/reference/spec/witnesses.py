"""Shaders whose arithmetic rounds at every step, evaluated as one conformant device would run them.

Interval bounds cannot follow a one-pass variance: its error is the cancellation of two
rounded sums, and which way each rounding goes decides it. A *witness* instead runs the
shader's own loop in its compute dtype, rounding every operation as the GLSL writes it,
once as written and once for each liberty taken by a real, conformant implementation:
``contraction`` fuses each ``a * b + c`` the GLSL writes (one rounding), ``division``
divides as ``x * (1 / y)`` with the reciprocal rounded (within the spec's 2.5 ULP). A
witness that leaves ATen's tolerance proves the shader wrong on some conformant device;
the results between the witnesses are what such devices give. A builtin the spec bounds only
by ULP (``pow``) is evaluated as an interval (``precision.Spec``) and the shader run on at
both of its ends: a witness returns one evaluation, or a list of them (each a tuple of the
op's outputs), and the envelope spans them.

Example::

    >>> x = np.array([[1.0, 3.0, 4.0, 10.0]], np.float16)
    >>> float(var_buffer({"self": x, "dim": [1], "unbiased": False}, "float16", frozenset())[0])
    11.25
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.reference.spec.precision import Spec, flush_subnormals

__all__ = ["adamw_step_buffer", "group_norm_texture", "layer_norm_buffer", "var_buffer", "WORKERS"]

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


SHARED_WORKERS = 64
"""``native_layer_norm_buffer.glsl``'s ``NUM_WORKERS`` and ``group_norm_reduce_texture.glsl``'s
``LOCAL_WORK_GROUP_SIZE``: partial sums added in shared memory by halving strides."""


def _tree(partials: np.ndarray, t) -> np.ndarray:
    """``shared[w] += shared[w + stride]`` for stride 32, 16, .., 1 over the last axis (64 workers); worker 0's sum."""
    s = partials.astype(t)
    stride = s.shape[-1] // 2
    while stride:
        s = np.concatenate([(s[..., :stride] + s[..., stride:2 * stride]).astype(t), s[..., stride:]], axis=-1)
        stride //= 2
    return s[..., 0]


def _strided_sums(values: np.ndarray, t, fused: bool, square: bool = False) -> np.ndarray:
    """Per row, worker ``w`` adds elements ``w, w + 64, ..`` in order (``local += v``, or ``local += v * v``), then
    the tree; in ``t``."""
    rows, width = values.shape[:-1], values.shape[-1]
    pad = (-width) % SHARED_WORKERS
    v = np.concatenate([values, np.zeros(rows + (pad,), t)], axis=-1).reshape(rows + (-1, SHARED_WORKERS))
    acc = np.zeros(rows + (SHARED_WORKERS,), t)
    for k in range(v.shape[-2]):
        x = v[..., k, :]
        if square:
            acc = _fma(x, x, acc, t) if fused else (acc + (x * x).astype(t)).astype(t)
        else:
            acc = (acc + x).astype(t)
    return _tree(acc, t)


def _grant_spec(dtype: str, grant: frozenset) -> Spec:
    return Spec(dtype, grant & {"pow", "subnormal_flush"})


def _maybe_flushed(values, dtype: str, grant: frozenset) -> np.ndarray:
    """A value as a device that flushes subnormals holds it, when granted."""
    values = np.asarray(values)
    if "subnormal_flush" not in grant:
        return values
    return flush_subnormals(values, dtype).astype(values.dtype)


def layer_norm_buffer(args: Mapping[str, Any], compute: str, grant: frozenset) -> list[tuple[np.ndarray, ...]]:
    """``native_layer_norm_buffer.glsl``, all in ``T``: a strided mean, a two-pass variance (``delta * delta``),
    ``rstd = pow(var + T(epsilon), T(-0.5))`` and ``(x - mean) * rstd * w + b``; under ``pow``, at both ends of the
    spec's bound for ``pow``; under division and contraction together, the reciprocal's multiply fused into the
    subtraction and the addition that follow it (a constant row's delta is then not 0). Returns ``(out, mean, rstd)``
    per evaluation."""
    t = np.dtype(compute).type
    fused, reciprocal = "contraction" in grant, "division" in grant
    x = np.asarray(args["input"])
    k = len(args["normalized_shape"])
    width = int(np.prod(x.shape[x.ndim - k:]))
    rows = _maybe_flushed(x.astype(t).reshape(-1, width), compute, grant)
    with np.errstate(all="ignore"):
        total = _strided_sums(rows, t, fused)
        mean = _div(total, width, t, reciprocal)
        eps = _maybe_flushed(np.asarray(t(float(args["eps"]))), compute, grant)
        if fused and reciprocal:  # x - sum * (1 / n) and sum_sq * (1 / n) + eps, each one fma: the mean unrounded
            recip = t(1) / t(width)
            delta = _fma(-total[:, None], recip, rows, t)
            held = _fma(_strided_sums(delta, t, fused, square=True), recip, eps, t)
        else:
            delta = (rows - mean[:, None]).astype(t)
            var = _div(_strided_sums(delta, t, fused, square=True), width, t, reciprocal)
            held = (var + eps).astype(t)
        held = _maybe_flushed(held, compute, grant)
        spec = _grant_spec(compute, grant)
        rstd = spec.pow(spec.of(held.astype(np.float64), flushable=False), -0.5)
        ends = [rstd.lo] if (rstd.lo == rstd.hi).all() else [rstd.lo, rstd.hi]
        shape = x.shape[:x.ndim - k]
        w = np.ones(width, t) if args.get("weight") is None else np.asarray(args["weight"]).astype(t).reshape(-1)
        b = np.zeros(width, t) if args.get("bias") is None else np.asarray(args["bias"]).astype(t).reshape(-1)
        evaluations = []
        for end in ends:
            r = np.asarray(end).astype(t)
            normalized = (delta * r[:, None]).astype(t)
            out = _fma(normalized, w, b, t) if fused else ((normalized * w).astype(t) + b).astype(t)
            evaluations.append((out.reshape(x.shape).astype(np.float64), mean.reshape(shape).astype(np.float64),
                                r.reshape(shape).astype(np.float64)))
    return evaluations


def _group_order(x: np.ndarray, groups: int) -> tuple[np.ndarray, int]:
    """Each group's elements [N, G, 64, L] in the order ``group_norm_reduce_texture.glsl``'s workers read them (worker
    ``w`` takes a contiguous run of the group's texels, spatial position major), zero-padded, and their count."""
    n, c = x.shape[:2]
    hw = int(np.prod(x.shape[2:]))
    flat = x.reshape(n, c, hw)
    d = c // groups
    out = np.zeros((n, groups, SHARED_WORKERS, 1), x.dtype)
    for g in range(groups):
        first, last = g * d, (g + 1) * d
        texels = -(-last // 4) - first // 4
        per = -(-texels * hw // SHARED_WORKERS)
        spatial, channel = np.divmod(np.arange(hw * d), d)  # spatial major, the group's channels in order
        worker = (spatial * texels + (first + channel) // 4 - first // 4) // per
        length = int(np.bincount(worker).max())
        if length > out.shape[-1]:
            out = np.concatenate([out, np.zeros(out.shape[:-1] + (length - out.shape[-1],), x.dtype)], axis=-1)
        slot = np.arange(worker.size) - np.searchsorted(worker, worker)
        out[:, g, worker, slot] = flat[:, first + channel, spatial]
    return out, d * hw


def group_norm_texture(args: Mapping[str, Any], compute: str, grant: frozenset) -> list[tuple[np.ndarray, ...]]:
    """``group_norm_reduce_texture.glsl`` then ``group_norm_texture.glsl``, in float32: per worker ``sum += v`` and
    ``sum_sq += v * v``, the tree, ``variance = sum_sq / count - mean * mean`` (one pass), ``rstd = 1 / sqrt(variance +
    epsilon)``, mean and rstd stored in the tensor's dtype, then ``(x - mean) * rstd * w + b``."""
    t = np.float32
    stored = np.asarray(args["input"]).dtype
    fused, reciprocal = "contraction" in grant, "division" in grant
    x = np.asarray(args["input"]).astype(t)
    n, c, groups = x.shape[0], x.shape[1], int(args["group"])
    ordered, count = _group_order(x, groups)
    with np.errstate(all="ignore"):
        total = _tree(_sequential(ordered, t, fused, square=False), t)
        total_sq = _tree(_sequential(ordered, t, fused, square=True), t)
        mean = _div(total, count, t, reciprocal)
        square = _div(total_sq, count, t, reciprocal)
        variance = _fma(-mean, mean, square, t) if fused else (square - (mean * mean).astype(t)).astype(t)
        rstd = _div(t(1.0), np.sqrt((variance + t(float(args["eps"]))).astype(t)).astype(t), t, reciprocal)
        mean_s, rstd_s = mean.astype(stored), np.asarray(rstd).astype(stored)
        spread = lambda v: np.repeat(v.astype(t), c // groups, axis=1).reshape((n, c) + (1,) * (x.ndim - 2))
        per_channel = (1, c) + (1,) * (x.ndim - 2)
        w, b = (np.full(per_channel, fill, t) if args.get(name) is None
                else np.asarray(args[name]).astype(t).reshape(per_channel) for name, fill in (("weight", 1), ("bias", 0)))
        normalized = ((x - spread(mean_s)).astype(t) * spread(rstd_s)).astype(t)
        out = _fma(normalized, w, b, t) if fused else ((normalized * w).astype(t) + b).astype(t)
    return [(out.astype(stored).astype(np.float64), mean_s.astype(np.float64), rstd_s.astype(np.float64))]


def _sequential(ordered: np.ndarray, t, fused: bool, square: bool) -> np.ndarray:
    """Each worker's run added in order (the last axis), ``v`` or ``v * v``."""
    acc = np.zeros(ordered.shape[:-1], t)
    for k in range(ordered.shape[-1]):
        v = ordered[..., k]
        if square:
            acc = _fma(v, v, acc, t) if fused else (acc + (v * v).astype(t)).astype(t)
        else:
            acc = (acc + v).astype(t)
    return acc


def adamw_step_buffer(args: Mapping[str, Any], compute: str, grant: frozenset) -> list[tuple[np.ndarray, ...]]:
    """``adamw_step.glsl`` with float32 push constants and each assignment rounded to ``T``; under ``reassociation``
    ``(1.0 - beta2) * g * g`` is formed as ``(1.0 - beta2) * (g * g)``. Returns ``(param', m', v')``."""
    t, f = np.dtype(compute).type, np.float32
    fused, reciprocal = "contraction" in grant, "division" in grant
    c = {k: f(float(args[k])) for k in ("lr", "beta1", "beta2", "eps", "weight_decay", "bias_correction1",
                                          "bias_correction2")}
    g, p, m0, v0 = (np.asarray(args[k]).astype(t).astype(f) for k in ("grad", "param", "m", "v"))

    def mad(a, b, acc):
        return _fma(a, b, acc, f) if fused else (acc + (a * b).astype(f)).astype(f)

    with np.errstate(all="ignore"):
        decay = (c["lr"] * c["weight_decay"]).astype(f)
        p = _fma(-decay, p, p, f).astype(t).astype(f) if fused else (p - (decay * p).astype(f)).astype(t).astype(f)
        m = mad(f(1.0 - c["beta1"]), g, (c["beta1"] * m0).astype(f)).astype(t).astype(f)
        one_minus = f(f(1.0) - c["beta2"])
        if "reassociation" in grant:
            v = mad(one_minus, (g * g).astype(f), (c["beta2"] * v0).astype(f))
        else:
            v = mad((one_minus * g).astype(f), g, (c["beta2"] * v0).astype(f))
        v = v.astype(t).astype(f)
        mhat = _div(m, c["bias_correction1"], f, reciprocal).astype(t).astype(f)
        vhat = _div(v, c["bias_correction2"], f, reciprocal).astype(t).astype(f)
        step = _div((c["lr"] * mhat).astype(f), (np.sqrt(vhat).astype(f) + c["eps"]).astype(f), f, reciprocal)
        param = (p - step).astype(t)
    return [tuple(a.astype(np.float64) for a in (param, m.astype(t), v.astype(t)))]
