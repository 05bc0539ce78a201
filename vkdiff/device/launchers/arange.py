"""Launcher for ``aten.arange.start_step`` (``Arange.cpp``).

Ported from ``runtime/graph/ops/impl/Arange.cpp`` (``add_arange_node``): start, end and
step must be ints (``check_arange_input``); variant ``arange_<out storage>_<out dtype>``;
UBOs: ``meta_ubo(out)``, then start and step as float params buffers; spec constant: the
output's hashed layout; output ``[div_up(end - start, step)]`` (``resize_arange_node``).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.runtime.resources import Tensor

OP = "aten.arange.start_step"
PORTS = (Port(file="runtime/graph/ops/impl/Arange.cpp",
              functions=("add_arange_node", "check_arange_input", "resize_arange_node"),
              sha256="6abf91f83a4ab38ca7adda1e20bef88a84afecca8d4771383325901e9254717f", tree="executorch main cff6f4dd32"),)


def _ints(args: Mapping[str, Any]) -> tuple[int, int, int]:
    """``check_arange_input``: start, end and step as ints."""
    values = (args.get("start", 0), args["end"], args.get("step", 1))
    if not all(isinstance(v, (int, np.integer)) or v is None for v in values):
        raise EtVkRefusal(f"ET-VK refuses arange: check_arange_input needs int start, end and step, got {values}")
    start, end, step = values
    return int(start or 0), int(end), int(1 if step is None else step)


def resize_arange_node(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_arange_node``: ``[div_up(end - start, step)]``, the requested dtype (float32 unless given)."""
    start, end, step = _ints(args)
    return (max(math.ceil((end - start) / step), 0),), np.dtype(dtype) if dtype is not None else np.dtype(np.float32)


@register_op(OP, output=resize_arange_node, constants=(), ports=PORTS)
def add_arange_node(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``add_arange_node``: ``out[i] = T(start + i * step)`` in float."""
    start, _, step = _ints(args)
    name = f"arange_{out.spec.storage}_{SUFFIX[out.spec.dtype]}"
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, graph.meta_ubo(out), graph.uniform(np.array([start], np.float32).tobytes(), "start"),
                              graph.uniform(np.array([step], np.float32).tobytes(), "step")],
                   spec={3: out.spec.hashed_layout})
