"""Launcher for ``aten.native_layer_norm.default`` through ``native_layer_norm_{buffer|texture3d}_<dtype>``.

Ported from ``runtime/graph/ops/impl/NativeLayerNorm.cpp`` (``native_layer_norm`` →
``add_native_layer_norm_node``); ET-VK writes all three outputs (out, mean, rstd):

* ``normalized_shape`` of one dim only, weight and bias required (``VK_THROW``); both prepacked like
  the input (``prepack_standard_like``: its storage and layout, the constant's own dtype);
* variant ``native_layer_norm_<out storage>_<out dtype>``; the texture route needs in and out to share
  the packed dim (case option ``route``: ``buffer`` / ``texture``);
* bindings out, mean, rstd, in, weight, bias, then ``meta_ubo`` of out and in (buffer: and of mean);
* push constant ``epsilon`` (float); spec constant 3: the input's hashed layout;
* global: buffer ``(1, numel(mean), 1)`` with local ``(64, 1, 1)`` (one row per workgroup); texture the
  default pick (out's logical limits, ``create_local_wg_size``);
* resize: out takes in's sizes, mean and rstd in's sizes with the normalized dims 1
  (``resize_native_layer_norm_node``, ``calc_out_mean_sizes``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.compute import create_local_wg_size
from vkdiff.device.graph.staging import prepack_standard
from vkdiff.device.launchers.utils.common import default_global_wg, dtype_suffix
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

PORTS = (Port(file="runtime/graph/ops/impl/NativeLayerNorm.cpp",
              functions=("calc_out_mean_sizes", "resize_native_layer_norm_node", "layer_norm_buffer_global_wg_size",
                         "layer_norm_buffer_local_wg_size", "add_native_layer_norm_node", "native_layer_norm"),
              sha256="733cc8a0fb90f17d4dd3e1418749f827e9544f0593408d7e463044bd27b8b1ac",
              tree="executorch main cff6f4dd32"),)


def calc_out_mean_sizes(sizes: Sequence[int], normalized_dims: int) -> list[int]:
    """``calc_out_mean_sizes``: the last ``normalized_dims`` sizes become 1."""
    out = list(sizes)
    for i in range(normalized_dims):
        out[len(out) - i - 1] = 1
    return out


def layer_norm_output(args: Mapping[str, Any], dtype: Any = None) -> list[tuple[tuple[int, ...], Any]]:
    """``(out, mean, rstd)``: in's sizes, then ``calc_out_mean_sizes``; the input's dtype."""
    x = np.asarray(args["input"])
    stats = tuple(calc_out_mean_sizes(x.shape, len(args["normalized_shape"])))
    return [(x.shape, x.dtype), (stats, x.dtype), (stats, x.dtype)]


def add_native_layer_norm_node(graph: ComputeGraph, x: Tensor, normalized_shape: Sequence[int],
                               weight_data: TensorRef | None, bias_data: TensorRef | None, eps: float,
                               outs: tuple[Tensor, Tensor, Tensor], route: str | None = None) -> None:
    """``add_native_layer_norm_node``.

    Raises:
        ValueError: what the C++ refuses (more than one normalized dim, no weight or bias, a texture
            output packed along another dim than the input), or a case expecting another route.
    """
    if len(normalized_shape) > 1:
        raise EtVkRefusal("native_layer_norm only supports normalized_shape with dim == 1")
    if weight_data is None or bias_data is None:
        raise EtVkRefusal("native_layer_norm requires weight and bias to be non-None")
    weight = prepack_standard(graph, weight_data, x.spec.storage, x.spec.layout)
    bias = prepack_standard(graph, bias_data, x.spec.storage, x.spec.layout)
    out, mean, rstd = outs
    buffer = x.spec.storage == "buffer"
    picked = "buffer" if buffer else "texture"
    if route is not None and route != picked:
        raise ValueError(f"native_layer_norm: NativeLayerNorm.cpp takes route {picked}, the case expects {route}")
    if not buffer and x.spec.info.packed_dim != out.spec.info.packed_dim:
        raise EtVkRefusal("native_layer_norm: input and output must share the packed dim (check_same_packed_dim)")
    ubos = [graph.meta_ubo(out), graph.meta_ubo(x)] + ([graph.meta_ubo(mean)] if buffer else [])

    def resize_native_layer_norm_node() -> None:
        stats = calc_out_mean_sizes(x.spec.sizes, len(normalized_shape))
        graph.virtual_resize(out, x.spec.sizes)
        graph.virtual_resize(mean, stats)
        graph.virtual_resize(rstd, stats)

    if buffer:
        global_wg, local_wg = (lambda: (1, mean.spec.numel, 1)), (lambda: (64, 1, 1))
    else:
        global_wg = lambda: default_global_wg(out)  # noqa: E731
        local_wg = lambda: create_local_wg_size(default_global_wg(out))  # noqa: E731
    graph.dispatch(f"native_layer_norm_{out.spec.storage}_{dtype_suffix(out.spec.dtype)}", global_wg=global_wg,
                   local_wg=local_wg, resources=[out, mean, rstd, x, weight, bias, *ubos],
                   spec={3: x.spec.hashed_layout}, immediates=np.array([eps], np.float32).tobytes(),
                   resize=resize_native_layer_norm_node)


@register_op("aten.native_layer_norm.default", output=layer_norm_output, constants=("weight", "bias"), ports=PORTS)
def native_layer_norm(graph: ComputeGraph, args: Mapping[str, Any], outs: tuple[Tensor, Tensor, Tensor],
                      route: str | None = None) -> None:
    """``native_layer_norm(input, normalized_shape, weight, bias, eps) -> (out, mean, rstd)``.

    Args:
        graph (ComputeGraph): the graph the node joins.
        args (Mapping[str, Any]): ``input`` (Tensor), ``normalized_shape`` (one int), ``weight`` and ``bias``
            (TensorRefs), ``eps`` (float).
        outs (tuple[Tensor, Tensor, Tensor]): out, mean, rstd.
        route (str | None): the route a kernel case expects (``buffer`` / ``texture``).
    """
    add_native_layer_norm_node(graph, args["input"], list(args["normalized_shape"]), args.get("weight"),
                               args.get("bias"), float(args["eps"]), outs, route)
