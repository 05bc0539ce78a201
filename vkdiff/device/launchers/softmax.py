"""Launchers for ``aten._softmax.default`` and ``aten._log_softmax.default`` (``[log_]softmax_<storage>_<dtype>``).

Ported from ``runtime/graph/ops/impl/Softmax.cpp`` (``add_softmax_node``), one route per storage
(case option ``route``: ``buffer`` or ``texture``):

* variant ``softmax_<out storage>_<out dtype>``, prefixed ``log_`` for log_softmax;
* bindings out, in, then ``meta_ubo`` of in and of out;
* spec constants: buffer 3: the reduce dim (WHCN); texture 3: out's hashed layout, 4: the reduce dim,
  5: the group dim (the larger other axis of out's logical limits, the second on a tie);
* global: buffer ``(W, H, C·N)`` of out, texture out's logical limits; 1 along the reduce axis
  (``pick_softmax_global_wg_size``); local: 4 workers along the reduce axis, and for textures 4
  groups along the group axis (``pick_softmax_local_wg_size``);
* resize: out takes in's sizes (``resize_softmax_node``).

With a 4-D input of batch above 1, reducing the concat dim (channels) is refused (``VK_CHECK_COND``);
the batch dim itself (WHCN 3) indexes a ``uvec3`` out of range in the C++ and is refused here.
``half_to_float`` is ignored, as the C++ ignores it.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.launchers.utils.common import dtype_suffix, val_at
from vkdiff.device.launchers.reduce import check_axis, check_concat_dim, nchw_dim_to_whcn_dim, normalize
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

PORTS = (Port(file="runtime/graph/ops/impl/Softmax.cpp",
              functions=("pick_softmax_global_wg_size", "pick_softmax_local_wg_size", "resize_softmax_node",
                         "add_softmax_node", "softmax", "log_softmax"),
              sha256="46654ba905d2d5b4e3a1a957902a4cba6e627241636a9fd27876e78bad00fe10",
              tree="executorch main cff6f4dd32"),)

NWORKERS = 4
NGROUPS = 4


def softmax_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """The input's sizes and dtype."""
    x = np.asarray(args["self"])
    return x.shape, x.dtype


def pick_softmax_global_wg_size(out: Tensor, reduce_whcn: int) -> tuple[int, int, int]:
    """``pick_softmax_global_wg_size``."""
    sizes = out.spec.sizes
    if out.spec.storage == "buffer":
        size = [val_at(-1, sizes), val_at(-2, sizes), val_at(-3, sizes) * val_at(-4, sizes)]
    else:
        size = list(out.spec.logical_limits)
    size[reduce_whcn] = 1
    return tuple(size)  # type: ignore[return-value]


def pick_softmax_local_wg_size(out: Tensor, reduce_whcn: int, group: int | None) -> tuple[int, int, int]:
    """``pick_softmax_local_wg_size``."""
    local = [1, 1, 1]
    local[reduce_whcn] = NWORKERS
    if out.spec.storage != "buffer":
        local[group] = NGROUPS
    return tuple(local)  # type: ignore[return-value]


def add_softmax_node(graph: ComputeGraph, x: Tensor, dim: int, out: Tensor, log_softmax: bool,
                     route: str | None = None) -> None:
    """``add_softmax_node``; a case's ``route`` option (``buffer``/``texture``) must match out's storage."""
    ndim = len(x.spec.sizes)
    reduce_whcn = nchw_dim_to_whcn_dim(normalize(dim, ndim), ndim)
    check_axis(reduce_whcn, "softmax")
    check_concat_dim(x, out, [reduce_whcn])
    picked = "buffer" if out.spec.storage == "buffer" else "texture"
    if route is not None and route != picked:
        raise ValueError(f"softmax: Softmax.cpp takes route {picked}, the case expects {route}")
    name = ("log_" if log_softmax else "") + f"softmax_{out.spec.storage}_{dtype_suffix(out.spec.dtype)}"
    spec: dict[int, int] = {3: reduce_whcn}
    group = None
    if out.spec.storage != "buffer":
        limits = out.spec.logical_limits
        other1, other2 = (reduce_whcn + 1) % 3, (reduce_whcn + 2) % 3
        group = other1 if limits[other1] > limits[other2] else other2
        spec = {3: out.spec.hashed_layout, 4: reduce_whcn, 5: group}

    def resize_softmax_node() -> None:
        graph.virtual_resize(out, x.spec.sizes)

    graph.dispatch(name, global_wg=lambda: pick_softmax_global_wg_size(out, reduce_whcn),
                   local_wg=lambda: pick_softmax_local_wg_size(out, reduce_whcn, group),
                   resources=[out, x, graph.meta_ubo(x), graph.meta_ubo(out)], spec=spec, resize=resize_softmax_node)


@register_op("aten._softmax.default", output=softmax_output, constants=(), ports=PORTS)
def softmax(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None) -> None:
    """``softmax``: ``add_softmax_node(self, dim, out, log_softmax=False)``."""
    add_softmax_node(graph, args["self"], int(args["dim"]), out, False, route)


@register_op("aten._log_softmax.default", output=softmax_output, constants=(), ports=PORTS)
def log_softmax(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None) -> None:
    """``log_softmax``: ``add_softmax_node(self, dim, out, log_softmax=True)``."""
    add_softmax_node(graph, args["self"], int(args["dim"]), out, True, route)
