"""Launcher for ``et_vk.q8ta_conv2d_dw.default``: the static-int8 depthwise convolution.

Ported from ``runtime/graph/ops/impl/Q8taConv2dDW.cpp`` (``q8ta_conv2d_dw``, ``add_q8ta_conv2d_dw_node``,
``prepack_quantized_conv2d_dw_weight``, ``pick_q8ta_conv2d_dw_{global,local}_wg_size``,
``resize_q8ta_conv2d_dw_node``). The file's ``add_conv2d_dw_q8ta_q8csw_q8to_4w4c_node`` serves
``QuantizedConvolution.cpp``'s ops, not this one.

* weight ``[KH, KW, OC]`` int8 (``OC`` as stored: the pattern pads it to 4) → ``pack_q8_conv2d_dw_weights_<storage>``:
  int32 ``[KH·KW4, OC4·4]`` (a texel holds 4 kernel columns × 4 channels), global ``(OC4, KH·KW4, 1)``, push
  constants the packed sizes and ``ivec3 (KH, KW, OC)``; texture2d unless past ``max_texture2d_dim``;
  the weight must be 3-D;
* checks: input and output 4C / 4C1W / 4W4C, int8x4; ``groups == C_in``;
* variant ``q8ta_conv2d_dw_float`` (no dot-product variant); bindings output, input, weight, weight sums,
  weight scales, bias, ``BufferMetadata`` of output and input, ``Conv2DParams``; push constants
  ``(input_scale, input_zp, 1 / output_scale, output_zp)``; spec constants ``apply_bias, activation_type,
  hashed_layout(in), hashed_layout(out)`` (ids 3-6);
* global ``(W4, H, C4)``, local ``(8, 1, 8)`` for x, z ≥ 6, ``(64, 1, 1)`` for z < 2, else ``(16, 1, 4)``;
* resize ``resize_q8ta_conv2d_dw_node``: H and W from the current input.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.launchers.utils.common import div_up
from vkdiff.device.launchers.utils.conv_utils import prepack_node
from vkdiff.device.launchers.utils.q8ta_conv_utils import (CONSTANTS, GEOMETRY, Q8TA_CONV2D, SHARED_PORTS, TREE,
                                                     activation_type_from_string, check, check_int8x4_io, checked,
                                                     conv_out_hw, create_conv2d_params, dw_output_of,
                                                     prepack_qparams, qparams_block, resized, route_name, whc,
                                                     with_profile)
from vkdiff.device.launchers.utils.q8_weights import packed_weight_storage
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.q8ta_conv2d_dw.default"
PORT = Port(file="runtime/graph/ops/impl/Q8taConv2dDW.cpp",
            functions=("q8ta_conv2d_dw", "add_q8ta_conv2d_dw_node", "prepack_quantized_conv2d_dw_weight",
                       "pick_q8ta_conv2d_dw_global_wg_size", "pick_q8ta_conv2d_dw_local_wg_size",
                       "resize_q8ta_conv2d_dw_node"),
            sha256="7a171f398dbea19840ae0e9bc3a855ac00aa3559005df4063aac335f8b4a7b84", tree=TREE)
PORTS = (PORT, Q8TA_CONV2D, *SHARED_PORTS)


def prepack_quantized_conv2d_dw_weight(graph: ComputeGraph, weights: TensorRef) -> Tensor:
    """``prepack_quantized_conv2d_dw_weight``: blocks of 4 kernel elements × 4 channels, ``[k4][oc4]``."""
    data = np.asarray(weights.data)
    check(data.ndim == 3, "ndim == 3")
    kh, kw, oc = (int(s) for s in data.shape)
    blocks_k, blocks_oc = div_up(kh * div_up(kw, 4) * 4, 4), div_up(oc, 4)
    storage = packed_weight_storage(graph, blocks_k, blocks_oc * 4)
    packed = graph.add_tensor((blocks_k, blocks_oc * 4), "int32", storage, "width", label="packed_q8_dw_weight")
    prepack_node(graph, f"pack_q8_conv2d_dw_weights_{storage}", data, packed, (blocks_oc, blocks_k, 1),
                 immediates=[packed.spec.sizes_block(), np.array([kh, kw, oc], np.int32).tobytes()])
    return packed


def pick_q8ta_conv2d_dw_global_wg_size(out: Tensor) -> tuple[int, int, int]:
    """``pick_q8ta_conv2d_dw_global_wg_size``: ``(W4, H, C4)``."""
    w, h, c = whc(out)
    return (div_up(w, 4), h, div_up(c, 4))


def pick_q8ta_conv2d_dw_local_wg_size(global_wg: tuple[int, int, int]) -> tuple[int, int, int]:
    """``pick_q8ta_conv2d_dw_local_wg_size``."""
    if global_wg[0] >= 6 and global_wg[2] >= 6:
        return (8, 1, 8)
    if global_wg[2] < 2:
        return (64, 1, 1)
    return (16, 1, 4)


def add_q8ta_conv2d_dw_node(graph: ComputeGraph, x: Tensor, args: Mapping[str, Any], weight: Tensor,
                            qparams: tuple[Tensor, Tensor, Tensor], activation: int, out: Tensor) -> None:
    """``add_q8ta_conv2d_dw_node``."""
    geometry = [args[k] for k in GEOMETRY]
    params = create_conv2d_params(x, out, *geometry, args["groups"])
    check_int8x4_io(x, out)
    check(int(args["groups"]) == int(x.spec.sizes[-3]), "groups_val == in_channels")
    sums, scales, bias = qparams

    def resize() -> None:
        graph.virtual_resize(out, resized(out, conv_out_hw(x.spec.sizes, *geometry)))

    graph.dispatch("q8ta_conv2d_dw_float", global_wg=lambda: pick_q8ta_conv2d_dw_global_wg_size(out),
                   local_wg=lambda: pick_q8ta_conv2d_dw_local_wg_size(pick_q8ta_conv2d_dw_global_wg_size(out)),
                   resources=[out, x, weight, sums, scales, bias, graph.meta_ubo(out), graph.meta_ubo(x),
                              graph.uniform(params.block(), "conv2d_params")],
                   immediates=qparams_block(args),
                   spec={3: int(args.get("bias") is not None), 4: activation, 5: x.spec.hashed_layout,
                         6: out.spec.hashed_layout},
                   resize=resize)


@register_op(OP, output=dw_output_of, constants=CONSTANTS, ports=PORTS)
def q8ta_conv2d_dw(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None,
                   profile: str | None = None) -> None:
    """``q8ta_conv2d_dw``: pack the depthwise weight, prepack the qparams, add the node.

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): ``q8ta_conv2d``'s arguments with ``weights [KH, KW, align4(C)]`` and ``groups == C``.
        out (Tensor): int8x4 output (4C, 4C1W or 4W4C).
        route (str | None): ``dw``; checked.
        profile (str | None): a routing profile (the depthwise shader has no dot-product variant).

    Example::

        q8ta_conv2d_dw(graph, {"x": x, ..., "weights": w_dw, "kernel_size": [3, 3], "groups": 8, ...}, out)
    """
    with_profile(graph, profile)
    activation = activation_type_from_string(args["activation"])
    weight = prepack_quantized_conv2d_dw_weight(graph, args["weights"])
    add_q8ta_conv2d_dw_node(graph, args["x"], args, weight, prepack_qparams(graph, args), activation, out)
    checked(route_name(graph, "dw", dot=False), route)
