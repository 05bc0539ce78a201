"""Launcher for ``aten.native_group_norm.default``: ``group_norm_reduce_texture`` then ``group_norm_texture``.

Ported from ``runtime/graph/ops/impl/GroupNorm.cpp`` (``native_group_norm`` → ``add_native_group_norm_node``):

* in and out must be standard channels-packed textures, mean and rstd contiguous buffers
  (``VK_CHECK_COND``; the graph places them so: ``placements``); weight and bias constants,
  prepacked width-packed in the input's storage (``prepack_standard``);
* push constant ``{int32 group; float epsilon}`` for both dispatches;
* ``group_norm_reduce_texture_<dtype>`` writes mean and rstd: bindings mean, rstd, in, UBOs ``strides`` and
  ``numel`` of mean, ``logical_limits`` and ``sizes`` of in; spec constant 3: mean's hashed layout;
  global the default pick of mean (a buffer: ``(numel, 1, 1)``), local ``(1, 64, 1)``
  (``group_norm_local_wg_size``); no resize function;
* ``group_norm_texture_<dtype>`` normalizes: bindings out, in, weight, bias, mean, rstd, UBOs
  ``logical_limits`` and ``sizes`` of out, ``logical_limits`` of the prepacked weight, ``strides`` of
  mean; spec constant 3: in's hashed layout; default global and local picks on out;
* resize (second node): out takes in's sizes, mean and rstd ``[N, group]``.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.compute import create_local_wg_size
from vkdiff.device.graph.staging import prepack_standard
from vkdiff.device.launchers.utils.common import default_global_wg, dtype_suffix
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

PORTS = (Port(file="runtime/graph/ops/impl/GroupNorm.cpp",
              functions=("group_norm_local_wg_size", "resize_group_norm_texture_node", "add_native_group_norm_node",
                         "native_group_norm"),
              sha256="b9b85d54f0624dc5f4ee06b3713dede64500317eb8d6e0d9356013ba981693e7",
              tree="executorch main cff6f4dd32"),)


def group_norm_output(args: Mapping[str, Any], dtype: Any = None) -> list[tuple[tuple[int, ...], Any]]:
    """``(out, mean, rstd)``: in's sizes, then ``[N, group]`` twice; the input's dtype."""
    x = np.asarray(args["input"])
    stats = (int(args["N"]), int(args["group"]))
    return [(x.shape, x.dtype), (stats, x.dtype), (stats, x.dtype)]


def is_contiguous_buffer(tensor: Tensor) -> bool:
    """``is_contiguous_buffer_tensor``: a buffer whose dim order is the identity."""
    return tensor.spec.storage == "buffer" and list(tensor.spec.dim_order) == list(range(len(tensor.spec.sizes)))


def check_group_norm_args(x: Tensor, out: Tensor, mean: Tensor, rstd: Tensor) -> None:
    """``native_group_norm``'s ``VK_CHECK_COND``s on placements."""
    for name, tensor in (("input", x), ("out", out)):
        if tensor.spec.storage == "buffer" or tensor.spec.info.packed_dim != 2:
            raise EtVkRefusal(f"native_group_norm: {name} must be a channels-packed texture, got "
                             f"{tensor.spec.layout}-packed {tensor.spec.storage}")
    for name, tensor in (("mean", mean), ("rstd", rstd)):
        if not is_contiguous_buffer(tensor):
            raise EtVkRefusal(f"native_group_norm: {name} must be a contiguous buffer, got {tensor.spec.layout}-packed "
                             f"{tensor.spec.storage}")


@register_op("aten.native_group_norm.default", output=group_norm_output, constants=("weight", "bias"), ports=PORTS,
             placements={"out1": "buffer", "out2": "buffer"})
def native_group_norm(graph: ComputeGraph, args: Mapping[str, Any], outs: tuple[Tensor, Tensor, Tensor],
                      route: str | None = None) -> None:
    """``native_group_norm`` → ``add_native_group_norm_node``: two dispatches (statistics, then normalization).

    Args:
        graph (ComputeGraph): the graph the node joins.
        args (Mapping[str, Any]): ``input`` (Tensor ``[N, C, H, W]``), ``weight``/``bias`` (TensorRefs ``[C]``),
            ``N``, ``C``, ``HxW``, ``group`` (ints), ``eps`` (float).
        outs (tuple[Tensor, Tensor, Tensor]): out, mean, rstd.
        route (str | None): the route a kernel case expects (only ``texture``).
    """
    x = args["input"]
    out, mean, rstd = outs
    if route not in (None, "texture"):
        raise ValueError(f"native_group_norm: GroupNorm.cpp has one route (texture), the case expects {route}")
    if args.get("weight") is None or args.get("bias") is None:
        raise EtVkRefusal("native_group_norm requires weight and bias constants (VK_CHECK_COND val_is_tref)")
    check_group_norm_args(x, out, mean, rstd)
    weight = prepack_standard(graph, args["weight"], x.spec.storage, "width")
    bias = prepack_standard(graph, args["bias"], x.spec.storage, "width")
    group = int(args["group"])
    params = np.array([group], np.int32).tobytes() + np.array([float(args["eps"])], np.float32).tobytes()
    suffix = dtype_suffix(out.spec.dtype)
    graph.dispatch(f"group_norm_reduce_texture_{suffix}", global_wg=lambda: default_global_wg(mean),
                   local_wg=lambda: (1, 64, 1),
                   resources=[mean, rstd, x, graph.strides_ubo(mean), graph.numel_ubo(mean),
                              graph.logical_limits_ubo(x), graph.sizes_ubo(x)],
                   spec={3: mean.spec.hashed_layout}, immediates=params)

    def resize_group_norm_texture_node() -> None:
        graph.virtual_resize(out, x.spec.sizes)
        graph.virtual_resize(mean, (x.spec.sizes[0], group))
        graph.virtual_resize(rstd, (x.spec.sizes[0], group))

    graph.dispatch(f"group_norm_texture_{suffix}", global_wg=lambda: default_global_wg(out),
                   local_wg=lambda: create_local_wg_size(default_global_wg(out)),
                   resources=[out, x, weight, bias, mean, rstd, graph.logical_limits_ubo(out), graph.sizes_ubo(out),
                              graph.logical_limits_ubo(weight), graph.strides_ubo(mean)],
                   spec={3: x.spec.hashed_layout}, immediates=params, resize=resize_group_norm_texture_node)
