"""Pure-numpy reference oracle for ET-VK quantized ops (never imports torch)."""

from vkdiff.reference.linear import (
    dequantize_q4gsw_weight,
    linear_q4gsw,
    quantize_int4_group_symmetric,
)
from vkdiff.reference.packing import (
    pack_int4_linear,
    transpose_scales,
    unpack_int4_linear,
    untranspose_scales,
    weight_sums,
)
from vkdiff.reference.quant import (
    choose_qparams_affine,
    choose_qparams_group_symmetric,
    choose_qparams_per_token_asymmetric,
    dequantize_affine,
    int_range,
    quantize_affine,
)

__all__ = [
    "choose_qparams_affine",
    "choose_qparams_group_symmetric",
    "choose_qparams_per_token_asymmetric",
    "dequantize_affine",
    "dequantize_q4gsw_weight",
    "int_range",
    "linear_q4gsw",
    "pack_int4_linear",
    "quantize_affine",
    "quantize_int4_group_symmetric",
    "transpose_scales",
    "unpack_int4_linear",
    "untranspose_scales",
    "weight_sums",
]
