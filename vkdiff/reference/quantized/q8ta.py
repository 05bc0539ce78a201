"""Reference static-int8 ET-VK ops: ``linear_q8ta_q8csw``, ``q8ta_linear``, ``q8ta_add``.

"q8ta" = int8 activations quantized per tensor (one scale / zero point),
"q8csw" = int8 weights quantized per output channel, symmetric (zero point 0,
codes in [-127, 127] as produced by PT2E / torchao int8 weight configs).

Linears accumulate in exact integers. ``linear_q8ta_q8csw`` (float output)
applies the float scales in float64; ``q8ta_linear`` (int8 output, compared
exactly) requantizes in float32 in the shaders' order.
``q8ta_add`` is defined by float32 arithmetic (the eager op and the shader
both dequantize, add and requantize in float32), so it is evaluated in
float32, bit-exact with ``torch.ops.et_vk.q8ta_add``.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from vkdiff.reference.quantized.quant import (
    scalar_f32,
    scalar_int,
    dequantize_per_tensor,
    quantize_per_tensor,
)

__all__ = ["linear_q8ta_q8csw", "q8ta_linear", "q8ta_add"]


def _int8_linear_core(
    q: np.ndarray,
    input_scale: float,
    input_zero_point: int,
    weight: np.ndarray,
    weight_sums: np.ndarray,
    weight_scales: np.ndarray,
    bias: Optional[np.ndarray],
) -> np.ndarray:
    """``s_x * s_w[n] * (sum_k q[m,k] w[n,k] - z * ws[n]) + bias[n]`` in float64."""
    acc, n = _int8_accumulate(q, input_zero_point, weight, weight_sums, weight_scales)
    s_x = np.float64(scalar_f32(input_scale, "input_scale"))
    sw = np.asarray(weight_scales).reshape(-1)
    out = acc.astype(np.float64) * (s_x * sw[:n].astype(np.float64))  # s_x * s_w exact (two f32)
    if bias is not None:
        out += np.asarray(bias, dtype=np.float64).reshape(-1)[:n]
    return out.reshape(*q.shape[:-1], n)


def linear_q8ta_q8csw(
    x: np.ndarray,
    input_scale: float,
    input_zero_point: int,
    weight: np.ndarray,
    weight_sums: np.ndarray,
    weight_scales: np.ndarray,
    bias: Optional[np.ndarray] = None,
) -> np.ndarray:
    """Reference for ``et_vk.linear_q8ta_q8csw`` (static int8 input, float output).

    ``linear_q8ta_q8csw_tiled.glsl`` after ``quantize_and_pack_4h4w_per_tensor``.
    With ``s_x = input_scale``, ``z = input_zero_point``, int8 weight
    ``w[N, K]``, ``s_w = weight_scales``, ``ws = weight_sums``::

        q[m, k]   = clip(round_half_even(x[m, k] * (1 / s_x)) + z, -128, 127)   # float32
        out[m, n] = s_x * s_w[n] * (sum_k q[m, k] * w[n, k] - z * ws[n]) + bias[n]

    ``q`` is :func:`~vkdiff.reference.quantized.quant.quantize_per_tensor` (float32
    reciprocal-multiply, as the shader and ``quantized_decomposed`` do);
    the integer sum is exact; the scale product is exact in float64 and the
    rest is rounded in float64. With ``ws = weight.sum(1)`` this equals
    ``sum_k (q - z) * s_x * w * s_w + bias``.

    The eager CPU op ``torch.ops.et_vk.linear_q8ta_q8csw`` ignores
    ``input_scale`` / ``input_zero_point`` (it multiplies the float ``x`` by
    the dequantized weight), so it only agrees with this reference when
    ``x`` is already on the quantization grid.

    Args:
        x: float16/float32 input ``[..., K]`` (float64 is quantized in float64).
        input_scale: Per-tensor scale (rounded to float32, as on the device).
        input_zero_point: Per-tensor integral zero point.
        weight: int8 ``[N, K]``.
        weight_sums: int32 ``[N_padded]``
            (:func:`~vkdiff.reference.quantized.packing.weight_sums_per_channel`).
        weight_scales: ``[N_padded]`` per-channel scales (ET-VK pads to 4).
        bias: Optional ``[N]`` / ``[N_padded]``.

    Returns:
        float64 ``[..., N]``.
    """
    q = quantize_per_tensor(x, input_scale, input_zero_point)
    return _int8_linear_core(
        q, input_scale, input_zero_point, weight, weight_sums, weight_scales, bias
    )


def q8ta_linear(
    x: np.ndarray,
    input_scale: float,
    input_zero_point: int,
    weight: np.ndarray,
    weight_sums: np.ndarray,
    weight_scales: np.ndarray,
    output_scale: float,
    output_zero_point: int,
    bias: Optional[np.ndarray] = None,
    activation: str = "none",
) -> np.ndarray:
    """Reference for ``et_vk.q8ta_linear`` / ``q8ta_linear_gemv`` (int8 in, int8 out).

    ``x`` holds int8 codes already; every row of its leading dims is one
    output row (``q8ta_linear_gemv`` is the same op at ``M = 1``). The
    integer part is exact; the requantization is float32, in the order
    ``accumulate_out_tile_with_int_accum`` and ``quantize_and_pack``
    (``linear_fp_output_tile_int8_int8_compute.glslh``, ``common.glslh``)
    evaluate it (``f32`` = round to float32)::

        acc[m, n] = sum_k x[m, k] * w[n, k] - z * ws[n]               # integer, exact
        y[m, n]   = f32(f32(acc[m, n]) * f32(s_x * s_w[n]))           # fma(acc, s, 0): one rounding
        y         = f32(y + bias[n])                  if bias is given
        y         = max(y, 0)                         if activation == "relu"
        out[m, n] = clip(round_half_even(f32(y * f32(1 / s_out))) + z_out, -128, 127)

    ==================  ===============  =====================================
    argument            granularity      layout
    ==================  ===============  =====================================
    ``x``               per element      int8 ``[..., K]``
    ``s_x``, ``z``      per tensor       scalars (float32, int)
    ``w``               per element      int8 ``[N, K]``, codes in [-127, 127]
    ``s_w``             per channel (N)  ``[N_padded]``
    ``ws``              per channel (N)  int32 ``[N_padded]``: ``sum_k w[n, k]``
    ``bias``            per channel (N)  ``[N_padded]`` (optional)
    ``s_out, z_out``    per tensor       scalars (float32, int)
    ==================  ===============  =====================================

    ``ws`` is taken as given (the shaders read it; the eager op ignores it).
    With ``ws = w.sum(1)`` this is ``requantize(sum_k (x - z) * s_x * w * s_w
    + bias)``. The eager op (a float32 linear of dequantized values, then
    ``quantized_decomposed.quantize_per_tensor``) rounds its sums in another
    order: its codes agree except by one where ``y / s_out`` lies within that
    rounding of a ``.5`` tie; so may a device that contracts ``y * s + bias``
    into one fma. GLSL ``round`` leaves ties to the device; this rounds them
    to even.

    Args:
        x: int8 codes ``[..., K]``.
        input_scale: Input scale.
        input_zero_point: Input zero point.
        weight: int8 ``[N, K]``.
        weight_sums: int32 ``[N_padded]``.
        weight_scales: ``[N_padded]``.
        output_scale: Output scale (float32 on the device).
        output_zero_point: Output zero point.
        bias: Optional ``[N]`` / ``[N_padded]``.
        activation: ``"none"`` or ``"relu"``.

    Returns:
        int8 ``[..., N]``.

    Example::

        >>> w = np.array([[1, 2, 3, 4], [-127, 0, 0, 127]], np.int8)
        >>> x = np.array([[10, 0, -5, 2]], np.int8)  # z = 2: x - z = [8, -2, -7, 0]
        >>> # y = [-17 * 0.5 * 0.25, -1016 * 0.5 * 0.1875] = [-2.125, -95.25]; z_out = -3
        >>> q8ta_linear(x, 0.5, 2, w, w.sum(1), np.float32([0.25, 0.1875]), 1.0, -3).tolist()
        [[-5, -98]]
    """
    if activation not in ("none", "relu"):
        raise ValueError(f"activation must be 'none' or 'relu', got {activation!r}")
    q = np.asarray(x)
    if not np.issubdtype(q.dtype, np.integer):
        raise TypeError(f"x must hold integer codes, got {q.dtype}")
    acc, n = _int8_accumulate(q, input_zero_point, weight, weight_sums, weight_scales)
    scale = scalar_f32(input_scale, "input_scale") * np.asarray(weight_scales, np.float32).reshape(-1)[:n]
    y = acc.astype(np.float32) * scale
    if bias is not None:
        y = y + np.asarray(bias, np.float32).reshape(-1)[:n]
    if activation == "relu":
        y = np.maximum(y, np.float32(0))
    return quantize_per_tensor(y.reshape(*q.shape[:-1], n), output_scale, output_zero_point)


def _int8_accumulate(
    q: np.ndarray, input_zero_point: int, weight: np.ndarray, weight_sums: np.ndarray, weight_scales: np.ndarray
) -> tuple[np.ndarray, int]:
    """``(sum_k q[m, k] w[n, k] - z * ws[n]`` as int64 ``[rows, N]``, ``N)``, with the shapes checked."""
    weight = np.asarray(weight)
    if weight.ndim != 2 or not np.issubdtype(weight.dtype, np.integer):
        raise ValueError(f"weight must be 2-D integer [N, K], got {weight.dtype} {weight.shape}")
    n, k = weight.shape
    if q.shape[-1] != k:
        raise ValueError(f"input K={q.shape[-1]} != weight K={k}")
    ws = np.asarray(weight_sums).reshape(-1)
    if ws.size < n or np.size(weight_scales) < n:
        raise ValueError(f"weight_sums/scales need >= {n} entries, got {ws.size}/{np.size(weight_scales)}")
    z = scalar_int(input_zero_point, "input_zero_point")
    # |sum| <= 128 * 127 * K: exact in float64 BLAS for any realistic K.
    acc = np.rint(q.reshape(-1, k).astype(np.float64) @ weight.astype(np.float64).T).astype(np.int64)
    return acc - z * ws[:n].astype(np.int64), n


def q8ta_add(
    a: np.ndarray,
    b: np.ndarray,
    a_scale: float,
    a_zero_point: int,
    b_scale: float,
    b_zero_point: int,
    output_scale: float,
    output_zero_point: int,
    alpha: float = 1.0,
) -> np.ndarray:
    """Reference for ``et_vk.q8ta_add``: requantized ``a + alpha * b`` of int8 tensors.

    All in float32, in this order (``f32`` = round to float32)::

        da  = f32((a - z_a) * s_a);   db = f32((b - z_b) * s_b)
        sum = f32(da + f32(alpha * db))                  # alpha * db skipped if alpha == 1
        out = clip(round_half_even(f32(sum * f32(1 / s_out))) + z_out, -128, 127)

    which is bit-exact with the eager op (``quantized_decomposed``
    dequantize / add / quantize) and with ``q8ta_binary.glsl`` for
    ``alpha == 1`` up to GLSL ``round`` ties and driver fma contraction.
    Inputs broadcast like numpy (the GPU op requires equal shapes).

    ET-VK note: the shader computes ``X + Y`` and does not declare the
    ``alpha`` push constant that ``Q8taBinary.cpp`` passes, so on the GPU
    ``alpha`` is ignored; this reference follows the op schema / eager op.

    Args:
        a: int8 codes.
        b: int8 codes.
        a_scale: Scale of ``a``.
        a_zero_point: Zero point of ``a``.
        b_scale: Scale of ``b``.
        b_zero_point: Zero point of ``b``.
        output_scale: Output scale.
        output_zero_point: Output zero point.
        alpha: Multiplier of ``b``.

    Returns:
        int8 codes of the broadcast shape.
    """
    da = dequantize_per_tensor(a, a_scale, a_zero_point, np.float32)
    db = dequantize_per_tensor(b, b_scale, b_zero_point, np.float32)
    if float(alpha) != 1.0:
        db = np.float32(alpha) * db
    return quantize_per_tensor(da + db, output_scale, output_zero_point)
