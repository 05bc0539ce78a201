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

from vkdiff.reference import aten, llm
from vkdiff.reference.arithmetic import linear_dq8ca_q4gsw_as, linear_q4gsw_as
from vkdiff.reference.embedding import embedding_q4gsw
from vkdiff.reference.linear import dequantize_q4gsw_weight, linear_dq8ca_q4gsw, linear_float64
from vkdiff.reference.quant import choose_qparams_affine

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


OPS: dict[str, ReferenceOp] = {}
"""Reference ops by full op name."""


def reference_op(*names: str, accumulation: Optional[Callable[..., tuple[np.ndarray, np.ndarray]]] = None,
                 emulation: Optional[Callable[..., tuple[np.ndarray, np.ndarray]]] = None):
    """Register the decorated function as the reference of ``names``."""
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        for name in names:
            OPS[name] = ReferenceOp(name=name, fn=fn, accumulation=accumulation, emulation=emulation)
        return fn
    return wrap


def _lookup(name: str) -> ReferenceOp:
    if name not in OPS:
        raise UnsupportedOpError(f"no reference for {name}")
    return OPS[name]


def evaluate(name: str, args: Mapping[str, Any]) -> Any:
    """The reference output(s) of op ``name`` on ``args`` (schema names).

    Raises:
        UnsupportedOpError: no reference is registered for ``name``.
    """
    return _lookup(name).fn(**args)


def evaluate_with_magnitude(name: str, args: Mapping[str, Any]) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """``(output, magnitude)``; the magnitude is None for ops that are not reductions."""
    op = _lookup(name)
    if op.accumulation is None:
        return op.fn(**args), None
    return op.accumulation(**args)


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


@reference_op("et_vk.linear_q4gsw.default", accumulation=_linear_q4gsw_accumulation,
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
    **{f"aten.{name}.default": getattr(aten, name) for name in (
        "sigmoid", "silu", "tanh", "exp", "neg", "cos", "sin", "sqrt", "rsqrt", "log10", "clamp", "relu", "relu6",
        "hardtanh", "hardswish", "hardsigmoid", "hardshrink", "leaky_relu", "gelu", "bitwise_not", "full",
        "full_like", "zeros", "zeros_like", "ones", "ones_like", "unsqueeze_copy", "permute_copy")},
    "aten.round.default": aten.round_, "aten.abs.default": aten.abs_, "aten.arange.start_step": aten.arange,
    "aten.squeeze_copy.dims": aten.squeeze_copy,
}
"""ATen ops whose reference is one ``vkdiff.reference.aten`` function, registered by full op name."""
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
