"""Launcher for ``aten.unfold_copy.default`` through ET-VK's ``unfold_copy_buffer_*`` shaders.

Ported from ``runtime/graph/ops/impl/Unfold.cpp`` (``unfold_copy`` → ``add_unfold_copy_node``,
``normalize_unfold_dim``, ``get_unfold_sizes``, ``resize_unfold_copy_node``):

* buffer only: variant ``unfold_copy_buffer_<out dtype>`` whatever the storage (the partitioner gives
  this op buffers);
* checks at build (``get_unfold_sizes``): rank ≥ 1, ``dim`` in range, ``size > 0``, ``step > 0``,
  ``size <= self.sizes[dim]``;
* bindings out, in, then ``meta_ubo`` of out and in; no push constants;
* spec constants from id 3: ``dim_whcn = ndim - dim - 1`` (normalized dim), then ``step``;
* ``DynamicDispatchNode`` with the default global and local sizes; resize args ``dimension, size, step``;
* output sizes: ``self.sizes`` with ``dim`` → ``(sizes[dim] - size) / step + 1``, then ``size`` appended.
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

OP = "aten.unfold_copy.default"

PORTS = (Port(file="runtime/graph/ops/impl/Unfold.cpp",
              functions=("unfold_copy", "add_unfold_copy_node", "normalize_unfold_dim", "get_unfold_sizes",
                         "resize_unfold_copy_node"),
              sha256="382b081adaf3c3659cb369ebd6f61eff64399985e99a44fc398fa6522a183a74",
              tree="executorch main cff6f4dd32"),)


def normalize_unfold_dim(dim: int, ndim: int) -> int:
    """``normalize_unfold_dim``."""
    normalized = dim + ndim if dim < 0 else dim
    if not 0 <= normalized < ndim:
        raise EtVkRefusal("unfold_copy: dimension must be in range [-input.dim(), input.dim())")
    return normalized


def get_unfold_sizes(in_sizes: Sequence[int], dim: int, size: int, step: int) -> tuple[int, ...]:
    """``get_unfold_sizes`` with its checks."""
    if not in_sizes:
        raise EtVkRefusal("unfold_copy: input must have rank >= 1")
    dim = normalize_unfold_dim(dim, len(in_sizes))
    if size <= 0 or step <= 0 or size > in_sizes[dim]:
        raise EtVkRefusal(f"unfold_copy: needs size > 0, step > 0 and size <= {in_sizes[dim]}; got size={size}, "
                         f"step={step}")
    out = [int(s) for s in in_sizes]
    out[dim] = (out[dim] - size) // step + 1
    return (*out, size)


def resize_unfold_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    x = np.asarray(args["self"])
    return get_unfold_sizes(x.shape, int(args["dimension"]), int(args["size"]), int(args["step"])), x.dtype


def add_unfold_copy_node(graph: ComputeGraph, x: Tensor, dim: int, size: int, step: int, out: Tensor) -> None:
    """``add_unfold_copy_node``."""
    ndim = len(x.spec.sizes)
    dim_whcn = ndim - normalize_unfold_dim(dim, ndim) - 1
    get_unfold_sizes(x.spec.sizes, dim, size, step)
    name = f"unfold_copy_buffer_{SUFFIX[out.spec.dtype]}"
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, x, graph.meta_ubo(out), graph.meta_ubo(x)], spec={3: dim_whcn, 4: step},
                   resize=lambda: graph.virtual_resize(out, get_unfold_sizes(x.spec.sizes, dim, size, step)))


@register_op(OP, output=resize_unfold_output, constants=(), ports=PORTS)
def unfold_copy(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``unfold_copy``: every window of ``size`` along ``dimension``, ``step`` apart, as a new last dim.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor), ``dimension``, ``size``, ``step`` (ints), by schema name.
        out (Tensor): the output, allocated at its maximal sizes.

    Example::

        unfold_copy(graph, {"self": x, "dimension": -1, "size": 3, "step": 2}, out)
    """
    add_unfold_copy_node(graph, args["self"], int(args["dimension"]), int(args["size"]), int(args["step"]), out)
