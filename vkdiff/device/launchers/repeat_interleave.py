"""Launcher for ``aten.repeat_interleave.self_int`` through ET-VK's ``repeat_interleave_*`` shaders.

Ported from ``runtime/graph/ops/impl/RepeatInterleave.cpp`` (``repeat_interleave`` →
``add_repeat_interleave_node``, ``resize_repeat_interleave_node``):

* ``repeat_dim = extract_whcn_dim(dim)`` (normalized, then WHCN); ``VK_CHECK_COND`` that it is neither
  the output's nor the input's packed dim; ``output_size`` is ignored (as the C++ ignores it);
* texture only: variant ``repeat_interleave_<out dtype>`` (the shader declares ``texture3d``);
* bindings out, in, then ``logical_limits_ubo(in)``; no push constants;
* spec constants from id 3: hashed layouts of out and in, then ``repeats``, then ``repeat_dim``;
  each invocation reads one input texel at a logical position and writes ``repeats`` texels along
  ``repeat_dim`` of the output's logical position;
* ``DynamicDispatchNode`` with the default global size (the output's logical limits) and local size;
  resize args ``repeats, dim``;
* output sizes (``resize_repeat_interleave_node``): ``self.sizes`` with ``dim`` multiplied by ``repeats``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "aten.repeat_interleave.self_int"

PORTS = (Port(file="runtime/graph/ops/impl/RepeatInterleave.cpp",
              functions=("repeat_interleave", "add_repeat_interleave_node", "resize_repeat_interleave_node"),
              sha256="9ed41c56ca8a37d5e5ff5e1a982f584ad7d55cf3b1da9b857d3e589675fa7594",
              tree="executorch main cff6f4dd32"),)


def repeat_interleave_sizes(in_sizes: Sequence[int], repeats: int, dim: int) -> tuple[int, ...]:
    """``resize_repeat_interleave_node``."""
    sizes = [int(s) for s in in_sizes]
    sizes[dim % len(sizes)] *= repeats
    return tuple(sizes)


def extract_whcn_dim(dim: int, ndim: int) -> int:
    """``ComputeGraph::extract_whcn_dim``."""
    return ndim - 1 - (dim % ndim + ndim) % ndim


def resize_repeat_interleave_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    x = np.asarray(args["self"])
    return repeat_interleave_sizes(x.shape, int(args["repeats"]), int(args["dim"])), x.dtype


def add_repeat_interleave_node(graph: ComputeGraph, x: Tensor, repeats: int, dim: int, out: Tensor) -> None:
    """``add_repeat_interleave_node``."""
    repeat_dim = extract_whcn_dim(dim, len(x.spec.sizes))
    if repeat_dim in (out.spec.info.packed_dim, x.spec.info.packed_dim):
        raise EtVkRefusal(f"repeat_interleave: the repeated dim (WHCN {repeat_dim}) must not be the packed dim "
                         f"(out WHCN {out.spec.info.packed_dim}, in WHCN {x.spec.info.packed_dim})")
    name = f"repeat_interleave_{SUFFIX[out.spec.dtype]}"
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, x, graph.logical_limits_ubo(x)],
                   spec={3: out.spec.hashed_layout, 4: x.spec.hashed_layout, 5: repeats, 6: repeat_dim},
                   resize=lambda: graph.virtual_resize(out, repeat_interleave_sizes(x.spec.sizes, repeats, dim)))


@register_op(OP, output=resize_repeat_interleave_output, constants=(), ports=PORTS)
def repeat_interleave(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``repeat_interleave``: each slice along ``dim`` repeated ``repeats`` times in place.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor), ``repeats`` (int), ``dim`` (int), ``output_size`` (ignored).
        out (Tensor): the output, allocated at its maximal sizes.

    Example::

        repeat_interleave(graph, {"self": kv, "repeats": 2, "dim": 1}, out)
    """
    add_repeat_interleave_node(graph, args["self"], int(args["repeats"]), int(args["dim"]), out)
