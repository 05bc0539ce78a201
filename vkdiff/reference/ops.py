"""Every op in scope by its full name, taking its schema's arguments by name.

The one table the reference interpreter walks a delegate with and the kernel runner
computes expected outputs with. Arguments arrive as the schema names them
(``vkdiff.datamodel.schemas``): tensors as numpy arrays, scalars and lists as
Python values, absent optionals as None, dtypes as numpy dtype names. A tuple return
is a tuple of arrays.

An op whose output is a reduction may also register ``accumulation``: the output and
the sum of absolute terms of each output element (``|x| @ |w|.T`` for a linear), which
the tolerance policy scales its accumulation bound by. Computed together, the
dequantized weight is built once. One whose float16 kernels round in a known order may
register ``emulation``: the output as an accumulator of a given dtype, split over lanes,
with fused or separate ``fma``, would give it (``vkdiff.reference.arithmetic``).

Example::

    >>> import numpy as np
    >>> evaluate("aten.add.Tensor", {"self": np.ones(2), "other": np.ones(2), "alpha": 2})
    array([3., 3.])
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional

import numpy as np

from vkdiff.reference.tensor import aten, llm
from vkdiff.reference.arithmetic import linear_dq8ca_q4gsw_as, linear_q4gsw_as
from vkdiff.reference.quantized.embedding import embedding_q4gsw
from vkdiff.reference.quantized.linear import dequantize_q4gsw_weight, linear_dq8ca_q4gsw, linear_float64
from vkdiff.reference.quantized.quant import choose_qparams_affine

__all__ = ["OPS", "ReferenceOp", "UnsupportedOpError", "emulate", "evaluate", "evaluate_with_magnitude",
           "reference_op"]


class UnsupportedOpError(NotImplementedError):
    """No reference is registered for an op (→ ``NOT_RUN`` for the numerics that need it)."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class ReferenceOp:
    """The numpy semantics of one op."""

    name: str
    """Full op name (``et_vk.linear_q4gsw.default``)."""
    fn: Callable[..., Any]
    """Output(s) from the schema's arguments by name."""
    accumulation: Optional[Callable[..., tuple[np.ndarray, np.ndarray]]] = None
    """``(output, magnitude)`` for reductions (tuples of them for ops returning tuples), else None."""
    emulation: Optional[Callable[..., tuple[np.ndarray, np.ndarray]]] = None
    """``(output, scale)`` with a kernel's rounding: the schema's arguments plus ``accumulate``, ``lanes`` and
    ``fused`` keywords; scale is the largest partial sum per element. None: no emulation."""
    contractions: Optional[Callable[..., dict[str, np.ndarray]]] = None
    """Integer outputs a correct device may give instead (a multiply contracted into an add, which Vulkan allows),
    by model name: an output equal to one of them *entirely* passes. None: only the reference's own."""


OPS: dict[str, ReferenceOp] = {}
"""Reference ops by full op name."""


def reference_op(*names: str, accumulation: Optional[Callable[..., tuple[np.ndarray, np.ndarray]]] = None,
                 emulation: Optional[Callable[..., tuple[np.ndarray, np.ndarray]]] = None,
                 contractions: Optional[Callable[..., dict[str, np.ndarray]]] = None):
    """Register the decorated function as the reference of ``names``."""
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        for name in names:
            OPS[name] = ReferenceOp(name=name, fn=fn, accumulation=accumulation, emulation=emulation,
                                    contractions=contractions)
        return fn
    return wrap


def _lookup(name: str) -> ReferenceOp:
    if name not in OPS:
        raise UnsupportedOpError(f"no reference for {name}")
    return OPS[name]


IEEE = {"over": "ignore", "invalid": "ignore", "divide": "ignore"}
"""A reference computes IEEE results (inf past the range, NaN from inf - inf): numpy's warnings about them are no news
on special-value cases."""


def evaluate(name: str, args: Mapping[str, Any]) -> Any:
    """The reference output(s) of op ``name`` on ``args`` (schema names).

    Raises:
        UnsupportedOpError: no reference is registered for ``name``.
    """
    with np.errstate(**IEEE):
        return _lookup(name).fn(**args)


def evaluate_with_magnitude(name: str, args: Mapping[str, Any]) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """``(output, magnitude)``; the magnitude is None for ops that are not reductions."""
    op = _lookup(name)
    with np.errstate(**IEEE):
        return (op.fn(**args), None) if op.accumulation is None else op.accumulation(**args)


def contracted(name: str, args: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The outputs a correct device may give instead of the reference's (``ReferenceOp.contractions``), or none."""
    op = _lookup(name)
    return {} if op.contractions is None else op.contractions(**args)


def emulate(name: str, args: Mapping[str, Any], *, accumulate: str, lanes: int, fused: bool,
            weight_only: bool = False) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """``(value, slack)`` of op ``name`` with a kernel's rounding (``weight_only``: a quantized-activation linear
    computed on its float input), or None when the op registers no emulation."""
    op = _lookup(name)
    if op.emulation is None:
        return None
    extra = {"weight_only": True} if weight_only else {}
    return op.emulation(**args, accumulate=accumulate, lanes=lanes, fused=fused, **extra)


def _linear_q4gsw_emulation(self, weights, weight_scales, group_size, bias=None, **arithmetic):
    return linear_q4gsw_as(self, weights, weight_scales, group_size, bias, **arithmetic)


def _linear_dq8ca_q4gsw_emulation(input, input_scales, input_zp, weights, weight_sums, weight_scales, group_size,
                                  bias=None, weight_only=False, **arithmetic):
    if weight_only:
        return linear_q4gsw_as(input, weights, weight_scales, group_size, bias, **arithmetic)
    return linear_dq8ca_q4gsw_as(input, input_scales, input_zp, weights, weight_sums, weight_scales, group_size,
                                 bias, **arithmetic)


def _linear_q4gsw_accumulation(self, weights, weight_scales, group_size, bias=None):
    weight = dequantize_q4gsw_weight(weights, weight_scales, group_size, np.shape(self)[-1])
    expected = linear_float64(self, weight, bias)
    magnitude = linear_float64(np.abs(self), np.abs(weight, out=weight), None if bias is None else np.abs(bias))
    return expected, magnitude


@reference_op("et_vk.linear_q4gsw.default", "et_vk.q4gsw_linear.default", accumulation=_linear_q4gsw_accumulation,
              emulation=_linear_q4gsw_emulation)
def _linear_q4gsw(self, weights, weight_scales, group_size, bias=None):
    weight = dequantize_q4gsw_weight(weights, weight_scales, group_size, np.shape(self)[-1])
    return linear_float64(self, weight, bias)


def _linear_dq8ca_q4gsw_accumulation(input, input_scales, input_zp, weights, weight_sums, weight_scales, group_size,
                                     bias=None):
    """The integer dot products are exact; rounding comes from scaling and summing groups: ``|x| @ |W|.T``."""
    expected = linear_dq8ca_q4gsw(input, input_scales, input_zp, weights, weight_sums, weight_scales, group_size, bias)
    weight = dequantize_q4gsw_weight(weights, weight_scales, group_size, np.shape(input)[-1])
    magnitude = linear_float64(np.abs(input), np.abs(weight, out=weight), None if bias is None else np.abs(bias))
    return expected, magnitude.reshape(np.shape(expected))


@reference_op("et_vk.linear_dq8ca_q4gsw.default", accumulation=_linear_dq8ca_q4gsw_accumulation,
              emulation=_linear_dq8ca_q4gsw_emulation)
def _linear_dq8ca_q4gsw(input, input_scales, input_zp, weights, weight_sums, weight_scales, group_size, bias=None):
    return linear_dq8ca_q4gsw(input, input_scales, input_zp, weights, weight_sums, weight_scales, group_size, bias)


@reference_op("et_vk.embedding_q4gsw.default")
def _embedding_q4gsw(weight, weight_scales, group_size, indices, is_linear_weight=False):
    return embedding_q4gsw(np.asarray(indices).astype(np.int64), weight, weight_scales, group_size,
                           bool(is_linear_weight))


@reference_op("torchao.choose_qparams_affine.default")
def _choose_qparams_affine(input, mapping_type, block_size, target_dtype=None, quant_min=None, quant_max=None,
                           eps=None, scale_dtype=None, zero_point_dtype=None, keepdim=False):
    """torchao quantizes float32 activations: the interpreter's float64 values are taken back to float32."""
    x = np.asarray(input)
    x = x.astype(np.float32) if x.dtype == np.float64 else x
    return choose_qparams_affine(x, [int(b) for b in block_size], int(quant_min), int(quant_max),
                                 mapping=str(mapping_type).lower(), eps=eps, scale_dtype=scale_dtype,
                                 zero_point_dtype=zero_point_dtype, keepdim=bool(keepdim))


ATEN: dict[str, Callable[..., Any]] = {
    "aten.add.Tensor": aten.add, "aten.sub.Tensor": aten.sub, "aten.mul.Tensor": aten.mul, "aten.div.Tensor": aten.div,
    "aten.div.Tensor_mode": aten.div_mode, "aten.pow.Tensor_Tensor": aten.pow_, "aten.minimum.default": aten.minimum,
    **{f"aten.{name}.Tensor": getattr(aten, name) for name in ("eq", "lt", "le", "gt", "ge", "bitwise_and",
                                                                 "bitwise_or")},
    "aten.logical_and.default": aten.logical_and, "aten.logical_or.default": aten.logical_or,
    "aten.logical_not.default": aten.logical_not,
    **{f"aten.{name}.default": getattr(aten, name) for name in (
        "sigmoid", "silu", "tanh", "exp", "neg", "cos", "sin", "sqrt", "rsqrt", "log10", "clamp", "relu", "relu6",
        "hardtanh", "hardswish", "hardsigmoid", "hardshrink", "leaky_relu", "gelu", "bitwise_not", "full",
        "full_like", "zeros", "zeros_like", "ones", "ones_like", "unsqueeze_copy", "permute_copy")},
    "aten.round.default": aten.round_, "aten.abs.default": aten.abs_, "aten.arange.start_step": aten.arange,
    "aten.squeeze_copy.dims": aten.squeeze_copy,
}
"""ATen ops whose reference is one ``vkdiff.reference.tensor.aten`` function, registered by full op name."""
for _op, _fn in ATEN.items():
    reference_op(_op)(_fn)
reference_op("aten.view_copy.default", "aten._unsafe_view.default")(aten.view_copy)


@reference_op("aten.clone.default")
def _clone(self, memory_format=None):
    return np.array(self)


@reference_op("aten._to_copy.default")
def _to_copy(self, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    return aten.to_copy(self, dtype)


reference_op("et_vk.rms_norm.default")(llm.rms_norm)
reference_op("et_vk.apply_rotary_emb.default", accumulation=llm.apply_rotary_emb_accumulation)(llm.apply_rotary_emb)
reference_op("et_vk.apply_rotary_emb_hf.default", accumulation=llm.apply_rotary_emb_hf_accumulation)(
    llm.apply_rotary_emb_hf)
reference_op("llama.sdpa_with_kv_cache.default")(llm.sdpa_with_kv_cache)
reference_op("aten.embedding.default")(llm.embedding)
reference_op("aten.slice_copy.Tensor")(llm.slice_copy)
reference_op("aten.select_copy.int")(llm.select_copy)
reference_op("et_vk.select_as_symint.default")(llm.select_as_symint)


@reference_op("et_vk.prepack.default")
def _prepack(x):
    """Moves a constant to the device: the value is unchanged."""
    return np.array(x, np.float64) if np.asarray(x).dtype.kind == "f" else np.array(x)


@reference_op("aten.sym_size.int")
def _sym_size(self, dim):
    return int(np.shape(self)[int(dim)])


reference_op("_operator.add.default")(lambda a, b: int(a) + int(b))
reference_op("_operator.sub.default")(lambda a, b: int(a) - int(b))
reference_op("_operator.mul.default")(lambda a, b: int(a) * int(b))
reference_op("_operator.floordiv.default")(lambda a, b: int(a) // int(b))


# Reductions and norms (Reduce.cpp, ArgReduce.cpp, Var.cpp, Softmax.cpp, NativeLayerNorm.cpp, GroupNorm.cpp,
# BatchNorm.cpp): vkdiff.reference.tensor.reduce and vkdiff.reference.tensor.norm.
from vkdiff.reference.tensor import norm as _norm, reduce as _reduce  # noqa: E402

reference_op("aten.sum.dim_IntList", accumulation=_reduce.sum_accumulation)(_reduce.sum_)
reference_op("aten.cumsum.default")(_reduce.cumsum)
reference_op("aten.mean.dim", accumulation=_reduce.mean_accumulation)(_reduce.mean)
reference_op("aten.amax.default")(_reduce.amax)
reference_op("aten.amin.default")(_reduce.amin)
reference_op("aten.argmax.default")(_reduce.argmax)
reference_op("aten.argmin.default")(_reduce.argmin)
reference_op("aten.var.dim", accumulation=_reduce.var_accumulation)(_reduce.var)
reference_op("aten._softmax.default", accumulation=_reduce.softmax_accumulation)(_reduce.softmax)
reference_op("aten._log_softmax.default", accumulation=_reduce.log_softmax_accumulation)(_reduce.log_softmax)
reference_op("aten.native_layer_norm.default", accumulation=_norm.layer_norm_accumulation)(_norm.layer_norm)
reference_op("aten.native_group_norm.default", accumulation=_norm.group_norm_accumulation)(_norm.group_norm)
reference_op("aten._native_batch_norm_legit_no_training.default", accumulation=_norm.batch_norm_accumulation)(
    _norm.native_batch_norm_no_training)


# Convolution and grid ops (Convolution.cpp, Conv2dGemm.cpp, Conv1dDW.cpp, Conv1dPW.cpp, GridSampler2d.cpp,
# GridPriors.cpp): conv outputs accumulate sum |x||w| terms, so their tolerance scales with that magnitude.
from vkdiff.reference.tensor import conv as _conv, grid as _grid  # noqa: E402


def _convolution_accumulation(input, weight, bias=None, stride=(1,), padding=(0,), dilation=(1,), transposed=False,
                              output_padding=(0,), groups=1, output_min=None, output_max=None):
    params = dict(stride=stride, padding=padding, dilation=dilation, transposed=transposed,
                  output_padding=output_padding, groups=groups)
    expected = _conv.clamp_optional(_conv.convolution(input, weight, bias, **params), output_min, output_max)
    return expected, _conv.convolution_magnitude(input, weight, bias, **params)


def _conv1d_et_vk(input, weight, bias=None, stride=(1,), padding=(0,), dilation=(1,), groups=1, output_min=None,
                  output_max=None):
    """``et_vk.conv1d_{pw,dw}`` take ``aten.convolution``'s arguments less ``transposed`` and ``output_padding``."""
    return _conv.conv_with_clamp(input, weight, bias, stride, padding, dilation, False, (0,), groups, output_min,
                                 output_max)


def _conv1d_et_vk_accumulation(input, weight, bias=None, stride=(1,), padding=(0,), dilation=(1,), groups=1,
                               output_min=None, output_max=None):
    return _convolution_accumulation(input, weight, bias, stride, padding, dilation, False, (0,), groups,
                                     output_min, output_max)


reference_op("aten.convolution.default", "et_vk.conv2d_gemm.default",
             accumulation=_convolution_accumulation)(_conv.convolution)
reference_op("et_vk.conv_with_clamp.default", accumulation=_convolution_accumulation)(_conv.conv_with_clamp)
reference_op("et_vk.conv1d_dw.default", "et_vk.conv1d_pw.default",
             accumulation=_conv1d_et_vk_accumulation)(_conv1d_et_vk)
reference_op("aten.grid_sampler_2d.default")(_grid.grid_sampler_2d)
reference_op("et_vk.grid_priors.default")(_grid.grid_priors)


# matmul, pooling and upsample (Matmul.cpp, Linear.cpp, Pool.cpp, Upsample.cpp)
from vkdiff.reference.tensor import matmul as _matmul, pool as _pool  # noqa: E402

reference_op("aten.mm.default", accumulation=_matmul.mm_accumulation)(_matmul.mm)
reference_op("aten.bmm.default", accumulation=_matmul.mm_accumulation)(_matmul.bmm)
reference_op("aten.addmm.default", accumulation=_matmul.addmm_accumulation)(_matmul.addmm)
reference_op("aten.linear.default", accumulation=_matmul.linear_accumulation)(_matmul.linear)
reference_op("aten.avg_pool2d.default")(_pool.avg_pool2d)
reference_op("aten.max_pool2d.default")(_pool.max_pool2d)
reference_op("aten.max_pool2d_with_indices.default")(_pool.max_pool2d_with_indices)
reference_op("aten.upsample_nearest2d.vec")(_pool.upsample_nearest2d)
reference_op("aten.upsample_bilinear2d.vec")(_pool.upsample_bilinear2d)


# indexing, concat/split, where, tan and the scalar-binary ops (issue 22)
from vkdiff.reference.tensor import indexing  # noqa: E402

for _op, _fn in {"aten.cat.default": indexing.cat, "aten.split_with_sizes_copy.default": indexing.split_with_sizes_copy,
                 "aten.gather.default": indexing.gather, "aten.index_select.default": indexing.index_select,
                 "aten.index.Tensor": indexing.index_tensor, "aten.pixel_shuffle.default": indexing.pixel_shuffle,
                 "aten.unfold_copy.default": indexing.unfold_copy,
                 "aten.repeat_interleave.self_int": indexing.repeat_interleave, "aten.where.self": indexing.where,
                 "aten.tan.default": indexing.tan, "aten.pow.Tensor_Scalar": indexing.pow_scalar,
                 **{f"aten.{name}.Scalar": indexing.compare_scalar(fn) for name, fn in (
                     ("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                     ("gt", np.greater), ("ge", np.greater_equal))}}.items():
    reference_op(_op)(_fn)


# view / copy / data movement, part 1 (issue 22): Permute, Clone, ToCopy, View, Squeeze, Unsqueeze, Select, Slice,
# Expand, Repeat, Flip, Pad, ScalarTensor
from vkdiff.reference.tensor import movement  # noqa: E402

for _op, _fn in {"aten.permute.default": aten.permute_copy, "aten.select.int": llm.select_copy,
                 "aten.slice.Tensor": llm.slice_copy, "aten.expand_copy.default": movement.expand_copy,
                 "aten.repeat.default": movement.repeat, "aten.flip.default": movement.flip,
                 "aten.constant_pad_nd.default": movement.constant_pad_nd,
                 "aten.scalar_tensor.default": movement.scalar_tensor,
                 "dim_order_ops._to_dim_order_copy.default": movement.to_dim_order_copy}.items():
    reference_op(_op)(_fn)

EXACT_OPS = frozenset({
    "aten.permute.default", "aten.permute_copy.default", "aten.clone.default", "aten._to_copy.default",
    "dim_order_ops._to_dim_order_copy.default", "aten.squeeze_copy.dims", "aten.unsqueeze_copy.default",
    "aten.select.int", "aten.slice.Tensor", "aten.expand_copy.default", "aten.repeat.default", "aten.flip.default",
    "aten.constant_pad_nd.default", "aten.scalar_tensor.default"})
"""Ops that move or convert values without arithmetic: their outputs must equal the reference bit for bit
(signed zeros and subnormals included; a conversion rounds once, to nearest even, as ATen does)."""


# RoPE and per-row qparams (issue 22): et_vk.apply_rotary_emb_interleaved, etvk.choose_qparams_per_row
from vkdiff.reference.quantized.quant import choose_qparams_per_row  # noqa: E402

reference_op("et_vk.apply_rotary_emb_interleaved.default", accumulation=llm.apply_rotary_emb_interleaved_accumulation)(
    llm.apply_rotary_emb_interleaved)
reference_op("etvk.choose_qparams_per_row.default")(choose_qparams_per_row)


# SDPA without a KV cache (SDPA.cpp: llama.custom_sdpa, et_vk.sdpa) and update_cache's in-place write: issue 22.
reference_op("llama.custom_sdpa.default", accumulation=llm.custom_sdpa_accumulation)(llm.custom_sdpa)
reference_op("et_vk.sdpa.default", accumulation=llm.fused_sdpa_accumulation)(llm.fused_sdpa)
reference_op("llama.update_cache.default")(llm.update_cache)


# Linears with float activations at the op boundary and per-channel int8/int4 weights (issue 23):
# QuantizedLinearQCSNW.cpp, QuantizedLinear.cpp's q8csw/q8ta_q8csw, QuantizedLinearRequant.cpp.
from vkdiff.reference.quantized import linear as _linear, q8ta as _q8ta  # noqa: E402
from vkdiff.reference.quantized.packing import unpack_int4_embedding as _unpack_qcs4w  # noqa: E402
from vkdiff.reference.quantized.quant import quantize_per_tensor as _quantize_per_tensor  # noqa: E402


def _with_magnitude(x: np.ndarray, weight: np.ndarray, bias: Optional[np.ndarray] = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``(x @ w.T + bias, |x| @ |w|.T + |bias|)`` in float64."""
    expected = linear_float64(x, weight, bias)
    magnitude = linear_float64(np.abs(x), np.abs(weight), None if bias is None else np.abs(bias))
    return expected, magnitude


def _weight_int8pack_mm_accumulation(self, mat2, scales):
    return _with_magnitude(np.asarray(self), _linear.dequantize_per_channel_weight(mat2, scales))


def _linear_qcs4w_accumulation(self, weight, scales):
    return _with_magnitude(np.asarray(self), _linear.dequantize_per_channel_weight(_unpack_qcs4w(weight), scales))


def _linear_q8csw_accumulation(x, weights, weight_scales, bias=None):
    return _with_magnitude(np.asarray(x), _linear.dequantize_per_channel_weight(weights, weight_scales), bias)


def _linear_q8ta_q8csw(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, bias=None):
    """The schema names the weight ``weights``; ``vkdiff.reference.quantized.q8ta`` takes it positionally."""
    return _q8ta.linear_q8ta_q8csw(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, bias)


def _linear_q8ta_q8csw_accumulation(x, input_scale, input_zero_point, weights, weight_sums, weight_scales,
                                    bias=None):
    """The integer sums are exact; rounding comes from scaling them: ``|dequant(q(x))| @ |W|.T + |bias|``."""
    expected = _linear_q8ta_q8csw(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, bias)
    q = _quantize_per_tensor(x, input_scale, input_zero_point).astype(np.float64)
    x_dq = np.abs(q - float(input_zero_point)) * float(np.float32(input_scale))
    weight = np.abs(_linear.dequantize_per_channel_weight(weights, weight_scales))
    return expected, linear_float64(x_dq, weight, None if bias is None else np.abs(bias))


reference_op("aten._weight_int8pack_mm.default", accumulation=_weight_int8pack_mm_accumulation)(
    _linear.weight_int8pack_mm)
reference_op("et_vk.linear_qcs4w.default", accumulation=_linear_qcs4w_accumulation)(_linear.linear_qcs4w)
reference_op("et_vk.linear_q8csw.default", accumulation=_linear_q8csw_accumulation)(_linear.linear_q8csw)
reference_op("et_vk.linear_q8ta_q8csw.default", accumulation=_linear_q8ta_q8csw_accumulation)(_linear_q8ta_q8csw)
reference_op("et_vk.q4gsw_requant.default")(_linear.q4gsw_requant)


# Static-int8 linears with int8x4 activations (issue 23: Q8taLinear.cpp, Q8taLinearGemv.cpp): int8 in, int8 out,
# requantized in float32 as the shaders do, so the codes are compared exactly.
from vkdiff.reference.quantized import q8ta as _q8ta  # noqa: E402


def _q8ta_linear(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, output_scale,
                 output_zero_point, bias=None, activation="none"):
    """The schema names the weight ``weights``; ``vkdiff.reference.quantized.q8ta`` takes it positionally."""
    return _q8ta.q8ta_linear(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, output_scale,
                             output_zero_point, bias, activation)


reference_op("et_vk.q8ta_linear.default", "et_vk.q8ta_linear_gemv.default")(_q8ta_linear)


# static-int8 elementwise ops and the float <-> int8x4 boundary (issue 23): QuantizeDequantize.cpp, Q8taUnary.cpp,
# Q8taBinary.cpp, Q8taPixelShuffle.cpp
from vkdiff.reference.quantized import q8ta_elementwise as _q8e  # noqa: E402

reference_op("quantized_decomposed.quantize_per_tensor.default")(_q8e.quantize_per_tensor_op)
reference_op("quantized_decomposed.dequantize_per_tensor.default")(_q8e.dequantize_per_tensor_op)
reference_op("et_vk.q8ta_relu.default")(_q8e.q8ta_relu)
reference_op("et_vk.q8ta_add.default", contractions=_q8e.q8ta_add_contractions)(_q8e.q8ta_add_op)
reference_op("et_vk.q8ta_pixel_shuffle.default")(_q8e.q8ta_pixel_shuffle)


# Training (issue 23): AdamwStep.cpp, LinearDw.cpp, FusedCe.cpp, QuantizedLinearBackward.cpp
from vkdiff.reference.tensor import training  # noqa: E402

reference_op("et_vk.adamw_step.default", accumulation=training.adamw_step_accumulation)(training.adamw_step)
reference_op("et_vk.linear_dW.default", accumulation=training.linear_dW_accumulation)(training.linear_dW)
reference_op("et_vk.fused_ce.default", accumulation=training.fused_ce_accumulation)(training.fused_ce)
reference_op("et_vk.linear_q4gsw_backward.default", accumulation=training.linear_q4gsw_backward_accumulation)(
    training.linear_q4gsw_backward)


# Quantized 2-D convolutions (issue 23): QuantizedConvolution.cpp.
from vkdiff.reference.quantized import quantized_conv  # noqa: E402

reference_op("et_vk.conv2d_q8csw.default", accumulation=quantized_conv.conv2d_q8csw_accumulation)(
    quantized_conv.conv2d_q8csw)
reference_op("et_vk.conv2d_q8ta_q8csw.default", accumulation=quantized_conv.conv2d_q8ta_q8csw_accumulation)(
    quantized_conv.conv2d_q8ta_q8csw)
reference_op("et_vk.conv2d_q8ta_q8csw_q8to.default", "et_vk.conv2d_q8ta_q8csw_q8to_dw.default")(
    quantized_conv.conv2d_q8ta_q8csw_q8to)


# Static-int8 convolutions with int8x4 activations (issue 23): Q8taConv2d*.cpp; int8 codes compared exactly.
from vkdiff.reference.quantized import q8ta_conv as _q8ta_conv  # noqa: E402

for _op in ("q8ta_conv2d", "q8ta_conv2d_general", "q8ta_conv2d_im2col", "q8ta_conv2d_pw", "q8ta_conv2d_dw",
            "q8ta_conv2d_transposed"):
    reference_op(f"et_vk.{_op}.default")(getattr(_q8ta_conv, _op))
