"""Launcher for ``aten.grid_sampler_2d.default``.

Ported from ``runtime/graph/ops/impl/GridSampler2d.cpp`` (``grid_sampler_2d``, ``add_grid_sampler_2d_node``,
``resize_grid_sampler_2d_node``):

* only bilinear interpolation (mode 0), border padding (1) and ``align_corners = true`` (``VK_CHECK_COND``:
  any other value is refused at graph build, and the partitioner keeps such nodes on the CPU);
* input and output standard channels-packed textures, the grid a contiguous buffer of the output's dtype
  (``VK_CHECK_COND``s, ``is_contiguous_buffer_tensor``);
* variant ``grid_sampler_2d_<dtype>``; UBOs ``meta(out)``, ``meta(in)`` (``TextureMetadata``); spec constant the
  output's hashed layout; global size the output's logical limits, local ``create_local_wg_size``;
* resize ``resize_grid_sampler_2d_node``: ``[N, C, grid H, grid W]``.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "aten.grid_sampler_2d.default"
PORT = Port(file="runtime/graph/ops/impl/GridSampler2d.cpp",
            functions=("grid_sampler_2d", "add_grid_sampler_2d_node", "resize_grid_sampler_2d_node"),
            sha256="45e79ec7a05b7e3d3b6c68ae837ff1fdeedd2688b0d2d2afb6850d5e5b45c041",
            tree="executorch main cff6f4dd32")


class GridSamplerConfigError(ValueError):
    """A ``VK_CHECK_COND`` of ``add_grid_sampler_2d_node`` refused the configuration."""


def resize_grid_sampler_2d_sizes(in_sizes, grid_sizes) -> tuple[int, int, int, int]:
    """``resize_grid_sampler_2d_node``'s sizes: ``[N, C, Ho, Wo]``."""
    return (int(in_sizes[0]), int(in_sizes[1]), int(grid_sizes[1]), int(grid_sizes[2]))


def output_of(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """The output as the resize function sizes it, in the input's dtype."""
    x = np.asarray(args["input"])
    return resize_grid_sampler_2d_sizes(x.shape, np.shape(args["grid"])), x.dtype


def check_grid_sampler_2d(args: Mapping[str, Any], x: Tensor, grid: Tensor, out: Tensor) -> None:
    """The ``VK_CHECK_COND``s of ``add_grid_sampler_2d_node``, in order."""
    checks = [
        (int(args["interpolation_mode"]) == 0, "Vulkan grid_sampler_2d only supports bilinear interpolation"),
        (int(args["padding_mode"]) == 1, "Vulkan grid_sampler_2d only supports border padding"),
        (bool(args["align_corners"]), "Vulkan grid_sampler_2d requires align_corners=true"),
        (x.spec.storage == "texture3d" and x.spec.layout == "channels",
         "Vulkan grid_sampler_2d requires input to be a channels-packed texture"),
        (out.spec.storage == "texture3d" and out.spec.layout == "channels",
         "Vulkan grid_sampler_2d requires output to be a channels-packed texture"),
        (grid.spec.storage == "buffer" and grid.spec.layout == "width",
         "Vulkan grid_sampler_2d requires grid to be a contiguous buffer"),
        (grid.spec.dtype == out.spec.dtype, "Vulkan grid_sampler_2d requires grid and input to share dtype"),
    ]
    for ok, message in checks:
        if not ok:
            raise GridSamplerConfigError(message)


@register_op(OP, output=output_of, constants=(), ports=(PORT,), placements={"grid": "buffer:width"})
def grid_sampler_2d(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``add_grid_sampler_2d_node``: bilinear, border-padded, corner-aligned sampling of ``input`` at ``grid``.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``input`` (channels-packed texture ``[N, C, H, W]``), ``grid`` (contiguous buffer
            ``[N, Ho, Wo, 2]``), ``interpolation_mode``, ``padding_mode``, ``align_corners``.
        out (Tensor): ``[N, C, Ho, Wo]``, channels-packed texture.

    Example::

        grid_sampler_2d(graph, {"input": x, "grid": g, "interpolation_mode": 0, "padding_mode": 1,
                                "align_corners": True}, out)
    """
    x, grid = args["input"], args["grid"]
    check_grid_sampler_2d(args, x, grid, out)

    def resize() -> None:
        graph.virtual_resize(out, resize_grid_sampler_2d_sizes(x.spec.sizes, grid.spec.sizes))

    graph.dispatch(f"grid_sampler_2d_{SUFFIX[out.spec.dtype]}", global_wg=lambda: default_global_wg(out),
                   resources=[out, x, grid, graph.meta_ubo(out), graph.meta_ubo(x)], spec={3: out.spec.hashed_layout},
                   resize=resize)
