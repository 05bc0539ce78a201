"""Launcher for ``aten.index.Tensor`` through ET-VK's ``index_tensor_*`` shaders.

Ported from ``runtime/graph/ops/impl/IndexTensor.cpp`` (``index_tensor`` → ``add_index_tensor_node``,
``resize_index_tensor_node``):

* exactly one index tensor (``VK_CHECK_COND(indices_list->size() == 1)``), applied to dim 0; ``int32``
  (the shaders declare ``int``); negative indices reach the shader as they are;
* no storage choice: variant ``index_tensor_<out storage>_<out dtype>``; the texture shader reads
  ``self[idx, 0, 0, 0]`` (a 1-D ``self``; the partitioner sends a higher-rank ``self`` to buffers), the
  buffer shader copies ``self``'s trailing dims;
* bindings out, self, index, then ``meta_ubo`` of out, self, index; no push constants;
* spec constants from id 3: hashed layouts of out and self;
* ``DynamicDispatchNode`` with the default global and local sizes;
* output sizes ``index.sizes ++ self.sizes[1:]`` (``resize_index_tensor_node``).
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

OP = "aten.index.Tensor"

PORTS = (Port(file="runtime/graph/ops/impl/IndexTensor.cpp",
              functions=("index_tensor", "add_index_tensor_node", "resize_index_tensor_node"),
              sha256="3c8fbc6aa5e40311c20ee5f1ab76f1cb4a5e6e16e2abe9e3f51f93426363a037",
              tree="executorch main cff6f4dd32"),)


def index_tensor_sizes(self_sizes: Sequence[int], index_sizes: Sequence[int]) -> tuple[int, ...]:
    """``resize_index_tensor_node``: the index's sizes, then ``self``'s after the first."""
    return (*(int(s) for s in index_sizes), *(int(s) for s in self_sizes[1:]))


def resize_index_tensor_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_index_tensor_node`` on numpy arguments, in ``self``'s dtype."""
    x = np.asarray(args["self"])
    return index_tensor_sizes(x.shape, np.shape(single_index(args["indices"]))), x.dtype


def single_index(indices: Sequence[Any]) -> Any:
    """``VK_CHECK_COND(indices_list->size() == 1)``: the one index tensor."""
    if len(indices) != 1:
        raise EtVkRefusal(f"index.Tensor: only one index tensor is supported, got {len(indices)}")
    return indices[0]


def add_index_tensor_node(graph: ComputeGraph, x: Tensor, index: Tensor, out: Tensor) -> None:
    """``add_index_tensor_node``."""
    name = f"index_tensor_{out.spec.storage}_{SUFFIX[out.spec.dtype]}"
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, x, index, graph.meta_ubo(out), graph.meta_ubo(x), graph.meta_ubo(index)],
                   spec={3: out.spec.hashed_layout, 4: x.spec.hashed_layout},
                   resize=lambda: graph.virtual_resize(out, index_tensor_sizes(x.spec.sizes, index.spec.sizes)))


@register_op(OP, output=resize_index_tensor_output, constants=(), ports=PORTS)
def index_tensor(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``index_tensor``: ``out = self[index]`` with one index tensor on dim 0.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor), ``indices`` (a list of one int32 Tensor), by schema name.
        out (Tensor): the output, allocated at its maximal sizes.

    Example::

        index_tensor(graph, {"self": x, "indices": [idx]}, out)
    """
    add_index_tensor_node(graph, args["self"], single_index(args["indices"]), out)
