"""References evaluated with a kernel's own rounding: float16 accumulators, in the kernel's order.

The exact reference tells what an op means; these tell what a correct float16 kernel
gives. Each function takes the accumulator dtype, the number of lanes that split K
(texels of 4 round-robin, partial sums added in a tree) and whether ``fma`` is fused,
and returns ``(value, slack)`` per output element: the accumulator's final value before
the kernel stores it, and how far a correct kernel's accumulator may be from it.

* float16 accumulators: the value carries every rounding of the kernel; the slack is one
  ulp of the largest partial sum met (a rounding taken differently, on a device whose
  ``fma`` differs in a tie, moves every later partial sum by about that much);
* float32 accumulators: the value is the exact sum; the slack bounds float32 rounding as
  the float32 tolerance row does (``4 * eps32 * Σ|terms|``), far below a float16 ulp.

A correct kernel then stores a value between the two ends, each rounded to the output
dtype; ``vkdiff.verdicts.compare`` holds every element to that.

Example::

    >>> x = np.array([[1.0, 2.0 ** -11, 2.0 ** -11]])
    >>> w = np.ones((1, 3))
    >>> float(dot_as(x, w, accumulate="float16", lanes=1, fused=True)[0][0, 0])  # each tiny term is lost
    1.0
    >>> float(dot_as(x, w, accumulate="float32", lanes=1, fused=True)[0][0, 0])  # the exact sum
    1.0009765625
"""

from __future__ import annotations

import threading
from typing import Callable, Optional

import numpy as np

from vkdiff.reference.quantized.packing import unpack_int4_linear
from vkdiff.reference.quantized.quant import quantize_per_token

__all__ = ["dot_as", "linear_q4gsw_as", "linear_dq8ca_q4gsw_as", "round_to", "ulp"]

TEXEL = 4
"""K elements one lane takes at a time (one ``vec4`` texel).

A float16 accumulator is emulated in float32 and rounded to float16 after every operation:
exact for a product of two halves (22 bits) and for the sum of two halves that matters (an
addend far below the accumulator's half ulp rounds away either way). A fused ``a*b + c`` is
summed in float32 first: a second rounding there can differ from one rounding only on a
float32 tie, which the slack of one ulp covers."""

FLOAT32_ERROR = 4 * 2.0 ** -23
"""A float32 accumulator's rounding, as a multiple of ``Σ|terms|`` (the float32 tolerance row's ``acc * eps``)."""


def round_to(a: np.ndarray, dtype) -> np.ndarray:
    """``a`` rounded to ``dtype`` (nearest, ties to even) and held in float64."""
    return np.asarray(a, np.float64).astype(dtype).astype(np.float64)


def ulp(a: np.ndarray, dtype) -> np.ndarray:
    """Spacing of ``dtype`` at ``|a|`` (the subnormal spacing at zero), in float64."""
    return np.spacing(np.abs(np.asarray(a, np.float64)).astype(dtype)).astype(np.float64)


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray, dtype, fused: bool) -> np.ndarray:
    """``fma(a, b, c)`` in ``dtype``: the exact product and sum rounded once, or the product rounded first."""
    product = a * b
    return round_to(product + c if fused else round_to(product, dtype) + c, dtype)


def dot_as(x: np.ndarray, w: np.ndarray, *, accumulate: str, lanes: int,
           fused: bool) -> tuple[np.ndarray, np.ndarray]:
    """``x @ w.T`` (``x [M, K]``, ``w [N, K]``, values as the kernel holds them) as ``lanes`` accumulators add it.

    Returns:
        (value, slack): ``[M, N]`` float64 each (see the module docstring).
    """
    if accumulate == "float32":
        x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
        return x @ w.T, FLOAT32_ERROR * (np.abs(x) @ np.abs(w).T)
    _check_half(accumulate, "dot_as")
    return _dot_half(_texels(x, lanes), _texels(w, lanes), fused)


def _check_half(accumulate: str, what: str) -> None:
    if np.dtype(accumulate) != np.float16:
        raise ValueError(f"{what}: accumulators of {accumulate} are not emulated (float16 or float32)")


def _texels(a: np.ndarray, lanes: int) -> np.ndarray:
    """``a [R, K]`` (float16 values) in float32 as the lanes read it, ``[step, i, lane, R]``: lane ``l`` of step
    ``s`` takes texel ``s * lanes + l``, element ``i`` of it; K is padded with zeros to whole steps."""
    rows, k = np.shape(a)
    steps = -(-(-(-k // TEXEL)) // lanes)
    padded = steps * lanes * TEXEL
    if padded != k:
        a = np.concatenate([np.asarray(a, np.float32), np.zeros((rows, padded - k), np.float32)], axis=1)
    out = np.empty((steps, TEXEL, lanes, rows), np.float32)
    out[...] = np.asarray(a).reshape(rows, steps, lanes, TEXEL).transpose(1, 3, 2, 0)
    return out


def _dot_half(xs: np.ndarray, ws: np.ndarray, fused: bool) -> tuple[np.ndarray, np.ndarray]:
    """``dot_as`` with float16 accumulators over operands laid out by ``_texels``."""
    finite = bool(np.isfinite(xs).all() and np.isfinite(ws).all())
    bounded = fused or float(np.abs(xs).max(initial=0.0)) * float(np.abs(ws).max(initial=0.0)) <= HALF_MAX
    acc, scale = _accumulate_half(xs, ws, fused, grid=finite and bounded)
    if finite and bounded and float(scale.max(initial=0.0)) > HALF_MAX:
        acc, scale = _accumulate_half(xs, ws, fused, grid=False)  # a partial sum overflowed: inf from there on
    value, scale = _tree(acc.astype(np.float64), scale.astype(np.float64), np.float16)
    return value, ulp(scale, np.float16)


HALF_MAX = 65504.0
"""The largest finite float16."""


def _accumulate_half(xs: np.ndarray, ws: np.ndarray, fused: bool, grid: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each lane's float16 accumulator over ``xs [step, i, lane, M]`` and ``ws [step, i, lane, N]``, and the
    largest magnitude it held, in float32 ``[lanes, M, N]``; rounded by ``_round_half_grid`` (valid while no
    product or partial sum passes ``HALF_MAX``) or through float16 (``grid=False``)."""
    steps, _, lanes, m = xs.shape
    n = ws.shape[-1]
    acc, scale = np.zeros((lanes, m, n), np.float32), np.zeros((lanes, m, n), np.float32)
    product, total = np.empty_like(acc), np.empty_like(acc)
    scratch = np.empty((2, *acc.shape), np.uint32) if grid else np.empty(acc.shape, np.float16)
    rounded = _round_half_grid if grid else _round_half
    for step in range(steps):
        for i in range(TEXEL):
            np.multiply(xs[step, i][:, :, None], ws[step, i][:, None, :], out=product)
            if not fused:
                rounded(product, scratch, product)
            np.add(acc, product, out=total)
            rounded(total, scratch, acc)
            np.abs(acc, out=total)
            np.maximum(scale, total, out=scale)
    return acc, scale


def _round_half(values: np.ndarray, half: np.ndarray, out: np.ndarray) -> np.ndarray:
    """float32 ``values`` rounded to float16 (nearest, ties to even) through the float16 buffer ``half``, back
    into float32 ``out`` (no allocation: a float16 loop step on 53k elements costs 0.3 ms)."""
    half[...] = values
    out[...] = half
    return out


_HALF_GRID_FLOOR = np.float32(2.0 ** -14).view(np.uint32)
"""The smallest float16 exponent's power of two, as float32 bits: below it float16's spacing stays 2**-24."""


def _round_half_grid(values: np.ndarray, bits: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``_round_half`` for finite ``values`` of magnitude at most ``HALF_MAX`` in float32 arithmetic alone, twice
    as fast (numpy converts to float16 in software); ``bits`` is ``[2, *values.shape]`` uint32 scratch.

    With ``2**E`` the power of two at or below ``|x|`` (at least ``2**-14``), ``C = 1.5 * 2**(E+13)`` has a float32
    spacing of ``2**(E-10)``, float16's spacing at ``x``, and ``x + C`` stays in ``C``'s binade: the float32 sum
    rounds ``x`` to that spacing, nearest and ties to even (``C`` is an even multiple of it), and subtracting
    ``C`` is exact. The sign bit is put back so that a zero keeps its own."""
    offset, sign = bits[0], bits[1]
    np.bitwise_and(values.view(np.uint32), np.uint32(0x80000000), out=sign)
    np.bitwise_and(values.view(np.uint32), np.uint32(0x7F800000), out=offset)
    np.maximum(offset, _HALF_GRID_FLOOR, out=offset)
    np.multiply(offset.view(np.float32), np.float32(1.5 * 2 ** 13), out=offset.view(np.float32))
    np.add(values, offset.view(np.float32), out=out)
    np.subtract(out, offset.view(np.float32), out=out)
    np.bitwise_or(out.view(np.uint32), sign, out=out.view(np.uint32))
    return out


def _tree(acc: np.ndarray, scale: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """Lane partials added pairwise, ``partial[l] += partial[l + half]``, as the shaders' shared-memory reduction."""
    lanes = acc.shape[0]
    while lanes > 1:
        half = lanes // 2
        acc = round_to(acc[:half] + acc[half:lanes], dtype)
        scale = np.maximum(np.maximum(scale[:half], scale[half:lanes]), np.abs(acc))
        lanes = half
    return acc[0], scale[0]


def _add_bias(value: np.ndarray, slack: np.ndarray, bias: Optional[np.ndarray], accumulate: str):
    """``+ bias`` in the accumulator's dtype (``add_bias_to_out_tile``)."""
    if bias is None:
        return value, slack
    bias = np.asarray(bias, np.float64)[:value.shape[-1]]
    if accumulate == "float32":
        return value + bias, slack + FLOAT32_ERROR * np.abs(bias)
    value = round_to(value + bias, accumulate)
    return value, np.maximum(slack, ulp(value, accumulate))


def linear_q4gsw_as(x: np.ndarray, weights: np.ndarray, scales: np.ndarray, group_size: int,
                    bias: Optional[np.ndarray] = None, *, accumulate: str, lanes: int = 1,
                    fused: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``linear_q4gsw`` as ``fp_accumulate_with_int4_weight`` computes it.

    Each weight is ``fma(code, scale, 0)`` in the accumulator's dtype (one rounding of the
    product), each term ``fma(x, weight, acc)``; the kernel stores the result in ``x``'s dtype.
    The weights as the lanes read them are kept for the next call on the same weights
    (``_WEIGHTS``): the other ``fma`` model and the smaller runs, which keep the constants.
    """
    x = np.asarray(x)
    k = x.shape[-1]
    rows = x.reshape(-1, k)
    if accumulate == "float32":
        w = _WEIGHTS.get((weights, scales), (group_size, k, "float64"), lambda: _dequantized(weights, scales,
                                                                                           group_size, k))
        value, slack = dot_as(rows, w, accumulate=accumulate, lanes=lanes, fused=fused)
    else:
        _check_half(accumulate, "linear_q4gsw_as")
        ws = _WEIGHTS.get((weights, scales), (group_size, k, lanes), lambda: _texels(
            _half_weights(weights, scales, group_size, k), lanes))
        value, slack = _dot_half(_texels(rows, lanes), ws, fused)
    n = value.shape[-1]
    value, slack = _add_bias(value, slack, bias, accumulate)
    return value.reshape(*x.shape[:-1], n), slack.reshape(*x.shape[:-1], n)


def _dequantized(weights: np.ndarray, scales: np.ndarray, group_size: int, k: int) -> np.ndarray:
    """``code * scale`` in float64 ``[N, K]``."""
    codes = unpack_int4_linear(weights, k).astype(np.float64)
    n = codes.shape[0]
    per_group = np.asarray(scales, np.float64)[:, :n].T[:, :, None]
    return (codes.reshape(n, -1, group_size) * per_group).reshape(n, k)


def _half_weights(weights: np.ndarray, scales: np.ndarray, group_size: int, k: int) -> np.ndarray:
    """``fma(code, scale, 0)`` rounded once to float16, held in float32 ``[N, K]``.

    A 4-bit code times a scale of at most 20 significant bits is exact in float32, so the
    product is rounded once, as the float64 product would be; other scales take float64."""
    n = np.shape(weights)[0]
    per_group = np.asarray(scales)[:, :n].T
    narrow = per_group.astype(np.float32)
    if not np.array_equal(narrow, per_group) or not np.array_equal(narrow, _grid(narrow, 20)):
        return round_to(_dequantized(weights, scales, group_size, k), np.float16).astype(np.float32)
    codes = unpack_int4_linear(weights, k).astype(np.float32)
    product = (codes.reshape(n, -1, group_size) * narrow[:, :, None]).reshape(n, k)
    if float(np.abs(narrow).max(initial=0.0)) * 8 > HALF_MAX:
        return product.astype(np.float16).astype(np.float32)
    return _round_half_grid(product, np.empty((2, *product.shape), np.uint32), product)


def _grid(values: np.ndarray, bits: int) -> np.ndarray:
    """float32 ``values`` with their significands cut to ``bits`` bits (equal to ``values`` where they fit)."""
    return (values.view(np.uint32) & np.uint32((0xFFFFFFFF << (24 - bits)) & 0xFFFFFFFF)).view(np.float32)


class _LastWeights:
    """The last weights ``linear_q4gsw_as`` laid out, with copies of the arrays they came from: a call on arrays
    equal to those (dtype and every element, compared on each hit) takes them again."""

    def __init__(self):
        self._lock = threading.Lock()
        self._entry: tuple | None = None

    def get(self, arrays: tuple, key: tuple, make: Callable[[], np.ndarray]) -> np.ndarray:
        arrays = tuple(np.asarray(a) for a in arrays)
        with self._lock:
            entry = self._entry
        if entry is not None and entry[0] == key and all(
                a.dtype == c.dtype and np.array_equal(a, c) for a, c in zip(arrays, entry[1])):
            return entry[2]
        value = make()
        with self._lock:
            self._entry = (key, tuple(a.copy() for a in arrays), value)
        return value


_WEIGHTS = _LastWeights()


QUANTIZE_ERROR = 4 * 2.0 ** -23
"""Relative error of the float32 ``x * (1.0 / scale)`` a shader quantizes with: Vulkan lets ``OpFDiv`` be
2.5 ulp off and the product rounds once more."""


def _quantize_as_shader(x: np.ndarray, input_scale: np.ndarray,
                        zero_point: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``quantize()`` of ``linear_int8_input_block.glslh``, ``round(x * (1.0 / float(scale))) + zp`` in float32:
    the codes, and where a correct device may round the other way (within ``QUANTIZE_ERROR`` of a half, or a
    tie ``round()`` may break either way)."""
    inverse = np.float32(1.0) / np.asarray(input_scale, np.float32).reshape(-1, 1)
    scaled = (np.asarray(x, np.float32) * inverse).astype(np.float64)
    near_half = np.abs(scaled - np.floor(scaled) - 0.5) <= QUANTIZE_ERROR * np.abs(scaled)
    q = quantize_per_token(scaled, np.ones(len(inverse)), zero_point)
    return q, near_half & (q > -128) & (q < 127)


def linear_dq8ca_q4gsw_as(x: np.ndarray, input_scale: np.ndarray, input_zero_point: np.ndarray,
                          weights: np.ndarray, weight_sums: np.ndarray, scales: np.ndarray, group_size: int,
                          bias: Optional[np.ndarray] = None, *, accumulate: str, lanes: int = 1,
                          fused: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``linear_dq8ca_q4gsw`` as ``accumulate_out_tile_with_int_accum_from_int4_weights`` computes it.

    Per group the integer sum ``Σ q·c − ws·z`` is exact; it is converted to the
    accumulator's dtype, multiplied by ``VEC4_T(s_x * s_w)`` (the float32 product rounded)
    and added with ``fma``, group after group. No dq8ca shader splits K over lanes. An
    activation a device may quantize one step the other way widens its row's slack by that
    step's terms, ``s_x · s_w · |c|``.
    """
    if lanes != 1:
        raise ValueError(f"linear_dq8ca_q4gsw_as: no dq8ca kernel splits K over lanes (got lanes={lanes})")
    x = np.asarray(x)
    k = x.shape[-1]
    xm = x.reshape(-1, k)
    m = xm.shape[0]
    z = np.asarray(input_zero_point, np.float64).reshape(m)
    q, ambiguous = _quantize_as_shader(xm, input_scale, z)
    q = q.astype(np.int64)
    codes = unpack_int4_linear(weights, k).astype(np.int64)
    n, groups = codes.shape[0], k // group_size
    sums = np.asarray(weight_sums, np.int64)[:, :n]
    s_x = np.asarray(input_scale, np.float32).reshape(m, 1).astype(np.float64)
    step = np.asarray(scales, np.float64)[:, :n][:, None, :] * s_x[None]          # [G, M, N], exact in float64
    q_groups, code_groups = q.reshape(m, groups, group_size), codes.reshape(n, groups, group_size)
    integer = (np.einsum("mgk,ngk->gmn", q_groups, code_groups) - sums[:, None, :] * z.astype(np.int64)[None, :, None])
    integer = integer.astype(np.float64)
    if accumulate == "float32":
        value, slack = (integer * step).sum(axis=0), FLOAT32_ERROR * np.abs(integer * step).sum(axis=0)
    else:
        value, scale = np.zeros((m, n)), np.zeros((m, n))
        step = round_to(step, accumulate)
        for g in range(groups):
            value = _fma(round_to(integer[g], accumulate), step[g], value, np.dtype(accumulate), fused)
            np.maximum(scale, np.abs(value), out=scale)
        slack = ulp(scale, accumulate)
    if ambiguous.any():
        per_k = np.repeat(np.asarray(scales, np.float64)[:, :n].T, group_size, axis=1)        # [N, K]
        slack = slack + s_x * (ambiguous.astype(np.float64) @ (np.abs(codes) * per_k).T)
    value, slack = _add_bias(value, slack, bias, accumulate)
    return value.reshape(*x.shape[:-1], n), slack.reshape(*x.shape[:-1], n)
