"""Reference static-int8 convolutions of ET-VK: ``et_vk.q8ta_conv2d{,_general,_im2col,_pw,_dw,_transposed}``.

int8 activations quantized per tensor (``s_x``, ``z_x``), int8 weights quantized per output channel and
symmetric (codes in [-127, 127], scales ``s_w``), an int8 output requantized with (``s_o``, ``z_o``).

Weight layouts are those the fusion pattern (``patterns/quantized_convolution.py``) writes and the C++ packs:

==================  ============================================  ==============================================
op                  ``weights``                                   from the module's weight
==================  ============================================  ==============================================
conv, pw, im2col    int8 ``[OC, align4(KH·KW·ICg)]``, columns     ``[OC, ICg, KH, KW]`` permuted (0, 2, 3, 1),
                    ``(kh·KW + kw)·ICg + ic``                     the columns zero-padded
transposed          the same                                      ``[IC, OCg, KH, KW]`` regrouped per group
dw                  int8 ``[KH, KW, align4(OC)]``                 ``[OC, 1, KH, KW]`` permuted (2, 3, 1, 0)
==================  ============================================  ==============================================

``weight_sums[oc]`` is the sum of that channel's codes (int32, padded to a multiple of 4); ``weight_scales`` and
``bias`` are padded to a multiple of 4 too (:func:`conv_weight_matrix`, :func:`weight_sums_of`, ...).

Every shader accumulates exact integers, substituting ``z_x`` for each tap outside the input (padding, and the
positions a transposed conv's stride skips), then removes ``z_x · weight_sums`` and requantizes in float32.
With ``acc = Σ_taps w · (x or z_x)`` (so ``acc = Σ w·(x − z_x) + z_x · Σw``, Σw the weights actually packed)::

    separate (q8ta_conv2d.glsl, _dw, _transposed: multiply, then add):
        y = f32(f32(f32(acc) − f32(ws · z_x)) · f32(s_w · s_x)) + bias                  each step rounded to float32
    fused (q8ta_conv2d_pw.glsl, which the im2col route also runs):
        y = fma(f32(acc − z_x · ws), f32(s_w · s_x), bias)     (no bias: f32(acc − z_x · ws) · f32(s_w · s_x))
    y = max(y, 0)                                                                 if activation == "relu"
    out = clamp(round_half_even(f32(y · f32(1 / f32(s_o)))) + z_o, -128, 127)

which equals ``quantize(conv(dequantize(x), dequantize(w)) + bias)`` (the eager ops) up to float32 rounding: a
code may differ by one where ``y / s_o`` is within that rounding of a ``.5`` tie. ``et_vk.q8ta_conv2d`` takes
the im2col route (fused) when ``ICg % 4 == 0``, ``groups == 1`` and ``ICg ≥ 32`` or ``H_out·W_out ≤ 4096``
(``Q8taConv2d.cpp`` on a device that is not a Mali; a Mali also takes it for grouped convs), the general shader
(separate) otherwise. GLSL lets a driver contract the separate multiply and add into an fma; on lavapipe
(through naga) every kernel case matches this uncontracted form exactly.

Eager-op notes (``custom_ops_lib.py``, checked in ``tests/reference/test_q8ta_conv.py``): ``q8ta_conv2d`` (and
``_pw``) and ``q8ta_conv2d_transposed`` view ``weights`` as ``[OC, ICg, KH, KW]``, not the pattern's
``(kh, kw, ic)`` order, so they disagree with the fused graph for kernels > 1×1 with ICg > 1;
``q8ta_conv2d_transposed`` throws for groups > 1 (its per-channel dequantize gets OC scales on an axis of
OC/groups).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from vkdiff.reference.tensor.conv import convolution
from vkdiff.reference.quantized.quant import scalar_f32, scalar_int

__all__ = [
    "conv_weight_matrix", "transposed_weight_matrix", "dw_weight", "weight_sums_of", "dw_weight_sums",
    "pad_channels", "uses_im2col", "q8ta_conv2d", "q8ta_conv2d_general", "q8ta_conv2d_im2col", "q8ta_conv2d_pw",
    "q8ta_conv2d_dw", "q8ta_conv2d_transposed",
]

_F32 = np.float32


def _align4(n: int) -> int:
    return -(-int(n) // 4) * 4


def pad_channels(a: np.ndarray) -> np.ndarray:
    """The last axis zero-padded to a multiple of 4 (``align_width_and_update_state_dict``)."""
    a = np.asarray(a)
    pad = _align4(a.shape[-1]) - a.shape[-1]
    return np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, pad)]) if pad else a


def conv_weight_matrix(weight: np.ndarray) -> np.ndarray:
    """``[OC, ICg, KH, KW]`` codes as the pattern stores a conv's weight: ``[OC, align4(KH·KW·ICg)]``."""
    w = np.asarray(weight)
    return pad_channels(np.ascontiguousarray(w.transpose(0, 2, 3, 1)).reshape(w.shape[0], -1))


def transposed_weight_matrix(weight: np.ndarray, groups: int) -> np.ndarray:
    """A transposed conv's ``[IC, OCg, KH, KW]`` codes as the pattern stores them: ``[OC, align4(KH·KW·ICg)]``
    with row ``g·OCg + o`` holding ``weight[g·ICg + ic, o, kh, kw]`` at column ``(kh·KW + kw)·ICg + ic``."""
    w = np.asarray(weight)
    ic, ocg, kh, kw = w.shape
    icg = ic // groups
    regrouped = w.reshape(groups, icg, ocg, kh, kw).transpose(0, 2, 3, 4, 1)
    return pad_channels(np.ascontiguousarray(regrouped).reshape(groups * ocg, kh * kw * icg))


def dw_weight(weight: np.ndarray) -> np.ndarray:
    """A depthwise conv's ``[OC, 1, KH, KW]`` codes as the pattern stores them: ``[KH, KW, align4(OC)]``."""
    w = np.asarray(weight)
    return pad_channels(np.ascontiguousarray(w.transpose(2, 3, 1, 0)).reshape(w.shape[2], w.shape[3], w.shape[0]))


def weight_sums_of(matrix: np.ndarray) -> np.ndarray:
    """int32 ``[align4(OC)]``: each row's sum (the pattern's ``weight_tensor.sum(dim=1)``, padded)."""
    return pad_channels(np.asarray(matrix, np.int64).sum(axis=1).astype(np.int32))


def dw_weight_sums(weight: np.ndarray) -> np.ndarray:
    """int32 ``[align4(OC)]``: a ``[KH, KW, OC]`` weight summed over the kernel (``sum(dim=(0, 1))``)."""
    return pad_channels(np.asarray(weight, np.int64).sum(axis=(0, 1)).astype(np.int32))


def uses_im2col(in_channels: int, groups: int, out_hw: tuple[int, int], mali: bool = False) -> bool:
    """``q8ta_conv2d``'s choice of the im2col route over the general shader."""
    icg = int(in_channels) // int(groups)
    if icg % 4:
        return False
    return mali or (int(groups) == 1 and (icg >= 32 or out_hw[0] * out_hw[1] <= 4096))


def _codes(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.integer) or x.ndim != 4:
        raise TypeError(f"x must be 4-D integer codes [N, C, H, W], got {x.dtype} {x.shape}")
    return x


def _fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``fma(a, b, c)`` of float32 arrays, rounded once: the product is exact in float64, the float64 sum's error
    (TwoSum) breaks the ties that rounding the sum to float32 a second time would get wrong."""
    p = a.astype(np.float64) * b.astype(np.float64)
    c64 = np.broadcast_to(c, p.shape).astype(np.float64)
    s = p + c64
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)
    r = s.astype(_F32)
    toward = np.where(s >= r.astype(np.float64), np.inf, -np.inf).astype(_F32)
    other = np.nextafter(r, toward)
    midpoint = (s - r.astype(np.float64)) * 2 == other.astype(np.float64) - r.astype(np.float64)
    past = midpoint & (err != 0) & (np.sign(err) == np.sign(other.astype(np.float64) - r.astype(np.float64)))
    return np.where(past, other, r)


def _requantize(acc: np.ndarray, weight_sums, weight_scales, input_scale, input_zero_point, bias, output_scale,
                output_zero_point, activation: str, fused: bool) -> np.ndarray:
    """The shaders' float32 epilogue on ``acc [N, OC, H, W]`` (see the module docstring)."""
    if activation not in ("none", "relu"):
        raise ValueError(f"Unknown activation type: {activation}; ET-VK has 'none' and 'relu'")
    oc = acc.shape[1]
    ws = np.asarray(weight_sums).reshape(-1)[:oc].astype(np.int64)[None, :, None, None]
    sw = np.asarray(weight_scales, _F32).reshape(-1)[:oc][None, :, None, None]
    if ws.shape[1] < oc or sw.shape[1] < oc:
        raise ValueError(f"weight_sums / weight_scales need >= {oc} entries")
    s_x, z_x = scalar_f32(input_scale, "input_scale"), scalar_int(input_zero_point, "input_zero_point")
    s_o, z_o = scalar_f32(output_scale, "output_scale"), scalar_int(output_zero_point, "output_zero_point")
    scale = sw * s_x
    b = None if bias is None else np.asarray(bias, _F32).reshape(-1)[:oc][None, :, None, None]
    if fused:
        adjusted = (acc - z_x * ws).astype(_F32)
        y = adjusted * scale if b is None else _fma_f32(adjusted, np.broadcast_to(scale, acc.shape), b)
    else:
        y = (acc.astype(_F32) - ws.astype(_F32) * _F32(z_x)) * scale
        y = y if b is None else y + b
    if activation == "relu":
        y = np.maximum(y, _F32(0))
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.rint(y * (_F32(1) / s_o)).astype(np.float64) + z_o
    return np.clip(v, -128, 127).astype(np.int8)


def _accumulate(x: np.ndarray, z_x: int, weight4d: np.ndarray, **params) -> np.ndarray:
    """``acc``: the exact ``Σ w · (x − z_x)`` (zero padding) plus ``z_x`` times each channel's full weight sum
    (``weight4d`` is ``[OC, ICg, KH, KW]``, or ``[IC, OCg, KH, KW]`` for a transposed conv)."""
    centred = x.astype(np.float64) - z_x
    exact = np.rint(convolution(centred, weight4d.astype(np.float64), **params)).astype(np.int64)
    taps = weight4d.astype(np.int64)
    if params.get("transposed"):
        groups = int(params["groups"])
        per_channel = taps.reshape(groups, -1, *taps.shape[1:]).sum(axis=(1, 3, 4)).reshape(-1)
    else:
        per_channel = taps.sum(axis=(1, 2, 3))
    return exact + z_x * per_channel[None, :, None, None]


def _unflatten(weights: np.ndarray, in_channels: int, groups: int, kernel_size: Sequence[int]) -> np.ndarray:
    """``[OC, K]`` (pattern order) → ``[OC, ICg, KH, KW]``."""
    w = np.asarray(weights)
    kh, kw = (int(k) for k in kernel_size)
    icg = int(in_channels) // int(groups)
    if w.ndim != 2 or w.shape[1] < kh * kw * icg:
        raise ValueError(f"weights must be [OC, >= {kh * kw * icg}] codes, got {w.shape}")
    return w[:, : kh * kw * icg].reshape(w.shape[0], kh, kw, icg).transpose(0, 3, 1, 2)


def _conv(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, output_scale, output_zero_point,
          bias, kernel_size, stride, padding, dilation, groups, activation, *, fused: bool) -> np.ndarray:
    x = _codes(x)
    w4 = _unflatten(weights, x.shape[1], groups, kernel_size)
    z_x = scalar_int(input_zero_point, "input_zero_point")
    acc = _accumulate(x, z_x, w4, stride=stride, padding=padding, dilation=dilation, groups=int(groups))
    return _requantize(acc, weight_sums, weight_scales, input_scale, z_x, bias, output_scale, output_zero_point,
                       activation, fused)


def q8ta_conv2d_general(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, output_scale,
                        output_zero_point, bias, kernel_size, stride, padding, dilation, groups,
                        activation) -> np.ndarray:
    """Reference for ``et_vk.q8ta_conv2d_general`` (``q8ta_conv2d.glsl``): the separate epilogue.

    Args:
        x: int8 codes ``[N, C, H, W]``.
        input_scale: ``s_x``.
        input_zero_point: ``z_x``.
        weights: int8 ``[OC, align4(KH·KW·ICg)]`` (:func:`conv_weight_matrix`).
        weight_sums: int32 ``[align4(OC)]`` (:func:`weight_sums_of`).
        weight_scales: float ``[align4(OC)]``.
        output_scale: ``s_o``.
        output_zero_point: ``z_o``.
        bias: float ``[align4(OC)]`` or None.
        kernel_size: ``[KH, KW]``.
        stride: ``[sh, sw]``.
        padding: ``[ph, pw]``.
        dilation: ``[dh, dw]``.
        groups: Groups.
        activation: ``"none"`` or ``"relu"``.

    Returns:
        int8 ``[N, OC, H_out, W_out]``.
    """
    return _conv(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, output_scale,
                 output_zero_point, bias, kernel_size, stride, padding, dilation, groups, activation, fused=False)


def q8ta_conv2d_im2col(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, output_scale,
                       output_zero_point, bias, kernel_size, stride, padding, dilation, groups,
                       activation) -> np.ndarray:
    """Reference for ``et_vk.q8ta_conv2d_im2col`` (``q8ta_im2col`` then ``q8ta_conv2d_pw``): the fused epilogue;
    arguments as :func:`q8ta_conv2d_general`."""
    return _conv(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, output_scale,
                 output_zero_point, bias, kernel_size, stride, padding, dilation, groups, activation, fused=True)


def q8ta_conv2d(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, output_scale,
                output_zero_point, bias, kernel_size, stride, padding, dilation, groups, activation) -> np.ndarray:
    """Reference for ``et_vk.q8ta_conv2d``: the epilogue of the route a non-Mali device takes (:func:`uses_im2col`);
    arguments as :func:`q8ta_conv2d_general`."""
    x = _codes(x)
    h_out, w_out = (_out_size(x.shape[2 + i], kernel_size[i], stride[i], padding[i], dilation[i]) for i in (0, 1))
    fused = uses_im2col(x.shape[1], int(groups), (h_out, w_out))
    return _conv(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, output_scale,
                 output_zero_point, bias, kernel_size, stride, padding, dilation, groups, activation, fused=fused)


def _out_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return (int(size) + 2 * int(padding) - int(dilation) * (int(kernel) - 1) - 1) // int(stride) + 1


def q8ta_conv2d_pw(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, output_scale,
                   output_zero_point, bias, kernel_size, stride, padding, dilation, groups,
                   activation) -> np.ndarray:
    """Reference for ``et_vk.q8ta_conv2d_pw`` (``q8ta_conv2d_pw.glsl``, fused epilogue): the op's own semantics,
    groups, stride and padding included (the eager op honours them; ``Q8taConv2dPW.cpp`` ignores them);
    arguments as :func:`q8ta_conv2d_general` with ``weights [OC, align4(ICg)]``."""
    return _conv(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, output_scale,
                 output_zero_point, bias, kernel_size, stride, padding, dilation, groups, activation, fused=True)


def q8ta_conv2d_dw(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, output_scale,
                   output_zero_point, bias, kernel_size, stride, padding, dilation, groups,
                   activation) -> np.ndarray:
    """Reference for ``et_vk.q8ta_conv2d_dw`` (``q8ta_conv2d_dw.glsl``, separate epilogue); arguments as
    :func:`q8ta_conv2d_general` with ``weights [KH, KW, align4(OC)]`` (:func:`dw_weight`) and ``groups == C``."""
    x = _codes(x)
    w = np.asarray(weights)
    c = x.shape[1]
    if w.ndim != 3 or w.shape[2] < c or int(groups) != c:
        raise ValueError(f"depthwise weights must be [KH, KW, >= {c}] with groups == {c}, got {w.shape}, "
                         f"groups {groups}")
    w4 = w[:, :, :c].transpose(2, 0, 1)[:, None]
    z_x = scalar_int(input_zero_point, "input_zero_point")
    acc = _accumulate(x, z_x, w4, stride=stride, padding=padding, dilation=dilation, groups=c)
    return _requantize(acc, weight_sums, weight_scales, input_scale, z_x, bias, output_scale, output_zero_point,
                       activation, fused=False)


def q8ta_conv2d_transposed(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, output_scale,
                           output_zero_point, bias, kernel_size, stride, padding, output_padding, dilation, groups,
                           activation) -> np.ndarray:
    """Reference for ``et_vk.q8ta_conv2d_transposed`` (``q8ta_conv2d_transposed.glsl``, separate epilogue);
    ``weights`` from :func:`transposed_weight_matrix`, ``output_padding`` only sizes the output."""
    x = _codes(x)
    g = int(groups)
    w4 = _unflatten(weights, x.shape[1], g, kernel_size)
    oc, icg = w4.shape[0], w4.shape[1]
    as_transposed = w4.reshape(g, oc // g, icg, *w4.shape[2:]).transpose(0, 2, 1, 3, 4).reshape(g * icg, oc // g,
                                                                                                   *w4.shape[2:])
    z_x = scalar_int(input_zero_point, "input_zero_point")
    acc = _accumulate(x, z_x, as_transposed, stride=stride, padding=padding, dilation=dilation, transposed=True,
                      output_padding=output_padding, groups=g)
    return _requantize(acc, weight_sums, weight_scales, input_scale, z_x, bias, output_scale, output_zero_point,
                       activation, fused=False)

