"""Operator schemas: argument names and order of every op vkdiff touches, so nobody indexes arguments.

The texts are the schemas the operators register with torch, written as
``str(torch.ops.<ns>.<op>.<overload>._schema)`` prints them: ExecuTorch's
``backends/vulkan/custom_ops_lib.py`` (``et_vk``), torchao's quantization primitives
(``torchao``), ExecuTorch's LLM custom ops (``llama``) and ATen. ``tests/datamodel/
test_schemas.py`` checks every text against the registered schema of the installed
packages, so a signature change upstream fails a test instead of shifting arguments.

How ET-VK serializes a call (``VkGraphBuilder.process_call_function_node``): one value
per schema argument in schema order (keyword-only ones too; an omitted argument gets
its default), then one output value (a ``ValueList`` for a tuple return). Dtype,
layout, device and memory-format arguments are serialized as ``Null``;
``DTYPE_FROM_OUTPUT`` says which of them can be read back from the outputs' dtypes.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Sequence

SCHEMA_TEXTS: tuple[str, ...] = (
    # et_vk: ExecuTorch's Vulkan custom ops
    "et_vk::linear_q4gsw(Tensor self, Tensor weights, Tensor weight_scales, int group_size, "
    "Tensor? bias=None) -> Tensor",
    "et_vk::linear_dq8ca_q4gsw(Tensor input, Tensor input_scales, Tensor input_zp, Tensor weights, "
    "Tensor weight_sums, Tensor weight_scales, int group_size, Tensor? bias=None) -> Tensor",
    "et_vk::embedding_q4gsw(Tensor weight, Tensor weight_scales, int group_size, Tensor indices, "
    "bool is_linear_weight=False) -> Tensor",
    "et_vk::select_as_symint(Tensor x, int dim, int index) -> SymInt",
    "et_vk::rms_norm(Tensor x, Tensor weight, float eps) -> Tensor",
    "et_vk::apply_rotary_emb(Tensor xq, Tensor xk, Tensor freqs_cos, Tensor freqs_sin) -> (Tensor, Tensor)",
    "et_vk::apply_rotary_emb_hf(Tensor xq, Tensor xk, Tensor freqs_cos, Tensor freqs_sin, SymInt start_pos) -> "
    "(Tensor, Tensor)",
    "et_vk::sdpa(Tensor q, Tensor k, Tensor v, Tensor? attn_mask=None, float? scale=None) -> Tensor",
    # RoPE and per-row qparams (issue 22): RotaryEmbedding.cpp's EdgeTAM variant
    "et_vk::apply_rotary_emb_interleaved(Tensor x, Tensor freqs_cis) -> Tensor",
    "et_vk::prepack(Tensor x) -> Tensor",
    # torchao: affine quantization primitives
    "torchao::choose_qparams_affine(Tensor? input, str mapping_type, SymInt[] block_size, ScalarType target_dtype, "
    "Scalar? quant_min=None, Scalar? quant_max=None, float? eps=None, ScalarType? scale_dtype=None, "
    "ScalarType? zero_point_dtype=None, bool keepdim=False) -> (Tensor, Tensor)",
    "torchao::quantize_affine(Tensor input, SymInt[] block_size, Tensor scale, Tensor? zero_point, "
    "ScalarType output_dtype, Scalar? quant_min=None, Scalar? quant_max=None) -> Tensor",
    "torchao::dequantize_affine(Tensor input, SymInt[] block_size, Tensor scale, Tensor? zero_point, "
    "ScalarType input_dtype, Scalar? quant_min=None, Scalar? quant_max=None, ScalarType output_dtype=6) -> Tensor",
    # llama: ExecuTorch's LLM custom ops (export_llama with use_sdpa_with_kv_cache)
    "llama::sdpa_with_kv_cache(Tensor query, Tensor key, Tensor value, Tensor(a!) key_cache, "
    "Tensor(b!) value_cache, SymInt start_pos, SymInt seq_len, Tensor? attn_mask=None, float drpout_p=0., "
    "bool is_causal=False, float? scale=None) -> Tensor",
    "llama::update_cache(Tensor value, Tensor(a!) cache, SymInt start_pos) -> Tensor",
    "llama::custom_sdpa(Tensor query, Tensor key, Tensor value, SymInt start_pos, "
    "Tensor? attn_mask=None, float drpout_p=0., bool is_causal=False, float? scale=None) -> Tensor",
    # aten: the glue between fused ops
    "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
    "aten::sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
    "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor",
    "aten::div.Tensor(Tensor self, Tensor other) -> Tensor",
    "aten::div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor",
    "aten::pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor",
    "aten::minimum(Tensor self, Tensor other) -> Tensor",
    "aten::eq.Tensor(Tensor self, Tensor other) -> Tensor",
    "aten::lt.Tensor(Tensor self, Tensor other) -> Tensor",
    "aten::le.Tensor(Tensor self, Tensor other) -> Tensor",
    "aten::gt.Tensor(Tensor self, Tensor other) -> Tensor",
    "aten::ge.Tensor(Tensor self, Tensor other) -> Tensor",
    "aten::bitwise_and.Tensor(Tensor self, Tensor other) -> Tensor",
    "aten::bitwise_or.Tensor(Tensor self, Tensor other) -> Tensor",
    "aten::logical_and(Tensor self, Tensor other) -> Tensor",
    "aten::logical_not(Tensor self) -> Tensor",
    "aten::logical_or(Tensor self, Tensor other) -> Tensor",
    "aten::sigmoid(Tensor self) -> Tensor",
    "aten::silu(Tensor self) -> Tensor",
    "aten::tanh(Tensor self) -> Tensor",
    "aten::exp(Tensor self) -> Tensor",
    "aten::neg(Tensor self) -> Tensor",
    "aten::abs(Tensor self) -> Tensor",
    "aten::cos(Tensor self) -> Tensor",
    "aten::sin(Tensor self) -> Tensor",
    "aten::sqrt(Tensor self) -> Tensor",
    "aten::rsqrt(Tensor self) -> Tensor",
    "aten::log10(Tensor self) -> Tensor",
    "aten::round(Tensor self) -> Tensor",
    "aten::relu(Tensor self) -> Tensor",
    "aten::relu6(Tensor self) -> Tensor",
    "aten::hardswish(Tensor self) -> Tensor",
    "aten::hardsigmoid(Tensor self) -> Tensor",
    "aten::bitwise_not(Tensor self) -> Tensor",
    "aten::clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor",
    "aten::hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor",
    "aten::hardshrink(Tensor self, Scalar lambd=0.5) -> Tensor",
    "aten::leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor",
    'aten::gelu(Tensor self, *, str approximate="none") -> Tensor',
    "aten::view_copy(Tensor self, SymInt[] size) -> Tensor",
    "aten::_unsafe_view(Tensor self, SymInt[] size) -> Tensor",
    "aten::squeeze_copy.dims(Tensor self, int[] dim) -> Tensor",
    "aten::unsqueeze_copy(Tensor self, int dim) -> Tensor",
    "aten::clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor",
    "aten::_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
    "bool? pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None) -> Tensor",
    "aten::permute_copy(Tensor self, int[] dims) -> Tensor",
    "aten::embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, "
    "bool sparse=False) -> Tensor",
    "aten::select_copy.int(Tensor self, int dim, SymInt index) -> Tensor",
    "aten::slice_copy.Tensor(Tensor self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor",
    "aten::cat(Tensor[] tensors, int dim=0) -> Tensor",
    "aten::full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, "
    "Device? device=None, bool? pin_memory=None) -> Tensor",
    "aten::full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, "
    "Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
    "aten::arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, "
    "Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
    "aten::zeros(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
    "bool? pin_memory=None) -> Tensor",
    "aten::zeros_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
    "bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
    "aten::ones(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
    "bool? pin_memory=None) -> Tensor",
    "aten::ones_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
    "bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
    "aten::sym_size.int(Tensor self, int dim) -> SymInt",
    "aten::mm(Tensor self, Tensor mat2) -> Tensor",
    "aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
    # indexing, concat/split, where, tan and the scalar-binary ops (issue 22)
    "aten::split_with_sizes_copy(Tensor self, SymInt[] split_sizes, int dim=0) -> Tensor[]",
    "aten::gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor",
    "aten::index_select(Tensor self, int dim, Tensor index) -> Tensor",
    "aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor",
    "aten::pixel_shuffle(Tensor self, int upscale_factor) -> Tensor",
    "aten::unfold_copy(Tensor self, int dimension, int size, int step) -> Tensor",
    "aten::repeat_interleave.self_int(Tensor self, SymInt repeats, int? dim=None, *, SymInt? output_size=None) "
    "-> Tensor",
    "aten::where.self(Tensor condition, Tensor self, Tensor other) -> Tensor",
    "aten::tan(Tensor self) -> Tensor",
    "aten::pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor",
    "aten::eq.Scalar(Tensor self, Scalar other) -> Tensor",
    "aten::ne.Scalar(Tensor self, Scalar other) -> Tensor",
    "aten::lt.Scalar(Tensor self, Scalar other) -> Tensor",
    "aten::le.Scalar(Tensor self, Scalar other) -> Tensor",
    "aten::gt.Scalar(Tensor self, Scalar other) -> Tensor",
    "aten::ge.Scalar(Tensor self, Scalar other) -> Tensor",
    # view / copy / data movement, part 1 (issue 22): Permute, Clone, ToCopy, View, Squeeze, Unsqueeze, Select,
    # Slice, Expand, Repeat, Flip, Pad, ScalarTensor
    "aten::permute(Tensor(a) self, int[] dims) -> Tensor(a)",
    "aten::select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)",
    "aten::slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)",
    "aten::expand_copy(Tensor self, SymInt[] size, *, bool implicit=False) -> Tensor",
    "aten::repeat(Tensor self, SymInt[] repeats) -> Tensor",
    "aten::flip(Tensor self, int[] dims) -> Tensor",
    "aten::constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor",
    "aten::scalar_tensor(Scalar s, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
    "bool? pin_memory=None) -> Tensor",
    "dim_order_ops::_to_dim_order_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, "
    "Device? device=None, bool? pin_memory=None, bool non_blocking=False, int[]? dim_order=None) -> Tensor",
    # aten: reductions and norms (Reduce.cpp, ArgReduce.cpp, Var.cpp, Softmax.cpp, NativeLayerNorm.cpp,
    # GroupNorm.cpp, BatchNorm.cpp)
    "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
    "aten::cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor",
    "aten::mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
    "aten::amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor",
    "aten::amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor",
    "aten::argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
    "aten::argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
    "aten::var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor",
    "aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor",
    "aten::_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor",
    "aten::native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) "
    "-> (Tensor, Tensor, Tensor)",
    "aten::native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt HxW, int group, "
    "float eps) -> (Tensor, Tensor, Tensor)",
    "aten::_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, "
    "Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
    # convolution and grid ops (Convolution.cpp, GridSampler2d.cpp, GridPriors.cpp)
    "aten::convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, "
    "SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor",
    "et_vk::conv_with_clamp(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, "
    "SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups, Scalar? output_min, "
    "Scalar? output_max) -> Tensor",
    "aten::grid_sampler_2d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, "
    "bool align_corners) -> Tensor",
    "et_vk::grid_priors(Tensor self, int stride, float offset) -> Tensor",
    # matmul, pooling and upsample (issue 22: Matmul.cpp, Linear.cpp, Pool.cpp, Upsample.cpp)
    "aten::bmm(Tensor self, Tensor mat2) -> Tensor",
    "aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
    "aten::avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, "
    "bool count_include_pad=True, int? divisor_override=None) -> Tensor",
    "aten::max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, "
    "bool ceil_mode=False) -> Tensor",
    "aten::max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
    "int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)",
    "aten::upsample_nearest2d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor",
    "aten::upsample_bilinear2d.vec(Tensor input, SymInt[]? output_size, bool align_corners, "
    "float[]? scale_factors) -> Tensor",
    # static-int8 elementwise ops and the float <-> int8x4 boundary (issue 23: QuantizeDequantize.cpp, Q8taUnary.cpp,
    # Q8taBinary.cpp, Q8taPixelShuffle.cpp)
    "quantized_decomposed::quantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, "
    "int quant_max, ScalarType dtype) -> Tensor",
    "quantized_decomposed::dequantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, "
    "int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor",
    "et_vk::q8ta_add(Tensor input_a, Tensor input_b, float input_a_scale, int input_a_zero_point, "
    "float input_b_scale, int input_b_zero_point, float output_scale, int output_zero_point, float alpha) -> Tensor",
    "et_vk::q8ta_relu(Tensor input, float input_scale, int input_zero_point, float output_scale, "
    "int output_zero_point) -> Tensor",
    "et_vk::q8ta_pixel_shuffle(Tensor input, float input_scale, int input_zero_point, float output_inv_scale, "
    "int output_zero_point, int upscale_factor) -> Tensor",
    # linears with float activations and per-channel int8/int4 weights (issue 23: QuantizedLinearQCSNW.cpp,
    # QuantizedLinear.cpp, QuantizedLinearRequant.cpp)
    "aten::_weight_int8pack_mm(Tensor self, Tensor mat2, Tensor scales) -> Tensor",
    "et_vk::linear_qcs4w(Tensor self, Tensor weight, Tensor scales) -> Tensor",
    "et_vk::linear_q8ta_q8csw(Tensor x, float input_scale, int input_zero_point, Tensor weights, "
    "Tensor weight_sums, Tensor weight_scales, Tensor? bias=None) -> Tensor",
    "et_vk::q4gsw_requant(Tensor latent, Tensor scales, int group_size) -> Tensor",
    # static-int8 linears with int8x4 activations (issue 23: Q8taLinear.cpp, Q8taLinearGemv.cpp)
    *(f"et_vk::{name}(Tensor x, float input_scale, int input_zero_point, Tensor weights, Tensor weight_sums, "
      f'Tensor weight_scales, float output_scale, int output_zero_point, Tensor? bias=None, str activation="none") '
      f"-> Tensor" for name in ("q8ta_linear", "q8ta_linear_gemv")),
    # training (issue 23): AdamwStep.cpp, LinearDw.cpp, FusedCe.cpp, QuantizedLinearBackward.cpp
    "et_vk::adamw_step(Tensor(a!) param, Tensor(b!) m, Tensor(c!) v, Tensor grad, float lr, float beta1, "
    "float beta2, float eps, float weight_decay, float bias_correction1, float bias_correction2) -> "
    "(Tensor(a!), Tensor(b!), Tensor(c!))",
    "et_vk::linear_dW(Tensor d_out, Tensor x) -> Tensor",
    "et_vk::fused_ce(Tensor logits, Tensor labels, float n_valid) -> (Tensor, Tensor)",
    "et_vk::linear_q4gsw_backward(Tensor d_out, Tensor weights, Tensor weight_scales, int group_size) -> Tensor",
    # static-int8 convolutions with int8x4 activations (issue 23: Q8taConv2d*.cpp)
    *(f"et_vk::{name}(Tensor x, float input_scale, int input_zero_point, Tensor weights, Tensor weight_sums, "
      f"Tensor weight_scales, float output_scale, int output_zero_point, Tensor? bias, SymInt[] kernel_size, "
      f"SymInt[] stride, SymInt[] padding, SymInt[] dilation, SymInt groups, str activation) -> Tensor"
      for name in ("q8ta_conv2d", "q8ta_conv2d_pw", "q8ta_conv2d_dw")),
    "et_vk::q8ta_conv2d_transposed(Tensor x, float input_scale, int input_zero_point, Tensor weights, "
    "Tensor weight_sums, Tensor weight_scales, float output_scale, int output_zero_point, Tensor? bias, "
    "SymInt[] kernel_size, SymInt[] stride, SymInt[] padding, SymInt[] output_padding, SymInt[] dilation, "
    "SymInt groups, str activation) -> Tensor",
)
"""Every schema vkdiff binds, as torch prints it."""

ET_VK_RUNTIME_TEXTS: tuple[str, ...] = (
    # Q4gswLinear.cpp registers q4gsw_linear under both names; the arguments are linear_q4gsw's
    "et_vk::q4gsw_linear(Tensor self, Tensor weights, Tensor weight_scales, int group_size, "
    "Tensor? bias=None) -> Tensor",
    # convolution (Conv2dGemm.cpp, Conv1dDW.cpp, Conv1dPW.cpp)
    "et_vk::conv2d_gemm(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, "
    "SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor",
    "et_vk::conv1d_dw(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, "
    "SymInt[] dilation, SymInt groups, Scalar? output_min=None, Scalar? output_max=None) -> Tensor",
    "et_vk::conv1d_pw(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, "
    "SymInt[] dilation, SymInt groups, Scalar? output_min=None, Scalar? output_max=None) -> Tensor",
    # RoPE and per-row qparams (issue 22): ChooseQParams.cpp's choose_qparams_per_row reads (input, quant_min,
    # quant_max, input_scales, input_zps): the two outputs are arguments the caller allocates
    "etvk::choose_qparams_per_row(Tensor input, int? quant_min, int? quant_max, Tensor(a!) input_scales, "
    "Tensor(b!) input_zps) -> (Tensor(a!), Tensor(b!))",
    # QuantizedLinear.cpp's linear_q8csw reads (fp_input, weight_data, weight_scales_data, bias_data), named as
    # linear_q8ta_q8csw names them
    "et_vk::linear_q8csw(Tensor x, Tensor weights, Tensor weight_scales, Tensor? bias=None) -> Tensor",
    # QuantizedConvolution.cpp (issue 23): the argument order conv2d_q8csw / conv2d_q8ta_q8csw /
    # conv2d_q8ta_q8csw_q8to read, named as q8ta_conv2d names them (the _q8to ops are q8ta_conv2d less activation)
    "et_vk::conv2d_q8csw(Tensor x, Tensor weights, Tensor weight_scales, Tensor? bias, SymInt[] kernel_size, "
    "SymInt[] stride, SymInt[] padding, SymInt[] dilation, SymInt groups) -> Tensor",
    "et_vk::conv2d_q8ta_q8csw(Tensor x, float input_scale, int input_zero_point, Tensor weights, Tensor weight_sums, "
    "Tensor weight_scales, Tensor? bias, SymInt[] kernel_size, SymInt[] stride, SymInt[] padding, SymInt[] dilation, "
    "SymInt groups) -> Tensor",
    *(f"et_vk::{name}(Tensor x, float input_scale, int input_zero_point, Tensor weights, Tensor weight_sums, "
      f"Tensor weight_scales, float output_scale, int output_zero_point, Tensor? bias, SymInt[] kernel_size, "
      f"SymInt[] stride, SymInt[] padding, SymInt[] dilation, SymInt groups) -> Tensor"
      for name in ("conv2d_q8ta_q8csw_q8to", "conv2d_q8ta_q8csw_q8to_dw")),
    # Q8taConv2d.cpp / Q8taConv2dIm2Col.cpp (issue 23): q8ta_conv2d_general and q8ta_conv2d_im2col read
    # q8ta_conv2d's sixteen values (its fifteen arguments, then the output)
    *(f"et_vk::{name}(Tensor x, float input_scale, int input_zero_point, Tensor weights, Tensor weight_sums, "
      f"Tensor weight_scales, float output_scale, int output_zero_point, Tensor? bias, SymInt[] kernel_size, "
      f"SymInt[] stride, SymInt[] padding, SymInt[] dilation, SymInt groups, str activation) -> Tensor"
      for name in ("q8ta_conv2d_general", "q8ta_conv2d_im2col")),
)
"""Ops ET-VK's C++ registers that no Python library defines (``custom_ops_lib.py`` has none): written by vkdiff
from the argument order their C++ reads (``conv2d_gemm_op``: ``aten.convolution``'s; ``conv1d_{dw,pw}``: the
unified 10-value vector ``conv`` builds, less the output); not checked against torch."""

PYTHON_OPERATOR_TEXTS: tuple[str, ...] = (
    "_operator::add(SymInt a, SymInt b) -> SymInt",
    "_operator::sub(SymInt a, SymInt b) -> SymInt",
    "_operator::mul(SymInt a, SymInt b) -> SymInt",
    "_operator::floordiv(SymInt a, SymInt b) -> SymInt",
)
"""Python's ``operator`` functions on SymInts, which ET-VK serializes by bare name (``add``) with the node's
positional arguments; written by vkdiff in the same grammar (torch registers no schema for them)."""

DTYPE_FROM_OUTPUT: dict[str, dict[str, int]] = {
    "torchao.choose_qparams_affine.default": {"scale_dtype": 0, "zero_point_dtype": 1},
    "aten._to_copy.default": {"dtype": 0},
    "aten.arange.start_step": {"dtype": 0},
    "dim_order_ops._to_dim_order_copy.default": {"dtype": 0}, "aten.scalar_tensor.default": {"dtype": 0},
    **{f"aten.{name}.default": {"dtype": 0} for name in ("full", "full_like", "zeros", "zeros_like", "ones",
                                                           "ones_like")},
}
"""Dtype arguments serialized as ``Null`` that equal the dtype of an output (argument → output index)."""


class UnknownOpError(LookupError):
    """An operator without a schema in ``OP_SCHEMAS`` (add its text to ``SCHEMA_TEXTS``)."""


class SchemaError(ValueError):
    """A schema text, or a call bound against it, does not fit the schema grammar."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class Argument:
    """One formal argument of an operator."""

    name: str
    """Argument name (``weight_scales``)."""
    type: str
    """Type as written (``Tensor?``, ``SymInt[]``, ``ScalarType``)."""
    default: str | None = None
    """Default as written (``None``, ``False``, ``-1``), or None when required."""
    kwarg_only: bool = False
    """Declared after ``*``."""

    @property
    def mutable(self) -> bool:
        """The op writes this argument in place (``Tensor(a!)``)."""
        return "!" in self.type


@dataclasses.dataclass(kw_only=True, frozen=True)
class OpSchema:
    """A parsed schema: full op name (``et_vk.linear_q4gsw.default``), arguments, returns."""

    name: str
    """``<namespace>.<op>.<overload>`` as ET-VK's graph names operator calls."""
    arguments: tuple[Argument, ...]
    """Formal arguments in order."""
    returns: tuple[str, ...]
    """Return types (several for a tuple return)."""
    text: str
    """The schema as torch prints it."""

    @classmethod
    def parse(cls, text: str) -> "OpSchema":
        """Parse ``ns::op.overload(Type name=default, *, ...) -> Ret``.

        Example::

            >>> s = OpSchema.parse("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
            >>> s.name, [a.name for a in s.arguments], s.arguments[2].kwarg_only
            ('aten.add.Tensor', ['self', 'other', 'alpha'], True)
        """
        match = re.fullmatch(r"\s*(\w+)::(\w+)(?:\.(\w+))?\((.*)\)\s*->\s*(.+?)\s*", text, flags=re.S)
        if match is None:
            raise SchemaError(f"not an operator schema: {text!r}")
        namespace, op, overload, params, returns = match.groups()
        arguments, kwarg_only = [], False
        for part in _split_top_level(params):
            if part == "*":
                kwarg_only = True
                continue
            declaration, _, default = part.partition("=")
            type_text, _, name = declaration.strip().rpartition(" ")
            if not type_text or not name.isidentifier():
                raise SchemaError(f"cannot read argument {part!r} of {text!r}")
            arguments.append(Argument(name=name, type=type_text.strip(), default=default.strip() or None,
                                      kwarg_only=kwarg_only))
        returns = returns.strip()
        outs = tuple(_split_top_level(returns[1:-1])) if returns.startswith("(") else (returns,)
        return cls(name=f"{namespace}.{op}.{overload or 'default'}", arguments=tuple(arguments), returns=outs,
                   text=text)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.arguments)

    def argument(self, name: str) -> Argument:
        for arg in self.arguments:
            if arg.name == name:
                return arg
        raise SchemaError(f"{self.name} has no argument {name!r} (arguments: {', '.join(self.names)})")

    def bind(self, value_ids: Sequence[int]) -> dict[str, int]:
        """Serialized argument ids (outputs excluded) → ``{argument name: value id}``.

        Raises:
            SchemaError: the call carries a different number of arguments than the schema.
        """
        if len(value_ids) != len(self.arguments):
            raise SchemaError(f"{self.name} takes {len(self.arguments)} arguments ({', '.join(self.names)}), "
                              f"the call carries {len(value_ids)}")
        return dict(zip(self.names, value_ids))


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets and parentheses (``int[2] size=[0, 1]`` stays one part)."""
    parts, depth, current = [], 0, []
    for char in text:
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    tail = "".join(current).strip()
    return parts + [tail] if tail else parts


OP_SCHEMAS: dict[str, OpSchema] = {s.name: s for s in map(OpSchema.parse, SCHEMA_TEXTS + PYTHON_OPERATOR_TEXTS
                                                                     + ET_VK_RUNTIME_TEXTS)}
"""Parsed schemas by full op name."""

def _aliases(full_names) -> dict[str, str]:
    """Names ET-VK writes without a namespace: ``node.target.__name__`` of a custom op
    (``sdpa_with_kv_cache.default``) or of ``aten.sym_size`` (``sym_size.int``), and Python operators (``add``)."""
    aliases: dict[str, str] = {}
    for full in full_names:
        namespace, _, short = full.partition(".")
        aliases.setdefault(short, full)
        if namespace == "_operator":
            aliases[short.rsplit(".", 1)[0]] = full
    return aliases


_ALIASES = _aliases(OP_SCHEMAS)


def schema_of(op: str) -> OpSchema:
    """The schema of ``op`` as ET-VK names the call (``et_vk.linear_q4gsw.default``, ``sdpa_with_kv_cache.default``).

    Raises:
        UnknownOpError: no schema is declared for it.
    """
    try:
        return OP_SCHEMAS[op] if op in OP_SCHEMAS else OP_SCHEMAS[_ALIASES[op]]
    except KeyError:
        raise UnknownOpError(f"no schema for operator {op}: add its text to SCHEMA_TEXTS in "
                             f"vkdiff/datamodel/schemas.py") from None
