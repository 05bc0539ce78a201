"""Reference static-int8 elementwise ops and the float ↔ int8 boundary, by schema argument names.

ATen's semantics (``torch.ops.quantized_decomposed`` and the eager ``et_vk`` ops of ``custom_ops_lib.py``), in
float32 as they compute, so integer codes are bit-exact with them (``f32`` = round to float32, ``rint`` = round
half to even, ``clip`` to ``[quant_min, quant_max]``, int8's range unless the op takes others):

========================  ===========================================================================
op                        codes
========================  ===========================================================================
quantize_per_tensor       ``clip(rint(f32(x · f32(1 / s))) + zp, quant_min, quant_max)``
dequantize_per_tensor     ``f32((q - zp) · s)`` (in ``out_dtype``, float32 by default)
q8ta_relu                 ``quantize(max(dequantize(q, s_in, zp_in), 0), s_out, zp_out)``
q8ta_add                  ``quantize(dq(a) + alpha · dq(b), s_out, zp_out)`` (``vkdiff.reference.quantized.q8ta``)
q8ta_pixel_shuffle        ``quantize(pixel_shuffle(dq(q)), 1 / output_inv_scale, zp_out)``
========================  ===========================================================================

Scales are rounded to float32 first, as a ``float`` argument is on the device; ATen takes the reciprocal of the
double, which agrees for every float32-representable scale (a correctly rounded division in double, rounded
again to float32, is the correctly rounded float32 division).

Rounding ties (``x / s`` exactly ``k + 0.5``): ATen's ``torch.round`` rounds half to even, and so does this
reference. ET-VK's shaders call GLSL ``round()``, whose tie direction is implementation-defined (SPIR-V
``GLSLstd450Round``); naga re-emits it as ``RoundEven``, so through wgpu every driver rounds ties to even. ET-VK's
own C++ tests (``test/custom_ops/test_q8ta_*.cpp``) round with ``std::round`` (half away from zero) and divide
by the scale rather than multiplying by its reciprocal.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from vkdiff.reference.quantized import q8ta
from vkdiff.reference.tensor.indexing import pixel_shuffle as _pixel_shuffle
from vkdiff.reference.quantized.quant import dequantize_per_tensor, quantize_per_tensor, scalar_f32, scalar_int

__all__ = ["quantize_per_tensor_op", "dequantize_per_tensor_op", "q8ta_relu", "q8ta_add_op", "q8ta_pixel_shuffle"]


def quantize_per_tensor_op(input: np.ndarray, scale: float, zero_point: int, quant_min: int, quant_max: int,
                           dtype: str = "int8") -> np.ndarray:
    """``quantized_decomposed.quantize_per_tensor``: float16 is upcast to float32 first, as ATen does.

    Args:
        input: float16/float32 values.
        scale: Scale (float32 on the device).
        zero_point: Zero point.
        quant_min: Lower clamp (ET-VK's shader ignores it and clamps at -128).
        quant_max: Upper clamp (ET-VK's shader ignores it and clamps at 127).
        dtype: Code dtype name (``int8``).

    Returns:
        Codes of ``input``'s shape in ``dtype``.
    """
    return quantize_per_tensor(np.asarray(input), scale, zero_point, int(quant_min), int(quant_max),
                               np.dtype(dtype or "int8"))


def dequantize_per_tensor_op(input: np.ndarray, scale: float, zero_point: int, quant_min: int, quant_max: int,
                             dtype: str = "int8", out_dtype: Optional[str] = None) -> np.ndarray:
    """``quantized_decomposed.dequantize_per_tensor``: ``(q - zp) · s`` rounded once to float32, then to
    ``out_dtype`` (float16 only ever loses precision in that last step: ``|q - zp| <= 255`` is exact)."""
    out = dequantize_per_tensor(np.asarray(input), scale, zero_point, np.float32)
    return out.astype(np.dtype(out_dtype or np.float32))


def q8ta_relu(input: np.ndarray, input_scale: float, input_zero_point: int, output_scale: float,
              output_zero_point: int) -> np.ndarray:
    """``et_vk.q8ta_relu``: ``quantize(relu(dequantize(q)))`` in float32 (the eager op's order)."""
    x = dequantize_per_tensor(np.asarray(input), input_scale, input_zero_point, np.float32)
    return quantize_per_tensor(np.maximum(x, np.float32(0)), output_scale, output_zero_point)


def q8ta_add_op(input_a: np.ndarray, input_b: np.ndarray, input_a_scale: float, input_a_zero_point: int,
                input_b_scale: float, input_b_zero_point: int, output_scale: float, output_zero_point: int,
                alpha: float = 1.0) -> np.ndarray:
    """``et_vk.q8ta_add`` by schema names (:func:`vkdiff.reference.quantized.q8ta.q8ta_add`; ``alpha`` applied)."""
    return q8ta.q8ta_add(input_a, input_b, input_a_scale, input_a_zero_point, input_b_scale, input_b_zero_point,
                         output_scale, output_zero_point, alpha)


def q8ta_add_contractions(input_a: np.ndarray, input_b: np.ndarray, input_a_scale: float, input_a_zero_point: int,
                          input_b_scale: float, input_b_zero_point: int, output_scale: float,
                          output_zero_point: int, alpha: float = 1.0) -> dict[str, np.ndarray]:
    """:func:`q8ta_add_op` with one multiply contracted into the add, as Vulkan lets a compiler do (no
    ``NoContraction``): ``fma(a - z_a, s_a, alpha·db)``, or the multiply of the ``b`` side (``(b - z_b)·s_b``,
    or ``alpha·db``) fused with ``+ da``: one rounding fewer, the same ``alpha``. A correct device may follow
    either (NVIDIA's compiler takes the first on ``q8ta_binary.glsl``)."""
    f32, f64 = np.float32, np.float64
    a = (np.asarray(input_a, np.int32) - int(input_a_zero_point)).astype(f32)
    b = (np.asarray(input_b, np.int32) - int(input_b_zero_point)).astype(f32)
    sa, sb = f32(scalar_f32(input_a_scale, "input_a_scale")), f32(scalar_f32(input_b_scale, "input_b_scale"))
    inv = f32(1) / f32(scalar_f32(output_scale, "output_scale"))
    zp = scalar_int(output_zero_point, "output_zero_point")
    alpha32 = f32(alpha)
    da, db = (a * sa).astype(f32), (b * sb).astype(f32)
    scaled_b = db if alpha32 == 1 else (alpha32 * db).astype(f32)
    fused_b = b.astype(f64) * float(sb) if alpha32 == 1 else float(alpha32) * db.astype(f64)

    def requantize(total: np.ndarray) -> np.ndarray:
        return np.clip(np.rint(total.astype(f32) * inv) + zp, -128, 127).astype(np.int8)

    return {"fma(a)": requantize(a.astype(f64) * float(sa) + scaled_b.astype(f64)),
            "fma(b)": requantize(fused_b + da.astype(f64))}


def q8ta_pixel_shuffle(input: np.ndarray, input_scale: float, input_zero_point: int, output_inv_scale: float,
                       output_zero_point: int, upscale_factor: int) -> np.ndarray:
    """``et_vk.q8ta_pixel_shuffle``: codes moved as ``torch.pixel_shuffle`` moves them, then requantized.

    The eager op quantizes with ``scale = 1.0 / output_inv_scale`` (a double), whose reciprocal ATen takes
    again: for a float32 ``output_inv_scale`` that is ``output_inv_scale`` itself. Requantizing is
    elementwise, so the shuffle may come first; with equal qparams it is the identity.
    """
    q = np.asarray(input)
    if not np.issubdtype(q.dtype, np.integer):
        raise TypeError(f"q8ta_pixel_shuffle takes integer codes, got {q.dtype}")
    shuffled = _pixel_shuffle(q, int(upscale_factor))
    x = dequantize_per_tensor(shuffled, input_scale, input_zero_point, np.float32)
    inv = np.float32(1.0 / (1.0 / float(scalar_f32(output_inv_scale, "output_inv_scale"))))
    zp = scalar_int(output_zero_point, "output_zero_point")
    return np.clip(np.rint(x * inv) + np.float32(zp), -128, 127).astype(np.int8)
