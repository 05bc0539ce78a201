"""Launcher for ``aten.where.self`` through ET-VK's ``where_*`` shaders.

Ported from ``runtime/graph/ops/impl/Where.cpp`` (``where`` → ``add_where_node``, ``resize_where_node``):

* no storage choice: variant ``where_<out storage>_<out dtype>`` (``where_texture3d_half``); the
  condition is a bool tensor, which the shaders declare as ``uint8`` (an ``rgba8ui`` image on textures,
  an 8-bit storage buffer on buffers, which naga cannot load);
* bindings out, condition, self, other, then ``meta_ubo`` of out, condition, self, other; no push constants;
* spec constants from id 3: hashed layouts of out, condition, self, other;
* ``DynamicDispatchNode`` with ``default_pick_global_wg_size`` and ``default_pick_local_wg_size``;
* output sizes (``resize_where_node``): per dim, right-aligned, the largest size among the three tensors.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "aten.where.self"

PORTS = (Port(file="runtime/graph/ops/impl/Where.cpp", functions=("where", "add_where_node", "resize_where_node"),
              sha256="9df56da19494f8cb5865725f9512cba4415668d15dea6fd67276fe96b698bcb9",
              tree="executorch main cff6f4dd32"),)


def where_sizes(all_sizes: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """``resize_where_node``'s loop: right-aligned, the largest size per dim (missing leading dims are 1)."""
    out: list[int] = []
    for sizes in all_sizes:
        if len(sizes) > len(out):
            out = [1] * (len(sizes) - len(out)) + out
        offset = len(out) - len(sizes)
        for i, size in enumerate(sizes):
            out[offset + i] = max(out[offset + i], int(size))
    return tuple(out)


def resize_where_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_where_node`` on numpy arguments, in ``self``'s dtype."""
    tensors = [np.asarray(args[name]) for name in ("condition", "self", "other")]
    return where_sizes([t.shape for t in tensors]), tensors[1].dtype


def add_where_node(graph: ComputeGraph, cond: Tensor, x: Tensor, other: Tensor, out: Tensor) -> None:
    """``add_where_node``."""
    name = f"where_{out.spec.storage}_{SUFFIX[out.spec.dtype]}"
    tensors = (out, cond, x, other)
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[*tensors, *(graph.meta_ubo(t) for t in tensors)],
                   spec={3 + i: t.spec.hashed_layout for i, t in enumerate(tensors)},
                   resize=lambda: graph.virtual_resize(out, where_sizes([t.spec.sizes for t in tensors[1:]])))


@register_op(OP, output=resize_where_output, constants=(), ports=PORTS)
def where(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``where``: ``out = condition ? self : other`` with broadcasting.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``condition`` (bool Tensor), ``self``, ``other`` (float Tensors), by schema name.
        out (Tensor): the output, allocated at its maximal sizes.

    Example::

        where(graph, {"condition": mask, "self": x, "other": y}, out)
    """
    add_where_node(graph, args["condition"], args["self"], args["other"], out)
