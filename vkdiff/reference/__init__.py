"""Pure-numpy reference oracle for ET-VK quantized ops (never imports torch)."""

from vkdiff.reference.cat import quantized_cat
from vkdiff.reference.embedding import embedding_q4gsw
from vkdiff.reference.linear import (
    dequantize_q4gsw_weight,
    linear_dq8ca_q4gsw,
    linear_dq8ca_q4gsw_dynamic,
    linear_float64,
    linear_q4gsw,
    quantize_int4_group_symmetric,
)
from vkdiff.reference.packing import (
    pack_int4_embedding,
    pack_int4_linear,
    pack_int8_4h4w,
    quantize_and_pack_4h4w_with_group_sums,
    transpose_scales,
    unpack_int4_embedding,
    unpack_int4_linear,
    unpack_int8_4h4w,
    untranspose_scales,
    weight_sums,
    weight_sums_per_channel,
)
from vkdiff.reference.q8ta import linear_q8ta_q8csw, q8ta_add, q8ta_linear
from vkdiff.reference.quant import (
    choose_qparams_affine,
    choose_qparams_group_symmetric,
    choose_qparams_per_row_etvk,
    choose_qparams_per_token_asymmetric,
    dequantize_affine,
    dequantize_per_tensor,
    int_range,
    quantize_affine,
    quantize_per_tensor,
    quantize_per_token,
)

__all__ = [
    "choose_qparams_affine",
    "choose_qparams_group_symmetric",
    "choose_qparams_per_row_etvk",
    "choose_qparams_per_token_asymmetric",
    "dequantize_affine",
    "dequantize_per_tensor",
    "dequantize_q4gsw_weight",
    "embedding_q4gsw",
    "int_range",
    "linear_dq8ca_q4gsw",
    "linear_dq8ca_q4gsw_dynamic",
    "linear_float64",
    "linear_q4gsw",
    "linear_q8ta_q8csw",
    "pack_int4_embedding",
    "pack_int4_linear",
    "pack_int8_4h4w",
    "q8ta_add",
    "q8ta_linear",
    "quantize_affine",
    "quantize_and_pack_4h4w_with_group_sums",
    "quantize_int4_group_symmetric",
    "quantize_per_tensor",
    "quantize_per_token",
    "quantized_cat",
    "transpose_scales",
    "unpack_int4_embedding",
    "unpack_int4_linear",
    "unpack_int8_4h4w",
    "untranspose_scales",
    "weight_sums",
    "weight_sums_per_channel",
]
