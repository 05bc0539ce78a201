"""Launcher for ``et_vk.conv1d_dw.default`` (and the height-packed depthwise route of ``aten.convolution``).

Ported from ``runtime/graph/ops/impl/Conv1dDW.cpp`` (``conv1d_dw``, ``add_conv1d_dw_node``,
``pick_conv1d_dw_global_wg_size``, ``resize_conv1d_dw_node``):

* input and output height packed (``VK_CHECK_COND``), in the output's storage (texture3d or buffer);
* weight ``prepack_standard`` (output storage, channels packed); bias, when present, ``prepack_standard``
  (output storage, width packed);
* variant ``conv1d_dw[_bias]_<storage>_<dtype>``; UBOs ``sizes(in)``, ``sizes(out)``; push constants
  ``(K, stride, padding, dilation)`` then ``(output_min, output_max)`` (default ``±FLT_MAX``); no spec constants;
* global size ``(ceil(C/4), L_out, N)``, local ``create_local_wg_size``;
* resize ``resize_conv1d_dw_node``: ``[N, C, calc_out_size(L, K, stride, padding, dilation)]``.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX, prepack_standard
from vkdiff.device.launchers.utils.common import div_up
from vkdiff.device.launchers.utils.conv_utils import FLOAT_MAX, KERNEL_UTILS, ConvRouteError, calc_out_size, params, scalar_or
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.conv1d_dw.default"
PORT = Port(file="runtime/graph/ops/impl/Conv1dDW.cpp",
            functions=("conv1d_dw", "add_conv1d_dw_node", "pick_conv1d_dw_global_wg_size", "resize_conv1d_dw_node"),
            sha256="9c0204d57d81dbf9873c8cf3e1eab6b3b786c0854907fc1eec0fb85a5ec5c392",
            tree="executorch main cff6f4dd32")


def resize_conv1d_dw_sizes(in_sizes, weight_sizes, stride, padding, dilation) -> tuple[int, int, int]:
    """``resize_conv1d_dw_node``'s sizes."""
    length = calc_out_size(int(in_sizes[2]), int(weight_sizes[2]), int(stride[0]), int(padding[0]), int(dilation[0]))
    return (int(in_sizes[0]), int(in_sizes[1]), length)


def output_of(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """The output as ``resize_conv1d_dw_node`` sizes it."""
    x = np.asarray(args["input"])
    return resize_conv1d_dw_sizes(x.shape, np.shape(args["weight"]), args["stride"], args["padding"],
                                  args["dilation"]), x.dtype


def check_height_packed(x: Tensor, out: Tensor) -> None:
    """``VK_CHECK_COND(packed_dim_of(in/out) == kHeightDim)``."""
    if x.spec.layout != "height" or out.spec.layout != "height":
        raise ConvRouteError(f"conv1d pw/dw: input and output must be height packed, got {x.spec.layout}, "
                             f"{out.spec.layout}")


@register_op(OP, output=output_of, constants=("weight", "bias"), ports=(PORT, KERNEL_UTILS))
def conv1d_dw(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``conv1d_dw`` + ``add_conv1d_dw_node``: a depthwise 1-D convolution over a height-packed ``[N, C, L]``.

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): ``input``, ``weight`` / ``bias`` (TensorRefs), ``stride``, ``padding``, ``dilation``,
            ``groups``, ``output_min``, ``output_max`` (None: ``∓FLT_MAX``).
        out (Tensor): the output, height packed.

    Example::

        conv1d_dw(graph, {"input": x, "weight": TensorRef(id="w", data=w), "bias": None, "stride": [1],
                          "padding": [1], "dilation": [1], "groups": 8, "output_min": None,
                          "output_max": None}, out)
    """
    x, weight, bias = args["input"], args["weight"], args.get("bias")
    check_height_packed(x, out)
    storage = out.spec.storage
    packed_weight = prepack_standard(graph, weight, storage, "channels")
    packed_bias = None if bias is None else prepack_standard(graph, bias, storage, "width")
    wsizes = np.shape(weight.data)
    stride, padding, dilation = args["stride"], args["padding"], args["dilation"]
    push = params(wsizes[2], int(stride[0]), int(padding[0]), int(dilation[0]))
    clamp = params(scalar_or(args.get("output_min"), -FLOAT_MAX), scalar_or(args.get("output_max"), FLOAT_MAX),
                   dtype="float32")
    name = f"conv1d_dw{'' if bias is None else '_bias'}_{storage}_{SUFFIX[out.spec.dtype]}"

    def global_wg() -> tuple[int, int, int]:
        sizes = out.spec.sizes
        return (div_up(sizes[-2], 4), sizes[-1], sizes[-3] if len(sizes) >= 3 else 1)

    def resize() -> None:
        graph.virtual_resize(out, resize_conv1d_dw_sizes(x.spec.sizes, wsizes, stride, padding, dilation))

    tensors = [out, x, packed_weight] + ([] if packed_bias is None else [packed_bias])
    graph.dispatch(name, global_wg=global_wg, resources=[*tensors, graph.sizes_ubo(x), graph.sizes_ubo(out)],
                   immediates=[push, clamp], resize=resize)
