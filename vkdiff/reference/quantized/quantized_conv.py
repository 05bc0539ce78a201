"""Reference ET-VK quantized 2-D convolutions (``QuantizedConvolution.cpp``): int8 per-channel weights.

=============================  ===========  ==============  ===================================================
op                             activation   output          computed as
=============================  ===========  ==============  ===================================================
``conv2d_q8csw``               float        float           ``conv(x, w * s_w) + b``                 (float64)
``conv2d_q8ta_q8csw``          float → q8   float           ``s_x s_w (acc - z_x ws) + b``           (float64)
``conv2d_q8ta_q8csw_q8to[_dw]`` int8 codes  int8 codes      ``requant(s_x s_w (acc - z_x ws) + b)``  (float32)
=============================  ===========  ==============  ===================================================

with ``acc[n, o, y, x] = sum_{ky, kx, c in group(o)} q[n, c, y*sy - py + ky*dy, x*sx - px + kx*dx] * w[o, ky, kx, c]``
summed exactly in integers, ``q`` the int8 activation codes (``quantize_per_tensor`` of the float input for
``conv2d_q8ta_q8csw``) and ``q = z_x`` at padded positions, so ``acc - z_x ws`` is ``sum (q - z_x) w`` when
``ws`` (the caller's ``weight_sums``) is the per-channel sum of the codes. The float path pads with 0.

Weight layouts (what ET-VK's ``quantized_convolution`` pattern writes):

* ``[OC, align4(Kh*Kw*IC/groups)]`` int8, column ``(ky*Kw + kx)*IC_per_group + c`` (the ``(OC, H, W, IC)``
  permutation of a torch weight, padded with zero columns);
* depthwise (``groups == C_in``, ``_q8to`` ops only): ``[Kh, Kw, align4(OC)]`` int8, ``w[ky, kx, o]``.

``weight_scales``, ``weight_sums`` and ``bias`` may be padded past OC (ET-VK pads them to 4); the extra
entries are ignored.

The int8-output ops are compared code for code, so they are evaluated as the shaders round, in float32
(``linear_int8_output_tile_compute.glslh`` / ``conv2d_dw_q8ta_q8csw_q8to.glsl``), with ``f`` = round to
float32 (GLSL ``fma`` rounded once)::

    regular:    y = f(fma(f(adj), f(s_w * s_x), b))               adj = acc - z_x * ws  (int32)
    depthwise:  y = f(f(f(f(acc) - f(ws * z_x)) * f(s_w * s_x)) + b)
    out = clip(rint(f(y * f(1 / s_out))) + z_out, -128, 127)      (round half to even)
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from vkdiff.reference.quantized.quant import quantize_per_tensor, scalar_f32, scalar_int

__all__ = ["conv2d_q8csw", "conv2d_q8csw_accumulation", "conv2d_q8ta_q8csw", "conv2d_q8ta_q8csw_accumulation",
           "conv2d_q8ta_q8csw_q8to", "conv2d_q8ta_q8csw_q8to_float", "conv_out_size", "fma_f32", "requantize_f32",
           "weight_matrix", "windows"]


def _pair(values: Sequence[int], name: str) -> tuple[int, int]:
    values = [int(v) for v in np.atleast_1d(values)]
    if len(values) not in (1, 2):
        raise ValueError(f"{name} must have 1 or 2 entries (H, W), got {values}")
    return (values[0], values[-1])


def conv_out_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """Output extent of one spatial dim (``calc_out_size``, floor mode)."""
    out = (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1
    if out < 1:
        raise ValueError(f"output size {out} < 1 (size {size}, kernel {kernel}, stride {stride}, padding {padding}, "
                         f"dilation {dilation})")
    return out


def windows(x: np.ndarray, kernel_size, stride, padding, dilation, fill) -> np.ndarray:
    """The convolution windows of an NCHW ``x`` as ``[N, Ho, Wo, Kh, Kw, C]``, ``fill`` outside the input."""
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"input must be NCHW, got shape {x.shape}")
    (kh, kw), (sy, sx), (py, px), (dy, dx) = (_pair(v, n) for v, n in ((kernel_size, "kernel_size"),
                                                                        (stride, "stride"), (padding, "padding"),
                                                                        (dilation, "dilation")))
    n, c, h, w = x.shape
    ho, wo = conv_out_size(h, kh, sy, py, dy), conv_out_size(w, kw, sx, px, dx)
    padded = np.pad(x, ((0, 0), (0, 0), (py, py), (px, px)), constant_values=fill)
    out = np.empty((n, ho, wo, kh, kw, c), dtype=x.dtype)
    for ky in range(kh):
        for kx in range(kw):
            rows = padded[:, :, ky * dy: ky * dy + (ho - 1) * sy + 1: sy, kx * dx: kx * dx + (wo - 1) * sx + 1: sx]
            out[:, :, :, ky, kx, :] = rows.transpose(0, 2, 3, 1)
    return out


def weight_matrix(weights: np.ndarray, c_in: int, groups: int, kernel_size) -> np.ndarray:
    """The int8 codes as ``[OC, Kh*Kw*IC_per_group]`` (columns ``(ky, kx, c)``), from either weight layout."""
    w = np.asarray(weights)
    kh, kw = _pair(kernel_size, "kernel_size")
    if not np.issubdtype(w.dtype, np.integer):
        raise TypeError(f"weights must hold integer codes, got {w.dtype}")
    if c_in % groups:
        raise ValueError(f"C_in={c_in} is not a multiple of groups={groups}")
    if w.ndim == 3:
        if groups != c_in or w.shape[:2] != (kh, kw) or w.shape[2] < c_in:
            raise ValueError(f"depthwise weights must be [Kh, Kw, >= C_in] with groups == C_in, got {w.shape} "
                             f"(kernel {kh}x{kw}, C_in {c_in}, groups {groups})")
        return w[:, :, :c_in].reshape(kh * kw, c_in).T.astype(np.int64)
    logical = kh * kw * (c_in // groups)
    if w.ndim != 2 or w.shape[1] < logical:
        raise ValueError(f"weights must be [OC, >= {logical}] (Kh*Kw*C_in/groups), got {w.shape}")
    if w.shape[0] % groups:
        raise ValueError(f"OC={w.shape[0]} is not a multiple of groups={groups}")
    return w[:, :logical].astype(np.int64)


def _grouped(patches: np.ndarray, matrix: np.ndarray, groups: int) -> np.ndarray:
    """``[N, OC, Ho, Wo]``: each group's windows times its rows of ``matrix`` (dtype of the operands)."""
    n, ho, wo, kh, kw, c = patches.shape
    oc, cg = matrix.shape[0], c // groups
    out = np.empty((n, ho, wo, oc), dtype=np.result_type(patches, matrix))
    for g in range(groups):
        cols = patches[..., g * cg:(g + 1) * cg].reshape(n, ho, wo, kh * kw * cg)
        rows = slice(g * oc // groups, (g + 1) * oc // groups)
        out[..., rows] = cols @ matrix[rows].T
    return out.transpose(0, 3, 1, 2)


def _per_channel(values, oc: int, name: str, dtype=np.float64) -> np.ndarray:
    v = np.asarray(values).reshape(-1)
    if v.size < oc:
        raise ValueError(f"{name} needs >= {oc} entries (one per output channel), got {v.size}")
    return v[:oc].astype(dtype).reshape(1, oc, 1, 1)


def _int_accumulate(q: np.ndarray, zero_point: int, weights, groups: int, geometry: dict) -> tuple[np.ndarray, int]:
    """Exact ``acc`` (int64) over windows padded with ``zero_point``, and OC."""
    matrix = weight_matrix(weights, q.shape[1], groups, geometry["kernel_size"])
    patches = windows(q.astype(np.int64), fill=zero_point, **geometry)
    return _grouped(patches, matrix, groups), matrix.shape[0]


def conv2d_q8csw(x, weights, weight_scales, bias=None, kernel_size=(1, 1), stride=(1, 1), padding=(0, 0),
                 dilation=(1, 1), groups=1) -> np.ndarray:
    """Reference for ``et_vk.conv2d_q8csw``: float input, int8 weights per output channel (weight-only).

    ``out[n, o] = sum_window x * (w[o] * s_w[o]) + b[o]`` in float64, zero padding.

    Args:
        x: float NCHW activations.
        weights: int8 ``[OC, align4(Kh*Kw*IC/groups)]`` (see the module docstring).
        weight_scales: ``[>= OC]`` per-channel scales.
        bias: optional ``[>= OC]``.
        kernel_size, stride, padding, dilation: ``[H, W]`` lists.
        groups: convolution groups.

    Returns:
        float64 ``[N, OC, Ho, Wo]``.
    """
    geometry = {"kernel_size": kernel_size, "stride": stride, "padding": padding, "dilation": dilation}
    x = np.asarray(x).astype(np.float64)
    matrix = weight_matrix(weights, x.shape[1], int(groups), kernel_size)
    oc = matrix.shape[0]
    out = _grouped(windows(x, fill=0.0, **geometry), matrix.astype(np.float64), int(groups))
    out = out * _per_channel(weight_scales, oc, "weight_scales")
    return out if bias is None else out + _per_channel(bias, oc, "bias")


def conv2d_q8csw_accumulation(x, weights, weight_scales, bias=None, **params) -> tuple[np.ndarray, np.ndarray]:
    """``(output, |x| conv |w s_w| + |b|)``: the magnitude the float accumulation rounds against."""
    expected = conv2d_q8csw(x, weights, weight_scales, bias, **params)
    magnitude = conv2d_q8csw(np.abs(np.asarray(x, np.float64)), np.abs(np.asarray(weights, np.int64)),
                             np.abs(np.asarray(weight_scales, np.float64)),
                             None if bias is None else np.abs(np.asarray(bias, np.float64)), **params)
    return expected, magnitude


def _q8ta_float(q, input_scale, input_zero_point, weights, weight_sums, weight_scales, bias, groups,
                geometry) -> np.ndarray:
    """``s_x s_w (acc - z_x ws) + b`` in float64 from int8 codes ``q``."""
    z = scalar_int(input_zero_point, "input_zero_point")
    acc, oc = _int_accumulate(np.asarray(q), z, weights, int(groups), geometry)
    adjusted = acc - z * _per_channel(weight_sums, oc, "weight_sums", np.int64)
    scale = np.float64(scalar_f32(input_scale, "input_scale")) * _per_channel(weight_scales, oc, "weight_scales")
    out = adjusted.astype(np.float64) * scale
    return out if bias is None else out + _per_channel(bias, oc, "bias")


def conv2d_q8ta_q8csw(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, bias=None,
                      kernel_size=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1) -> np.ndarray:
    """Reference for ``et_vk.conv2d_q8ta_q8csw``: the float input quantized per tensor, integer convolution.

    ``q = quantize_per_tensor(x, s_x, z_x)`` (float32 reciprocal multiply, as ``quantize_and_pack_im2col``),
    then ``out = s_x * s_w[o] * (acc - z_x * ws[o]) + b[o]`` in float64 with ``acc`` the exact integer sum over
    windows padded with ``z_x`` (the shader quantizes the zero padding to ``z_x``).

    Returns:
        float64 ``[N, OC, Ho, Wo]``.
    """
    geometry = {"kernel_size": kernel_size, "stride": stride, "padding": padding, "dilation": dilation}
    q = quantize_per_tensor(np.asarray(x), input_scale, input_zero_point)
    return _q8ta_float(q, input_scale, input_zero_point, weights, weight_sums, weight_scales, bias, groups, geometry)


def conv2d_q8ta_q8csw_accumulation(x, input_scale, input_zero_point, weights, weight_sums, weight_scales,
                                   bias=None, **params) -> tuple[np.ndarray, np.ndarray]:
    """The integer sum is exact; rounding comes from scaling it: ``|dequant(q)| conv |w s_w| + |b|``."""
    expected = conv2d_q8ta_q8csw(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, bias,
                                 **params)
    q = quantize_per_tensor(np.asarray(x), input_scale, input_zero_point).astype(np.float64)
    dequantized = np.abs(q - scalar_int(input_zero_point, "input_zero_point")) * np.float64(
        scalar_f32(input_scale, "input_scale"))
    magnitude = conv2d_q8csw(dequantized, np.abs(np.asarray(weights, np.int64)),
                             np.abs(np.asarray(weight_scales, np.float64)),
                             None if bias is None else np.abs(np.asarray(bias, np.float64)), **params)
    return expected, magnitude


def conv2d_q8ta_q8csw_q8to_float(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, bias=None,
                                 kernel_size=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                                 groups=1) -> np.ndarray:
    """The exact float64 value the ``_q8to`` ops requantize (``s_x s_w (acc - z_x ws) + b``), for oracles."""
    geometry = {"kernel_size": kernel_size, "stride": stride, "padding": padding, "dilation": dilation}
    return _q8ta_float(_codes(x), input_scale, input_zero_point, weights, weight_sums, weight_scales, bias, groups,
                       geometry)


def _codes(x) -> np.ndarray:
    q = np.asarray(x)
    if not np.issubdtype(q.dtype, np.integer):
        raise TypeError(f"x must hold int8 codes, got {q.dtype}")
    return q


def requantize_f32(y: np.ndarray, output_scale, output_zero_point) -> np.ndarray:
    """``clip(rint(f(y * f(1 / s_out))) + z_out, -128, 127)`` as int8, with ``1 / s_out`` computed in float32."""
    inv = np.float32(1.0) / scalar_f32(output_scale, "output_scale")
    with np.errstate(over="ignore", invalid="ignore"):
        z = np.rint(np.asarray(y, np.float32) * inv) + np.float32(scalar_int(output_zero_point, "output_zero_point"))
    return np.clip(z, -128, 127).astype(np.int8)


def conv2d_q8ta_q8csw_q8to(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, output_scale,
                           output_zero_point, bias=None, kernel_size=(1, 1), stride=(1, 1), padding=(0, 0),
                           dilation=(1, 1), groups=1) -> np.ndarray:
    """Reference for ``et_vk.conv2d_q8ta_q8csw_q8to`` and ``_q8to_dw``: int8 codes in, int8 codes out.

    The integer sum ``acc`` is exact; the scaling and requantization follow the shaders' float32 steps
    (module docstring): the depthwise form when ``groups == C_in`` (3-D weights), else the regular one.

    Args:
        x: int8 NCHW codes.
        input_scale, input_zero_point: the input's per-tensor qparams.
        weights: int8, 2-D ``[OC, align4(Kh*Kw*IC/groups)]`` or, depthwise, ``[Kh, Kw, align4(C)]``.
        weight_sums: int32 ``[>= OC]``; weight_scales: ``[>= OC]``.
        output_scale, output_zero_point: the output's per-tensor qparams.
        bias: optional ``[>= OC]`` float.
        kernel_size, stride, padding, dilation, groups: the convolution.

    Returns:
        int8 ``[N, OC, Ho, Wo]``.
    """
    q = _codes(x)
    geometry = {"kernel_size": kernel_size, "stride": stride, "padding": padding, "dilation": dilation}
    z = scalar_int(input_zero_point, "input_zero_point")
    acc, oc = _int_accumulate(q, z, weights, int(groups), geometry)
    sums = _per_channel(weight_sums, oc, "weight_sums", np.int64)
    scale = (_per_channel(weight_scales, oc, "weight_scales", np.float32)
             * scalar_f32(input_scale, "input_scale")).astype(np.float32)
    b = None if bias is None else _per_channel(bias, oc, "bias", np.float32)
    if np.ndim(weights) == 3:
        shifted = acc.astype(np.float32) - (sums.astype(np.float32) * np.float32(z)).astype(np.float32)
        y = (shifted * scale).astype(np.float32)
        y = y if b is None else (y + b).astype(np.float32)
    else:
        shifted = (acc - z * sums).astype(np.float32)
        y = (shifted * scale).astype(np.float32) if b is None else fma_f32(shifted, scale, b)
    return requantize_f32(y, output_scale, output_zero_point)


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``fma(a, b, c)`` of float32 operands rounded once to float32 (``a * b`` is exact in float64; the float64
    sum rounds at most once more, which changes the float32 result only on an exact float32 midpoint)."""
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)
