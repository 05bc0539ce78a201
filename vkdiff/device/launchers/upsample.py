"""Launchers for ``aten.upsample_nearest2d.vec`` and ``aten.upsample_bilinear2d.vec`` (``Upsample.cpp``).

Ported from ``runtime/graph/ops/impl/Upsample.cpp`` (``upsample_nearest2d``, ``upsample_bilinear2d``,
``add_upsample_nearest2d_node``, ``resize_upsample_nearest2d_node``):

* texture3d only (variants ``upsample_nearest2d_<dtype>`` / ``upsample_bilinear2d_<dtype>``, dtype of
  the output); the sizes are read as logical limits, so only channels packing keeps x = W, y = H;
* exactly one of ``output_size`` and ``scale_factors``; the host checks the output's limits against
  them (``VK_CHECK_COND``: ``output_size`` equal to the limits, or ``in * scale == out`` in float);
* ``recip_scales`` (``vec2``, a params buffer fixed at build): ``in / out`` per axis from the limits,
  or ``(in - 1) / (out - 1)`` with ``align_corners`` (float arithmetic, as the C++);
* bindings out, in, UBOs ``logical_limits`` of out and in, ``recip_scales``; spec constant id 3
  ``align_corners`` (always 0 for nearest);
* global ``default_pick_global_wg_size`` (output logical limits), local default;
* output: the input's NCHW sizes with H, W from ``output_size``, or multiplied by the scales and
  truncated to integers (``resize_upsample_nearest2d_node``, 4-D input).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

PORTS = (Port(file="runtime/graph/ops/impl/Upsample.cpp",
              functions=("upsample_nearest2d", "upsample_bilinear2d", "add_upsample_nearest2d_node",
                         "resize_upsample_nearest2d_node"),
              sha256="1baf228f610c0ba012f58b8521436b9c342d97eebd7090aa75fe74f730de79de",
              tree="executorch main cff6f4dd32"),)

F32 = np.float32


def upsample_out_sizes(sizes, output_size, scale_factors) -> tuple[int, ...]:
    """``resize_upsample_nearest2d_node``: dims 2 and 3 from ``output_size``, else ``int64 *= double``."""
    out = [int(s) for s in sizes]
    if output_size is not None:
        out[2], out[3] = int(output_size[0]), int(output_size[1])
    else:
        out[2], out[3] = int(out[2] * float(scale_factors[0])), int(out[3] * float(scale_factors[1]))
    return tuple(out)


def recip_scales(in_limits, out_limits, output_size, scale_factors, align_corners: bool) -> bytes:
    """The host arithmetic of ``add_upsample_nearest2d_node``: checks, then ``recip_scales`` as float32.

    Raises:
        ValueError: neither or both of ``output_size`` and ``scale_factors``, or a ``VK_CHECK_COND`` fails.
    """
    if (output_size is None) == (scale_factors is None):
        raise EtVkRefusal("upsample: must provide exactly one of output_sizes or scale_factors")
    out_w, out_h = int(out_limits[0]), int(out_limits[1])
    if output_size is not None:
        if int(output_size[1]) != out_w or int(output_size[0]) != out_h:
            raise EtVkRefusal(f"upsample: output_size {list(output_size)} differs from the output limits "
                             f"{list(out_limits)} (VK_CHECK_COND out_width == out_limits[0u])")
    else:
        scale_x, scale_y = F32(scale_factors[1]), F32(scale_factors[0])
        if F32(in_limits[0]) * scale_x != F32(out_w) or F32(in_limits[1]) * scale_y != F32(out_h):
            raise EtVkRefusal(f"upsample: input limits {list(in_limits)} times scales {list(scale_factors)} "
                             f"differ from the output limits {list(out_limits)} (VK_CHECK_COND in the C++)")
    with np.errstate(divide="ignore", invalid="ignore"):
        if align_corners:
            recip = (F32(in_limits[0] - 1) / F32(out_w - 1), F32(in_limits[1] - 1) / F32(out_h - 1))
        else:
            recip = (F32(in_limits[0]) / F32(out_w), F32(in_limits[1]) / F32(out_h))
    return np.array(recip, np.float32).tobytes()


def add_upsample_nearest2d_node(graph: ComputeGraph, mode: str, x: Tensor, output_size, align_corners,
                                scale_factors, out: Tensor) -> None:
    """``add_upsample_nearest2d_node`` (``mode``: ``nearest`` or ``bilinear``)."""
    align = int(bool(align_corners))
    recip = recip_scales(x.spec.logical_limits, out.spec.logical_limits, output_size, scale_factors, bool(align))
    graph.dispatch(f"upsample_{mode}2d_{SUFFIX[out.spec.dtype]}", global_wg=lambda: default_global_wg(out),
                   resources=[out, x, graph.logical_limits_ubo(out), graph.logical_limits_ubo(x),
                              graph.uniform(recip, "recip_scales")],
                   spec={3: align},
                   resize=lambda: graph.virtual_resize(out, upsample_out_sizes(x.spec.sizes, output_size,
                                                                               scale_factors)))


def resize_upsample_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """The output the graph allocates: ``resize_upsample_nearest2d_node``'s sizes, the input's dtype."""
    x = np.asarray(args["input"])
    return upsample_out_sizes(x.shape, args.get("output_size"), args.get("scale_factors")), x.dtype


@register_op("aten.upsample_nearest2d.vec", output=resize_upsample_output, constants=(), ports=PORTS)
def upsample_nearest2d(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``upsample_nearest2d``: ``align_corners`` is absent (``kDummyValueRef``: 0).

    Example::

        upsample_nearest2d(graph, {"input": x, "output_size": [8, 12], "scale_factors": None}, out)
    """
    add_upsample_nearest2d_node(graph, "nearest", args["input"], args.get("output_size"), False,
                                args.get("scale_factors"), out)


@register_op("aten.upsample_bilinear2d.vec", output=resize_upsample_output, constants=(), ports=PORTS)
def upsample_bilinear2d(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``upsample_bilinear2d``."""
    add_upsample_nearest2d_node(graph, "bilinear", args["input"], args.get("output_size"),
                                args.get("align_corners"), args.get("scale_factors"), out)
