"""Launcher for ``aten.pixel_shuffle.default`` through ET-VK's ``pixel_shuffle_*`` shaders.

Ported from ``runtime/graph/ops/impl/PixelShuffle.cpp`` (``pixel_shuffle`` → ``add_pixel_shuffle_node``,
``resize_pixel_shuffle_node``):

* checks at build: ``r >= 1``, rank ≥ 3, channels divisible by ``r * r``;
* no storage choice: variant ``pixel_shuffle_<out storage>_<out dtype>``;
* bindings out, in, then ``meta_ubo`` of out and in; no push constants;
* spec constants from id 3: hashed layouts of out and in, then ``r``;
* ``DynamicDispatchNode`` with the default global and local sizes; resize args ``upscale_factor``;
* output sizes (``resize_pixel_shuffle_node``): ``[..., C / r², H * r, W * r]``.
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

OP = "aten.pixel_shuffle.default"

PORTS = (Port(file="runtime/graph/ops/impl/PixelShuffle.cpp",
              functions=("pixel_shuffle", "add_pixel_shuffle_node", "resize_pixel_shuffle_node"),
              sha256="706b60be3a10e1a6eef88be8b9ff1f7aa1fbefa5045f7608650116c9d7f65789",
              tree="executorch main cff6f4dd32"),)


def pixel_shuffle_sizes(in_sizes: Sequence[int], r: int) -> tuple[int, ...]:
    """``resize_pixel_shuffle_node`` (``VK_CHECK_COND(ndim >= 3)``)."""
    sizes = [int(s) for s in in_sizes]
    if len(sizes) < 3:
        raise EtVkRefusal(f"pixel_shuffle: rank must be >= 3, got sizes {sizes}")
    sizes[-3] //= r * r
    sizes[-2] *= r
    sizes[-1] *= r
    return tuple(sizes)


def resize_pixel_shuffle_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    x = np.asarray(args["self"])
    return pixel_shuffle_sizes(x.shape, int(args["upscale_factor"])), x.dtype


def add_pixel_shuffle_node(graph: ComputeGraph, x: Tensor, r: int, out: Tensor) -> None:
    """``add_pixel_shuffle_node``."""
    sizes = x.spec.sizes
    if r < 1 or len(sizes) < 3 or sizes[-3] % (r * r):
        raise EtVkRefusal(f"pixel_shuffle: needs r >= 1, rank >= 3 and channels divisible by r*r; got r={r}, "
                         f"sizes {list(sizes)}")
    name = f"pixel_shuffle_{out.spec.storage}_{SUFFIX[out.spec.dtype]}"
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, x, graph.meta_ubo(out), graph.meta_ubo(x)],
                   spec={3: out.spec.hashed_layout, 4: x.spec.hashed_layout, 5: r},
                   resize=lambda: graph.virtual_resize(out, pixel_shuffle_sizes(x.spec.sizes, r)))


@register_op(OP, output=resize_pixel_shuffle_output, constants=(), ports=PORTS)
def pixel_shuffle(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``pixel_shuffle``: ``[*, C·r², H, W] → [*, C, H·r, W·r]``.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor, rank ≥ 3), ``upscale_factor`` (int), by schema name.
        out (Tensor): the output, allocated at its maximal sizes.

    Example::

        pixel_shuffle(graph, {"self": x, "upscale_factor": 2}, out)
    """
    add_pixel_shuffle_node(graph, args["self"], int(args["upscale_factor"]), out)
