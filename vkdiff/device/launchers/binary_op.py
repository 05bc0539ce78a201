"""Launchers for ET-VK's binary ops (``aten.add.Tensor``, ``aten.mul.Tensor``, ...) through ``binary_<op>_*``.

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

from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.staging import SUFFIX, prepack_standard
from vkdiff.device.launchers.common import default_global_wg, val_at
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.resources import Tensor

PORTS = (Port(file="runtime/graph/ops/impl/BinaryOp.cpp",
              functions=("add_binary_op_node", "check_binary_op_args", "resize_binary_op_node"),
              sha256="b52d4ccd0b85cd3aadea0f0b5350c3be3fea3ba32bd7f6b555148e7141c195fd",
              tree="executorch main cff6f4dd32"),)

OPS = {"aten.add.Tensor": "add", "aten.sub.Tensor": "sub", "aten.mul.Tensor": "mul", "aten.div.Tensor": "div"}


def resize_binary_op_node(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_binary_op_node``: the broadcast of ``self`` and ``other``."""
    a, b = np.asarray(args["self"]), np.asarray(args["other"])
    return tuple(np.broadcast_shapes(a.shape, b.shape)), a.dtype


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
        raise ValueError(f"binary_{op}: operands and output must share the packed dim")
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
    @register_op(op, output=resize_binary_op_node, constants=(), ports=PORTS)
    def binary(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
        add_binary_op_node(graph, args["self"], args["other"], args.get("alpha"), out, short)

    binary.__qualname__ = f"binary_{short}"


for _op, _short in OPS.items():
    _register(_op, _short)
