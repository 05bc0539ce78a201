"""Launcher for ``et_vk.conv1d_pw.default`` (and the height-packed pointwise route of ``aten.convolution``).

Ported from ``runtime/graph/ops/impl/Conv1dPW.cpp`` (``conv1d_pw``, ``add_conv1d_pw_node``,
``prepack_conv1d_pw_weight``, ``pick_conv1d_pw_shader``, ``pick_conv1d_pw_global_wg_size``,
``resize_conv1d_pw_node``):

* kernel size 1 and groups 1 only (``VK_CHECK_COND``); input and output height packed, in the output's storage;
  stride, padding and dilation are never read: the shader computes ``out[n, :, l]`` from ``in[n, :, l]``;
* weight ``pack_fp_linear_weight_<storage>_<dtype>_<staging>`` over ``[C_out, C_in]`` (texture2d unless past
  ``max_texture2d_dim``; push constants ``N, K, 1, 1``, global ``(N4, K4, 1)``); bias, when present,
  ``prepack_standard`` (output storage, width packed);
* variant ``conv1d_pw[_bias]_<out storage>_<weight storage>_<dtype>``; UBOs ``sizes(in)``, ``sizes(out)``
  (+ ``sizes(bias)``); push constants ``(weight_B = 1, output_min, output_max)``; no spec constants;
* global size ``(ceil(C_out/4), ceil(L/4), N)``, local ``pick_hw_square_wg_size``;
* resize ``resize_conv1d_pw_node``: ``[N, C_out, L]`` (the input's length).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX, prepack_standard
from vkdiff.device.launchers.utils.common import div_up, pick_hw_square_wg_size
from vkdiff.device.launchers.conv1d_dw import check_height_packed
from vkdiff.device.launchers.utils.conv2d_pw import prepack_fp_linear_weight
from vkdiff.device.launchers.utils.conv_utils import FLOAT_MAX, ConvRouteError, params, scalar_or
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.conv1d_pw.default"
PORT = Port(file="runtime/graph/ops/impl/Conv1dPW.cpp",
            functions=("conv1d_pw", "add_conv1d_pw_node", "prepack_conv1d_pw_weight", "pick_conv1d_pw_shader",
                       "pick_conv1d_pw_global_wg_size", "resize_conv1d_pw_node"),
            sha256="195525cf9f0fab21635c0a8e523049abc73b28197dfb0932c4460144d4a511ad",
            tree="executorch main cff6f4dd32")


def output_of(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_conv1d_pw_node``: ``[N, C_out, L]``."""
    x = np.asarray(args["input"])
    return (x.shape[0], np.shape(args["weight"])[0], x.shape[2]), x.dtype


@register_op(OP, output=output_of, constants=("weight", "bias"), ports=(PORT,))
def conv1d_pw(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``conv1d_pw`` + ``add_conv1d_pw_node``: a 1×1 convolution over a height-packed ``[N, C_in, L]``.

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): ``input``, ``weight`` / ``bias`` (TensorRefs), ``stride``, ``padding``, ``dilation`` (unread),
            ``groups`` (must be 1), ``output_min``, ``output_max`` (None: ``∓FLT_MAX``).
        out (Tensor): the output, height packed.

    Example::

        conv1d_pw(graph, {"input": x, "weight": TensorRef(id="w", data=w), "bias": b, "stride": [1],
                          "padding": [0], "dilation": [1], "groups": 1, "output_min": None,
                          "output_max": None}, out)
    """
    x, weight, bias = args["input"], args["weight"], args.get("bias")
    if np.shape(weight.data)[2] != 1:
        raise ConvRouteError("conv1d_pw only supports kernel_size=1")
    if int(args["groups"]) != 1:
        raise ConvRouteError("conv1d_pw only supports groups=1")
    check_height_packed(x, out)
    packed_weight = prepack_fp_linear_weight(graph, weight, "conv1d_pw_weight")
    packed_bias = None if bias is None else prepack_standard(graph, bias, out.spec.storage, "width")
    c_out = out.spec.sizes[1]
    push = params(1, scalar_or(args.get("output_min"), -FLOAT_MAX), scalar_or(args.get("output_max"), FLOAT_MAX),
                  dtype="float32")
    push = params(1) + push[4:]

    def shader() -> str:
        stem = "conv1d_pw" if packed_bias is None else "conv1d_pw_bias"
        return f"{stem}_{out.spec.storage}_{packed_weight.spec.storage}_{SUFFIX[out.spec.dtype]}"

    def global_wg() -> tuple[int, int, int]:
        sizes = out.spec.sizes
        return (div_up(sizes[-2], 4), div_up(sizes[-1], 4), sizes[-3] if len(sizes) >= 3 else 1)

    def resize() -> None:
        graph.virtual_resize(out, (x.spec.sizes[0], c_out, x.spec.sizes[2]))

    tensors = [out, x, packed_weight] + ([] if packed_bias is None else [packed_bias])
    ubos = [graph.sizes_ubo(x), graph.sizes_ubo(out)] + ([] if packed_bias is None else [graph.sizes_ubo(packed_bias)])
    graph.dispatch(shader, global_wg=global_wg, local_wg=lambda: pick_hw_square_wg_size(global_wg()),
                   resources=[*tensors, *ubos], immediates=[push], resize=resize)
