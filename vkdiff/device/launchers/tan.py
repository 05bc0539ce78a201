"""Launcher for ``aten.tan.default`` through ET-VK's ``tan_*`` shaders.

Ported from ``runtime/graph/ops/impl/Tan.cpp`` (``tan`` → ``add_tan_node``, ``resize_tan_node``):

* no storage choice: variant ``tan_<out dtype>_<out storage>`` (``tan_half_texture3d``, ``tan_float_buffer``);
* bindings out, in, then one UBO: ``numel_ubo(out)`` for buffers, ``logical_limits_ubo(out)`` for textures;
  no push constants, no spec constants;
* ``DynamicDispatchNode`` with ``default_pick_global_wg_size`` (numel or logical limits of out) and
  ``default_pick_local_wg_size``;
* output sizes are the input's (``resize_tan_node``). The shader computes ``tan`` in float32 for both dtypes
  (buffer) or in the texel type (texture: half texels call ``tan`` on ``f16vec4``).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "aten.tan.default"

PORTS = (Port(file="runtime/graph/ops/impl/Tan.cpp", functions=("tan", "add_tan_node", "resize_tan_node"),
              sha256="3cb4be2b2fc2c9ed771b5396716df8a6b3b56daaf9615d03e943cb3f29a1d194",
              tree="executorch main cff6f4dd32"),)


def resize_tan_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_tan_node`` on numpy arguments: the input's sizes and dtype."""
    x = np.asarray(args["self"])
    return x.shape, x.dtype


def add_tan_node(graph: ComputeGraph, x: Tensor, out: Tensor) -> None:
    """``add_tan_node``."""
    name = f"tan_{SUFFIX[out.spec.dtype]}_{out.spec.storage}"
    ubo = graph.numel_ubo(out) if out.spec.storage == "buffer" else graph.logical_limits_ubo(out)
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out), resources=[out, x, ubo],
                   resize=lambda: graph.virtual_resize(out, x.spec.sizes))


@register_op(OP, output=resize_tan_output, constants=(), ports=PORTS)
def tan(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``tan``: ``out = tan(self)`` element-wise.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor, float), by schema name.
        out (Tensor): the output, allocated at its maximal sizes.

    Example::

        tan(graph, {"self": x}, out)
    """
    add_tan_node(graph, args["self"], out)
