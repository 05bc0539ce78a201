"""Launcher for ``aten.gather.default`` through ET-VK's ``gather_*`` shaders.

Ported from ``runtime/graph/ops/impl/Gather.cpp`` (``gather`` → ``add_gather_node``, ``resize_gather_node``):

* no storage choice: variant ``gather_<out storage>_<out dtype>``; the index tensor is ``int32`` (the
  shaders declare ``int``; ET-VK serializes int64 indices as int32);
* bindings out, self, index, then ``meta_ubo`` of out, self, index; no push constants;
* spec constants from id 3: ``dim_whcn = ndim(self) - dim - 1`` (``dim`` as given: the C++ does not
  normalize a negative ``dim``), then hashed layouts of out and self;
* ``DynamicDispatchNode`` with the default global and local sizes;
* output sizes are the index's (``resize_gather_node``); ``sparse_grad`` is ignored.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "aten.gather.default"

PORTS = (Port(file="runtime/graph/ops/impl/Gather.cpp", functions=("gather", "add_gather_node", "resize_gather_node"),
              sha256="7d1227e5f2284e63c001126cc46d4a1656278e32419db25de79d298effd4d6c9",
              tree="executorch main cff6f4dd32"),)


def resize_gather_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_gather_node`` on numpy arguments: the index's sizes in ``self``'s dtype."""
    return np.shape(args["index"]), np.asarray(args["self"]).dtype


def add_gather_node(graph: ComputeGraph, x: Tensor, dim: int, index: Tensor, out: Tensor) -> None:
    """``add_gather_node``."""
    name = f"gather_{out.spec.storage}_{SUFFIX[out.spec.dtype]}"
    dim_whcn = len(x.spec.sizes) - dim - 1
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, x, index, graph.meta_ubo(out), graph.meta_ubo(x), graph.meta_ubo(index)],
                   spec={3: dim_whcn, 4: out.spec.hashed_layout, 5: x.spec.hashed_layout},
                   resize=lambda: graph.virtual_resize(out, index.spec.sizes))


@register_op(OP, output=resize_gather_output, constants=(), ports=PORTS)
def gather(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``gather``: ``out[i][j][k] = self[index[i][j][k]][j][k]`` along ``dim``.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor), ``dim`` (int), ``index`` (int32 Tensor), ``sparse_grad``, by schema name.
        out (Tensor): the output (the index's sizes), allocated at its maximal sizes.

    Example::

        gather(graph, {"self": x, "dim": 1, "index": idx}, out)
    """
    add_gather_node(graph, args["self"], int(args["dim"]), args["index"], out)
