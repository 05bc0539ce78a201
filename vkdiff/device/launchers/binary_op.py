"""Launchers for every op ``BinaryOp.cpp`` registers (``aten.add.Tensor``, ``aten.eq.Tensor``, ...) through
``binary_<op>_*``.

Ported from ``runtime/graph/ops/impl/BinaryOp.cpp`` (``add_binary_op_node``):

* a constant operand is prepacked like the output (``prepack_standard_like``: the
  output's storage and layout), a tensor operand is used as is;
* variant ``binary_<op>_<out storage>_<dtype of self>``;
* UBOs: ``meta_ubo`` of out, self, other; push constant ``alpha`` (float, 1 unless given);
* spec constants from id 3: hashed layouts of out, self, other, then whether self and
  other are broadcast along the packed dim (textures only);
* global size ``create_global_wg_size(out)``, local ``create_local_wg_size``;
* output sizes: the broadcast of the inputs' sizes (``resize_binary_op_node``).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.staging import SUFFIX, prepack_standard
from vkdiff.device.launchers.utils.common import default_global_wg, val_at
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

PORTS = (Port(file="runtime/graph/ops/impl/BinaryOp.cpp",
              functions=("add_binary_op_node", "check_binary_op_args", "resize_binary_op_node"),
              sha256="b52d4ccd0b85cd3aadea0f0b5350c3be3fea3ba32bd7f6b555148e7141c195fd",
              tree="executorch main cff6f4dd32"),)

OPS = {"aten.add.Tensor": "add", "aten.sub.Tensor": "sub", "aten.mul.Tensor": "mul", "aten.div.Tensor": "div",
       "aten.div.Tensor_mode": "floor_divide", "aten.pow.Tensor_Tensor": "pow", "aten.minimum.default": "minimum",
       "aten.eq.Tensor": "eq", "aten.lt.Tensor": "lt", "aten.le.Tensor": "le", "aten.gt.Tensor": "gt",
       "aten.ge.Tensor": "ge", "aten.bitwise_and.Tensor": "bitwise_and", "aten.logical_and.default": "bitwise_and",
       "aten.bitwise_or.Tensor": "bitwise_or", "aten.logical_or.default": "bitwise_or"}
"""``VK_REGISTER_OP`` of ``BinaryOp.cpp``: op → shader op name (``div.Tensor_mode`` is ``floor_divide`` whatever
its rounding mode; the logical ops run the bitwise shaders)."""
BOOL_OUTPUT = frozenset({"eq", "lt", "le", "gt", "ge"}) | {op for op in OPS if op.startswith("aten.logical_")}
"""Ops whose output is a bool tensor (comparisons; logical and/or)."""


def _second(args: Mapping[str, Any]) -> Any:
    """The second operand: ``other``, or ``exponent`` for ``pow.Tensor_Tensor``."""
    return args["other"] if "other" in args else args["exponent"]


def output_of(op: str):
    """``resize_binary_op_node``'s sizes with the op's output dtype."""
    def resize_binary_op_node(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
        """``resize_binary_op_node``: the broadcast of the two operands."""
        a, b = np.asarray(args["self"]), np.asarray(_second(args))
        boolean = op in BOOL_OUTPUT or OPS[op] in BOOL_OUTPUT
        return tuple(np.broadcast_shapes(a.shape, b.shape)), np.dtype(np.bool_) if boolean else a.dtype

    return resize_binary_op_node



def is_packed_dim_broadcasted(out: Tensor, operand: Tensor) -> bool:
    """``is_packed_dim_broadcasted(out, operand)``: the operand has size 1 where out is larger, along out's packed dim."""
    index = -1 - out.spec.info.packed_dim
    return val_at(index, out.spec.sizes) > val_at(index, operand.spec.sizes)


def _operand(graph: ComputeGraph, value: Any, out: Tensor) -> Tensor:
    """``prepack_standard_like(value, out, passthrough=True)``."""
    if isinstance(value, TensorRef):
        return prepack_standard(graph, value, out.spec.storage, out.spec.layout)
    return value


def add_binary_op_node(graph: ComputeGraph, self: Any, other: Any, alpha: float | None, out: Tensor, op: str) -> None:
    """``add_binary_op_node``."""
    arg1, arg2 = _operand(graph, self, out), _operand(graph, other, out)
    if not (arg1.spec.info.packed_dim == arg2.spec.info.packed_dim == out.spec.info.packed_dim):
        raise EtVkRefusal(f"binary_{op}: operands and output must share the packed dim")
    name = f"binary_{op}_{out.spec.storage}_{SUFFIX[arg1.spec.dtype]}"
    texture = out.spec.storage != "buffer"
    spec = {3: out.spec.hashed_layout, 4: arg1.spec.hashed_layout, 5: arg2.spec.hashed_layout,
            6: int(texture and is_packed_dim_broadcasted(out, arg1)),
            7: int(texture and is_packed_dim_broadcasted(out, arg2))}
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, arg1, arg2, graph.meta_ubo(out), graph.meta_ubo(arg1), graph.meta_ubo(arg2)],
                   spec=spec, immediates=np.array([1.0 if alpha is None else alpha], np.float32).tobytes(),
                   resize=lambda: graph.virtual_resize(out, np.broadcast_shapes(arg1.spec.sizes, arg2.spec.sizes)))


def _register(op: str, short: str) -> None:
    @register_op(op, output=output_of(op), constants=(), ports=PORTS)
    def binary(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
        alpha = args.get("alpha")
        add_binary_op_node(graph, args["self"], _second(args), alpha if isinstance(alpha, (int, float)) else None,
                           out, short)

    binary.__qualname__ = f"binary_{op.split('.')[1]}_{op.split('.')[2]}"


for _op, _short in OPS.items():
    _register(_op, _short)
