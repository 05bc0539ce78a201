"""Launcher for ``et_vk.grid_priors.default``.

Ported from ``runtime/graph/ops/impl/GridPriors.cpp`` (``grid_priors``, ``add_grid_priors_node``,
``resize_grid_priors_node``):

* variant ``grid_priors_<dtype>`` (texture3d only); the output ``[H·W, 2]`` (the partitioner places it as a
  channels-packed texture; the shader's ``packed_dim`` keeps its default ``C_DIM``: no spec constant is passed);
* bindings: output, UBOs ``sizes(self)``, ``sizes(out)``, ``(int stride, float offset)``;
* global size the output's logical limits, local ``create_local_wg_size``;
* resize ``resize_grid_priors_node``: ``[H·W, 2]`` from the input's last two dims.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.grid_priors.default"
PORT = Port(file="runtime/graph/ops/impl/GridPriors.cpp",
            functions=("grid_priors", "add_grid_priors_node", "resize_grid_priors_node"),
            sha256="9e36c6e9adf63d4897394bbf1f7afba422c190791ae44690441d1f3fc60ef17d",
            tree="executorch main cff6f4dd32")


def resize_grid_priors_sizes(in_sizes) -> tuple[int, int]:
    """``resize_grid_priors_node``'s sizes: ``[H·W, 2]``."""
    return (int(in_sizes[-2]) * int(in_sizes[-1]), 2)


def output_of(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """The output as the resize function sizes it, in the input's dtype."""
    x = np.asarray(args["self"])
    return resize_grid_priors_sizes(x.shape), x.dtype


@register_op(OP, output=output_of, constants=(), ports=(PORT,))
def grid_priors(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``add_grid_priors_node``: ``out[y·W + x] = ((x + offset)·stride, (y + offset)·stride)``.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (only its sizes are read), ``stride`` (int), ``offset`` (float).
        out (Tensor): ``[H·W, 2]``.

    Example::

        grid_priors(graph, {"self": x, "stride": 8, "offset": 0.5}, out)
    """
    x = args["self"]
    param = np.int32(int(args["stride"])).tobytes() + np.float32(float(args["offset"])).tobytes()

    def resize() -> None:
        graph.virtual_resize(out, resize_grid_priors_sizes(x.spec.sizes))

    graph.dispatch(f"grid_priors_{SUFFIX[out.spec.dtype]}", global_wg=lambda: default_global_wg(out),
                   resources=[out, graph.sizes_ubo(x), graph.sizes_ubo(out), graph.uniform(param, "grid_priors")],
                   resize=resize, resize_args=(x,))
