"""Launcher for ``aten.var.dim`` through ``var_{buffer|texture3d}_<dtype>``.

Ported from ``runtime/graph/ops/impl/Var.cpp`` (``var`` → ``add_var_node``): one dim only
(``VK_CHECK_COND``); the buffer route when in or out is a buffer, else the texture route (case
option ``route``: ``buffer`` / ``texture``):

* variant ``var_<out storage>_<out dtype>``; push constant ``unbiased`` (int32);
* buffer: bindings out, in, UBOs ``sizes`` and ``strides`` of in, then of out; spec constant 3: the reduce
  dim (WHCN); global ``(W, H, C·N)`` of out; local 4 along the reduce axis;
* texture: bindings out, in, UBOs ``logical_limits`` and ``sizes`` of in; spec constants 3: packed dim of
  out, 4: reduce dim, 5: group dim; global: out's logical limits with the reduce axis 1; local 4 along
  the reduce axis and 4 along the larger other axis of the global size (the second on a tie);
* resize: the reduced dim becomes 1 (``resize_var_node``: keepdim whatever the argument says).

With a 4-D input of batch above 1 the concat dim may not be reduced (``VK_CHECK_COND``); the batch
dim (WHCN 3) indexes a ``uvec3`` out of range in the C++ and is refused here.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.launchers.utils.common import dtype_suffix, val_at
from vkdiff.device.launchers.reduce import (check_axis, check_concat_dim, nchw_dim_to_whcn_dim, normalize,
                                            reduce_output)
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

PORTS = (Port(file="runtime/graph/ops/impl/Var.cpp",
              functions=("var_buffer_global_wg_size", "var_buffer_local_wg_size", "var_texture_global_wg_size",
                         "var_texture_local_wg_size", "resize_var_node", "add_var_buffer_node",
                         "add_var_texture_node", "add_var_node", "var"),
              sha256="95a67ebad78a3f0b674bc500f5f903138aed721dfd41db6d381743861c7cef25",
              tree="executorch main cff6f4dd32"),)

NWORKERS = 4
NGROUPS = 4


def var_global_wg_size(out: Tensor, reduce_whcn: int) -> tuple[int, int, int]:
    """``var_buffer_global_wg_size`` / ``var_texture_global_wg_size``."""
    sizes = out.spec.sizes
    if out.spec.storage == "buffer":
        return (val_at(-1, sizes), val_at(-2, sizes), val_at(-3, sizes) * val_at(-4, sizes))
    size = list(out.spec.logical_limits)
    size[reduce_whcn] = 1
    return tuple(size)  # type: ignore[return-value]


def var_local_wg_size(global_wg: tuple[int, int, int], reduce_whcn: int, texture: bool) -> tuple[int, int, int]:
    """``var_buffer_local_wg_size`` / ``var_texture_local_wg_size``."""
    local = [1, 1, 1]
    local[reduce_whcn] = NWORKERS
    if texture:
        other1, other2 = (reduce_whcn + 1) % 3, (reduce_whcn + 2) % 3
        local[other1 if global_wg[other1] > global_wg[other2] else other2] = NGROUPS
    return tuple(local)  # type: ignore[return-value]


def add_var_node(graph: ComputeGraph, x: Tensor, dim: int, unbiased: bool, out: Tensor,
                 route: str | None = None) -> None:
    """``add_var_node`` → ``add_var_buffer_node`` or ``add_var_texture_node``."""
    ndim = len(x.spec.sizes)
    reduce_whcn = nchw_dim_to_whcn_dim(normalize(dim, ndim), ndim)
    check_axis(reduce_whcn, "var")
    check_concat_dim(x, out, [reduce_whcn])
    buffer = x.spec.storage == "buffer" or out.spec.storage == "buffer"
    picked = "buffer" if buffer else "texture"
    if route is not None and route != picked:
        raise ValueError(f"var: Var.cpp takes route {picked}, the case expects {route}")
    name = f"var_{out.spec.storage}_{dtype_suffix(out.spec.dtype)}"
    immediates = np.array([int(bool(unbiased))], np.int32).tobytes()
    if buffer:
        resources = [out, x, graph.sizes_ubo(x), graph.strides_ubo(x), graph.sizes_ubo(out), graph.strides_ubo(out)]
        spec = {3: reduce_whcn}
    else:
        resources = [out, x, graph.logical_limits_ubo(x), graph.sizes_ubo(x)]
        global_wg = var_global_wg_size(out, reduce_whcn)
        other1, other2 = (reduce_whcn + 1) % 3, (reduce_whcn + 2) % 3
        spec = {3: out.spec.info.packed_dim, 4: reduce_whcn,
                5: other1 if global_wg[other1] > global_wg[other2] else other2}

    def resize_var_node() -> None:
        sizes = list(x.spec.sizes)
        if sizes:
            sizes[normalize(dim, len(sizes))] = 1
        graph.virtual_resize(out, sizes)

    graph.dispatch(name, global_wg=lambda: var_global_wg_size(out, reduce_whcn),
                   local_wg=lambda: var_local_wg_size(var_global_wg_size(out, reduce_whcn), reduce_whcn, not buffer),
                   resources=resources, spec=spec, immediates=immediates, resize=resize_var_node)


@register_op("aten.var.dim", output=reduce_output, constants=(), ports=PORTS)
def var(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None) -> None:
    """``var``: one dim (``VK_CHECK_COND``), ``unbiased`` defaulting to True.

    Args:
        graph (ComputeGraph): the graph the node joins.
        args (Mapping[str, Any]): ``self`` (Tensor), ``dim`` (one int in a list), ``unbiased``, ``keepdim``.
        out (Tensor): the output.
        route (str | None): the route a kernel case expects (``buffer`` / ``texture``).
    """
    dims = args["dim"]
    if dims is None or len(dims) != 1:
        raise EtVkRefusal(f"var: Var.cpp takes exactly one dim (VK_CHECK_COND), got {dims}")
    unbiased = True if args.get("unbiased") is None else bool(args["unbiased"])
    add_var_node(graph, args["self"], int(dims[0]), unbiased, out, route)
