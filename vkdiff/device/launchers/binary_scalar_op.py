"""Launchers for every op ``BinaryScalarOp.cpp`` registers: ``aten.pow.Tensor_Scalar`` and the comparisons
``aten.{eq,ne,lt,le,gt,ge}.Scalar``, through ET-VK's ``<op>_scalar_*`` shaders.

Ported from ``runtime/graph/ops/impl/BinaryScalarOp.cpp`` (``add_binary_scalar_op_node``,
``resolve_scalar_extract_dtype``, ``extract_int32_scalar``, ``resize_binary_scalar_op_node``):

* a constant ``self`` is prepacked like the output (``prepack_standard_like``), a tensor is used as is;
* the scalar's dtype (``resolve_scalar_extract_dtype``): float for float and half tensors; for other
  tensors int when the scalar is a bool or SymInt, else the scalar's own dtype (a Python int is int,
  a float is float);
* variant ``<op>_scalar_<out storage>_<dtype of self>_<scalar dtype>`` (``eq_scalar_texture3d_half_float``,
  ``lt_scalar_buffer_int32_int32``); comparisons write ``uint8`` (bool) outputs;
* bindings out, self, then ``meta_ubo`` of out and self; one push constant: the scalar as ``float`` or
  ``int32`` (``safe_downcast``: an int out of int32 range is refused; a bool is 0 or 1), fixed at build;
* no spec constants; ``DynamicDispatchNode`` with the default global and local sizes;
* output sizes are the input's (``resize_binary_scalar_op_node``).
"""

from __future__ import annotations

import struct
from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph, SymInt, TensorRef
from vkdiff.device.graph.staging import SUFFIX, prepack_standard
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

PORTS = (Port(file="runtime/graph/ops/impl/BinaryScalarOp.cpp",
              functions=("add_binary_scalar_op_node", "resolve_scalar_extract_dtype", "extract_int32_scalar",
                         "resize_binary_scalar_op_node"),
              sha256="1a8f32f17e84df79798354919e399e465659da5a3c810c59c65f3b8a4a7fff80",
              tree="executorch main cff6f4dd32"),)

OPS = {"aten.pow.Tensor_Scalar": "pow", **{f"aten.{name}.Scalar": name for name in ("eq", "ne", "lt", "le", "gt", "ge")}}
"""``VK_REGISTER_OP`` of ``BinaryScalarOp.cpp``: op → shader op name."""
SCALAR_ARG = {"pow": "exponent"}
"""The scalar's schema name (``other`` unless named here)."""


def resolve_scalar_extract_dtype(scalar: Any, tensor_dtype: str) -> str:
    """``resolve_scalar_extract_dtype``: ``float`` or ``int32`` (the push constant's type)."""
    if tensor_dtype in ("float32", "float16"):
        return "float32"
    if isinstance(scalar, (bool, np.bool_, SymInt, int, np.integer)):
        return "int32"
    if isinstance(scalar, (float, np.floating)):
        return "float32"
    raise EtVkRefusal(f"Unsupported tensor-scalar op scalar dtype: {type(scalar).__name__}; expected int, bool, "
                     f"SymInt or float")


def extract_int32_scalar(scalar: Any) -> int:
    """``extract_int32_scalar``: an int (``safe_downcast``), a bool as 0/1, a SymInt's value."""
    if isinstance(scalar, SymInt):
        return scalar.value
    value = int(scalar)
    if not -2**31 <= value < 2**31:
        raise EtVkRefusal(f"safe_downcast: {value} does not fit int32")
    return value


def scalar_push_constant(scalar: Any, scalar_dtype: str) -> bytes:
    """The by-value push constant: ``int32_t`` or ``float`` (``extract_scalar<float>``)."""
    if scalar_dtype == "int32":
        return struct.pack("<i", extract_int32_scalar(scalar))
    return struct.pack("<f", float(np.float32(scalar)))


def output_of(short: str):
    """``resize_binary_scalar_op_node``'s sizes with the op's output dtype (bool for comparisons)."""
    def resize_binary_scalar_op_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
        x = np.asarray(args["self"])
        return x.shape, np.dtype(np.bool_) if short != "pow" else x.dtype

    return resize_binary_scalar_op_output


def add_binary_scalar_op_node(graph: ComputeGraph, x: Any, scalar: Any, out: Tensor, op: str) -> None:
    """``add_binary_scalar_op_node``."""
    arg = prepack_standard(graph, x, out.spec.storage, out.spec.layout) if isinstance(x, TensorRef) else x
    tensor_dtype = arg.spec.dtype
    scalar_dtype = resolve_scalar_extract_dtype(scalar, tensor_dtype)
    name = f"{op}_scalar_{out.spec.storage}_{SUFFIX[tensor_dtype]}_{SUFFIX[scalar_dtype]}"
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, arg, graph.meta_ubo(out), graph.meta_ubo(arg)],
                   immediates=scalar_push_constant(scalar, scalar_dtype),
                   resize=lambda: graph.virtual_resize(out, arg.spec.sizes))


def _register(op: str, short: str) -> None:
    @register_op(op, output=output_of(short), constants=(), ports=PORTS)
    def binary_scalar(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
        add_binary_scalar_op_node(graph, args["self"], args[SCALAR_ARG.get(short, "other")], out, short)

    binary_scalar.__qualname__ = f"{short}_tensor_scalar"


for _op, _short in OPS.items():
    _register(_op, _short)
