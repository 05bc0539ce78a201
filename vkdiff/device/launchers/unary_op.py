"""Launchers for every op ``UnaryOp.cpp`` registers (``aten.sigmoid.default``, ``aten.clamp.default``, ...).

Ported from ``runtime/graph/ops/impl/UnaryOp.cpp`` (``add_unary_op_node`` and the ``DEFINE_*_FN`` macros):
variant ``<op>_<dtype of out>_<out storage>``; push constants: ``numel`` (buffer) or the
output's logical limits (texture), then ``(min, max)`` as ``vec2`` (-1, -1 for plain
activations); no UBOs, no spec constants; global size ``create_global_wg_size(out)``;
output sizes are the input's (``resize_unary_op_node``).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

PORTS = (Port(file="runtime/graph/ops/impl/UnaryOp.cpp", functions=("add_unary_op_node", "resize_unary_op_node"),
              sha256="d087ef2a30cfbf1937b8712e9f751cc972a4fb997c321d34a607b0b361538a2a",
              tree="executorch main cff6f4dd32"),)

DUMMY = -1.0
"""``kDummyFloat``: min and max of plain activations."""
INF = float("inf")

Bounds = Callable[[Mapping[str, Any]], tuple[float, float]]


def _val_or_inf(value: Any, high: bool) -> float:
    """``get_val_or_inf``: an absent bound is infinite."""
    return (INF if high else -INF) if value is None else float(value)


def _plain(args: Mapping[str, Any]) -> tuple[float, float]:
    return DUMMY, DUMMY


UNARY: dict[str, tuple[str, Bounds]] = {
    **{f"aten.{name}.default": (name, _plain) for name in (
        "abs", "cos", "exp", "neg", "sigmoid", "sin", "sqrt", "rsqrt", "tanh", "hardswish", "hardsigmoid", "log10",
        "round", "bitwise_not", "gelu")},
    "aten.clamp.default": ("clamp", lambda a: (_val_or_inf(a.get("min"), False), _val_or_inf(a.get("max"), True))),
    "aten.hardtanh.default": ("clamp", lambda a: (_val_or_inf(a.get("min_val", -1.0), False),
                                                  _val_or_inf(a.get("max_val", 1.0), True))),
    "aten.relu.default": ("clamp", lambda a: (0.0, INF)),
    "aten.relu6.default": ("clamp", lambda a: (0.0, 6.0)),
    "aten.hardshrink.default": ("hardshrink", lambda a: (_val_or_inf(a.get("lambd", 0.5), False),
                                                         -_val_or_inf(a.get("lambd", 0.5), True))),
    "aten.leaky_relu.default": ("leaky_relu", lambda a: (_val_or_inf(a.get("negative_slope", 0.01), False), DUMMY)),
}
"""``VK_REGISTER_OP`` of ``UnaryOp.cpp``: op → (shader, (min, max) from the arguments), as its ``DEFINE_*_FN``
macros pass them (``gelu`` ignores ``approximate``: the shader is the tanh approximation)."""


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


def _register(op: str, shader: str, bounds: Bounds) -> None:
    @register_op(op, output=resize_unary_op_node, constants=(), ports=PORTS)
    def unary(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
        add_unary_op_node(graph, args["self"], *bounds(args), out, shader)

    unary.__qualname__ = f"unary_{op.split('.')[1]}"


for _op, (_shader, _bounds) in UNARY.items():
    _register(_op, _shader, _bounds)
