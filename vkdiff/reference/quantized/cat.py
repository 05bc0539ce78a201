"""Reference concatenation of per-tensor quantized tensors (numpy only)."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from vkdiff.reference.quantized.quant import (
    scalar_f32,
    scalar_int,
    dequantize_per_tensor,
    quantize_per_tensor,
)

__all__ = ["quantized_cat"]


def quantized_cat(
    tensors: Sequence[np.ndarray],
    scales: Sequence[float],
    zero_points: Sequence[int],
    axis: int = 0,
    out_scale: Optional[float] = None,
    out_zero_point: Optional[int] = None,
    qmin: int = -128,
    qmax: int = 127,
    *,
    fused: bool = True,
) -> np.ndarray:
    """Concatenates quantized tensors, requantizing those with other qparams.

    Input ``i`` holds codes ``q_i`` with ``(s_i, z_i)``; the output has
    ``(s_out, z_out)`` (default: those of the first input, like ``torch.cat``
    on quantized tensors). Scales are compared after rounding to float32.
    For every input, along ``axis``::

        (s_i, z_i) == (s_out, z_out):  codes copied unchanged
        otherwise:  d = f32((q_i - z_i) * s_i)
                    q = clip(round_half_even(fma(d, f32(1 / s_out), z_out)), qmin, qmax)

    ``fused=True`` (default) is the arithmetic of ``torch.ops.quantized.cat``
    and ``torch.cat`` on quantized CPU tensors (dequantize, float cat,
    ATen ``quantize_per_tensor``, whose fbgemm kernel adds the zero point
    before rounding); ``fused=False`` rounds ``f32(d * inv)`` first and adds
    ``z_out`` after, which is what a ``quantized_decomposed`` dequantize ->
    ``aten.cat`` -> quantize graph (and ET-VK's shaders) compute. Both round
    half to even and clamp; they differ only near ties. Requantizing with
    unchanged qparams is the identity in float32 (``|q - z| <= 255``), so the
    copy is the same result as torch's requantization for normal scales.

    Args:
        tensors: Integer code arrays, equal shapes except along ``axis``.
        scales: One scale per input.
        zero_points: One integral zero point per input.
        axis: Concatenation axis (negative allowed).
        out_scale: Output scale; ``None`` uses ``scales[0]``.
        out_zero_point: Output zero point; ``None`` uses ``zero_points[0]``.
        qmin: Lower clamp bound (-128 int8, 0 uint8).
        qmax: Upper clamp bound (127 int8, 255 uint8).
        fused: Requantization rounding, see above.

    Returns:
        Codes with the dtype of ``tensors[0]``.
    """
    if not tensors or len(tensors) != len(scales) or len(tensors) != len(zero_points):
        raise ValueError("need matching, non-empty tensors / scales / zero_points")
    arrays = [np.asarray(t) for t in tensors]
    dtype = arrays[0].dtype
    if not all(np.issubdtype(a.dtype, np.integer) for a in arrays):
        raise TypeError("quantized tensors must hold integer codes")
    s_out = scalar_f32(scales[0] if out_scale is None else out_scale, "out_scale")
    z_out = scalar_int(
        zero_points[0] if out_zero_point is None else out_zero_point, "out_zero_point"
    )
    parts = []
    for a, s, z in zip(arrays, scales, zero_points):
        if scalar_f32(s, "scale") == s_out and scalar_int(z, "zero_point") == z_out:
            parts.append(a.astype(dtype))
        else:
            d = dequantize_per_tensor(a, s, z, np.float32)
            parts.append(quantize_per_tensor(d, s_out, z_out, qmin, qmax, dtype, fused=fused))
    return np.concatenate(parts, axis=axis)
