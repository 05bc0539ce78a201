"""Launcher for ``aten.split_with_sizes_copy.default`` (a tuple of outputs) through ET-VK's ``split_*`` shaders.

Ported from ``runtime/graph/ops/impl/Split.cpp`` (``split_with_sizes_copy_default`` →
``add_split_with_sizes_node`` → ``add_split_node`` per output):

* ``VK_CHECK_COND`` that there are as many outputs as split sizes; one dispatch per output;
* no storage choice: variant ``split_<out storage>_<out dtype>``;
* bindings out, in, then ``meta_ubo`` of out and in; no push constants;
* spec constants from id 3: ``dim_whcn`` (``nchw_dim_to_whcn_dim``: normalized), the output's index, its
  offset along ``dim`` (the sum of the split sizes before it, fixed at build), hashed layouts of out and in;
* ``DynamicDispatchNode`` with the default global and local sizes;
* **no resize function** (``nullptr``): each output keeps the sizes it was built with.
  ``split_output`` gives ATen's sizes, for allocation.
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

OP = "aten.split_with_sizes_copy.default"

PORTS = (Port(file="runtime/graph/ops/impl/Split.cpp",
              functions=("split_with_sizes_copy_default", "add_split_with_sizes_node", "add_split_node"),
              sha256="f2db1240518824997388daab3fa002814f31e3fb9625fb764a302adafa89b8da",
              tree="executorch main cff6f4dd32"),)


def split_output(args: Mapping[str, Any], dtype: Any = None) -> list[tuple[tuple[int, ...], Any]]:
    """ATen's sizes of every output (``self`` with ``dim`` set to each split size), for allocation."""
    x = np.asarray(args["self"])
    dim = int(args.get("dim", 0)) % x.ndim
    return [(tuple(int(size) if i == dim else s for i, s in enumerate(x.shape)), x.dtype)
            for size in args["split_sizes"]]


def add_split_node(graph: ComputeGraph, x: Tensor, split_sizes: Sequence[int], dim: int, out: Tensor,
                   split_idx: int) -> None:
    """``add_split_node``."""
    ndim = len(x.spec.sizes)
    dim_whcn = ndim - 1 - dim % ndim
    offset = sum(int(s) for s in split_sizes[:split_idx])
    name = f"split_{out.spec.storage}_{SUFFIX[out.spec.dtype]}"
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, x, graph.meta_ubo(out), graph.meta_ubo(x)],
                   spec={3: dim_whcn, 4: split_idx, 5: offset, 6: out.spec.hashed_layout, 7: x.spec.hashed_layout})


@register_op(OP, output=split_output, constants=(), ports=PORTS)
def split_with_sizes_copy(graph: ComputeGraph, args: Mapping[str, Any], out: Sequence[Tensor]) -> None:
    """``split_with_sizes_copy_default``: ``self`` cut along ``dim`` into pieces of ``split_sizes``.

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): ``self`` (Tensor), ``split_sizes`` (ints), ``dim`` (int), by schema name.
        out (Sequence[Tensor]): one output per split size, allocated at their maximal sizes.

    Example::

        split_with_sizes_copy(graph, {"self": x, "split_sizes": [3, 5], "dim": -1}, (a, b))
    """
    sizes = [ComputeGraph.read_symint(s) for s in args["split_sizes"]]
    if len(out) != len(sizes):
        raise EtVkRefusal(f"split_with_sizes_copy: {len(out)} outputs for {len(sizes)} split sizes")
    for index, tensor in enumerate(out):
        add_split_node(graph, args["self"], sizes, int(args.get("dim", 0)), tensor, index)
