"""Launcher for ``aten.index_select.default`` through ET-VK's ``index_select[_channel]_*`` shaders.

Ported from ``runtime/graph/ops/impl/IndexSelect.cpp`` (``index_select``, ``get_dim_idx``,
``check_index_select_args``, ``create_index_select_params``, ``add_index_select_node``,
``add_index_select_channel_node``):

* ``dim`` is normalized and taken as a 4-D dim index (``dim - ndim``: -1 width, -2 height, -3 channels,
  -4 batch). Channels route: ``index_select_channel_<dtype>``, bindings out, self, index, then
  ``sizes_ubo(out)``, ``sizes_ubo(self)``. Every other route: ``index_select_<dtype>``, bindings out, self,
  index, ``sizes_ubo(out)``, then a params buffer ``{gpu_dim, stride}`` fixed at build (width ``{0, 1}``,
  height ``{1, 1}``, batch ``{2, ceil(C / 4)}``);
* the shaders are texture-only and ``check_index_select_args`` requires self, index and out channels packed;
* no spec constants, no push constants; ``DynamicDispatchNode`` with the default global and local sizes;
* **no resize function** (``nullptr``): the output keeps the sizes it was built with, so a graph run below
  its upper bound leaves it at the bound. ``index_select_output`` gives what ATen returns, for allocation.
"""

from __future__ import annotations

import struct
from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg, div_up, val_at
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "aten.index_select.default"

PORTS = (Port(file="runtime/graph/ops/impl/IndexSelect.cpp",
              functions=("index_select", "get_dim_idx", "check_index_select_args", "create_index_select_params",
                         "add_index_select_node", "add_index_select_channel_node"),
              sha256="e24d57e0eb5417c7484501bbd3a9d35daf91aa216bcbb2cfde506c5a75986278",
              tree="executorch main cff6f4dd32"),)

WIDTH, HEIGHT, CHANNEL, BATCH = -1, -2, -3, -4
"""``kWidth4D``, ``kHeight4D``, ``kChannel4D``, ``kBatch4D``."""
WHCN_CHANNELS = 2


def get_dim_idx(dim: int, ndim: int) -> int:
    """``get_dim_idx``: the normalized dim as a negative 4-D dim index."""
    return dim % ndim - ndim


def check_index_select_args(x: Tensor, index: Tensor, out: Tensor) -> None:
    """``check_index_select_args``: self, index and out channels packed."""
    packed = tuple(t.spec.info.packed_dim for t in (x, index, out))
    if packed != (WHCN_CHANNELS,) * 3:
        raise EtVkRefusal(f"index_select: self, index and out must be channels packed (WHCN {WHCN_CHANNELS}), "
                         f"got WHCN {packed}")


def create_index_select_params(dim_idx: int, x: Tensor) -> tuple[int, int]:
    """``create_index_select_params``: ``(gpu_dim, stride)``."""
    if dim_idx == WIDTH:
        return 0, 1
    if dim_idx == HEIGHT:
        return 1, 1
    if dim_idx == BATCH:
        return 2, div_up(val_at(CHANNEL, x.spec.sizes), 4)
    raise EtVkRefusal(f"Unexpected dim_idx: {dim_idx}")


def index_select_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """ATen's sizes (``self`` with ``dim`` resized to the index's length), for allocation only."""
    x = np.asarray(args["self"])
    sizes = list(x.shape)
    sizes[int(args["dim"]) % x.ndim] = int(np.size(args["index"]))
    return tuple(sizes), x.dtype


def add_index_select_channel_node(graph: ComputeGraph, x: Tensor, index: Tensor, out: Tensor) -> None:
    """``add_index_select_channel_node``."""
    check_index_select_args(x, index, out)
    name = f"index_select_channel_{SUFFIX[out.spec.dtype]}"
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, x, index, graph.sizes_ubo(out), graph.sizes_ubo(x)])


def add_index_select_node(graph: ComputeGraph, x: Tensor, dim_idx: int, index: Tensor, out: Tensor) -> None:
    """``add_index_select_node``."""
    check_index_select_args(x, index, out)
    params = graph.uniform(struct.pack("<2i", *create_index_select_params(dim_idx, x)), "index_select_params")
    name = f"index_select_{SUFFIX[out.spec.dtype]}"
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, x, index, graph.sizes_ubo(out), params])


@register_op(OP, output=index_select_output, constants=(), ports=PORTS)
def index_select(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``index_select``: ``out = self.index_select(dim, index)``, routed by the 4-D dim index.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor), ``dim`` (int), ``index`` (1-D int32 Tensor), by schema name.
        out (Tensor): the output, allocated at its maximal sizes.

    Example::

        index_select(graph, {"self": x, "dim": 0, "index": idx}, out)
    """
    x, index = args["self"], args["index"]
    dim_idx = get_dim_idx(int(args["dim"]), len(x.spec.sizes))
    if dim_idx == CHANNEL:
        add_index_select_channel_node(graph, x, index, out)
    else:
        add_index_select_node(graph, x, dim_idx, index, out)
