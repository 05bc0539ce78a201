"""Launchers for ET-VK's unary activations (``aten.sigmoid.default``, ...) through the ``unary_op`` shaders.

Ported from ``runtime/graph/ops/impl/UnaryOp.cpp`` (``add_unary_op_node``):
variant ``<op>_<dtype of out>_<out storage>``; push constants: ``numel`` (buffer) or the
output's logical limits (texture), then ``(min, max)`` as ``vec2`` (-1, -1 for plain
activations); no UBOs, no spec constants; global size ``create_global_wg_size(out)``;
output sizes are the input's (``resize_unary_op_node``).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.resources import Tensor

PORTS = (Port(file="runtime/graph/ops/impl/UnaryOp.cpp", functions=("add_unary_op_node", "resize_unary_op_node"),
              sha256="d087ef2a30cfbf1937b8712e9f751cc972a4fb997c321d34a607b0b361538a2a",
              tree="executorch main cff6f4dd32"),)

ACTIVATIONS = {"aten.sigmoid.default": "sigmoid", "aten.tanh.default": "tanh", "aten.exp.default": "exp",
               "aten.neg.default": "neg", "aten.abs.default": "abs"}
DUMMY = -1.0
"""``kDummyFloat``: min and max of plain activations."""


def resize_unary_op_node(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    x = np.asarray(args["self"])
    return x.shape, x.dtype


def add_unary_op_node(graph: ComputeGraph, x: Tensor, lo: float, hi: float, out: Tensor, op: str) -> None:
    """``add_unary_op_node``."""
    spec = out.spec
    name = f"{op}_{SUFFIX[spec.dtype]}_{spec.storage}"
    first = graph.pc(out, "numel" if spec.storage == "buffer" else "logical_limits")
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out), resources=[out, x],
                   immediates=[first, np.array([lo, hi], np.float32).tobytes()],
                   resize=lambda: graph.virtual_resize(out, x.spec.sizes))


def _register(op: str, short: str) -> None:
    @register_op(op, output=resize_unary_op_node, constants=(), ports=PORTS)
    def unary(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
        add_unary_op_node(graph, args["self"], DUMMY, DUMMY, out, short)

    unary.__qualname__ = f"unary_{short}"


for _op, _short in ACTIVATIONS.items():
    _register(_op, _short)
