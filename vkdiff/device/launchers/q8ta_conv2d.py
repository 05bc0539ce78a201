"""Launchers for ``et_vk.q8ta_conv2d.default`` and ``et_vk.q8ta_conv2d_general.default``: static-int8 conv2d.

Ported from ``runtime/graph/ops/impl/Q8taConv2d.cpp`` (``q8ta_conv2d``, ``q8ta_conv2d_general``,
``add_q8ta_conv2d_node``, ``pick_q8ta_conv2d_{global,local}_wg_size``, ``resize_q8ta_conv2d_node``,
``prepack_quantized_conv2d_weight``). ``q8ta_conv2d`` routes:

=============  ==========================================================================  ========================
route          when (``ICg = C_in / groups``, spatial = ``H_out·W_out``)                    nodes
=============  ==========================================================================  ========================
``im2col``     ``ICg % 4 == 0`` and (Mali, or groups 1 and (``ICg ≥ 32`` or spatial ≤ 4096))  ``q8ta_conv2d_im2col.py``
``general``    otherwise (and always for ``q8ta_conv2d_general``)                           ``q8ta_conv2d[_fallback]``
=============  ==========================================================================  ========================

The general node:

* weight ``prepack_quantized_conv2d_weight`` (``pack_q8_conv2d_weights_<storage>``), qparams as every q8ta conv;
* checks: groups > 1 needs ``ICg % 4 == 0``; input and output 4C / 4C1W / 4W4C, int8x4;
* variant ``q8ta_conv2d_float`` with int8 dot product, else ``q8ta_conv2d_fallback_float``; bindings output,
  input, weight, weight sums, weight scales, bias, ``BufferMetadata`` of output and input, ``Conv2DParams``;
  push constants ``(input_scale, input_zp, 1 / output_scale, output_zp)``; spec constants ``apply_bias,
  activation_type, hashed_layout(in), hashed_layout(out)`` (ids 3-6);
* global ``(W4, H, C4)`` of the output, local by size: ``(8, 1, 8)`` for H ≥ 100 with x, z ≥ 24; ``(4, 2, 8)`` for
  x ≥ 4, y ≥ 2, z ≥ 8; ``(8, 1, 8)`` for x, z ≥ 6; ``(1, 1, 64)`` for x < 2; ``(64, 1, 1)`` for z < 2; else
  ``(16, 1, 4)``;
* resize ``resize_q8ta_conv2d_node``: H and W from the current input (N and C stay as allocated).

The shaders compute batch 0 only (thread z is the channel block, ``outp_tidx.data[3] = 0``).
"""

from __future__ import annotations

from typing import Any, Mapping

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.launchers import q8ta_conv2d_im2col
from vkdiff.device.launchers.utils.common import div_up
from vkdiff.device.launchers.utils.q8ta_conv_utils import (CONSTANTS, GEOMETRY, Q8TA_CONV2D, SHARED_PORTS,
                                                     activation_type_from_string, check, check_int8x4_io, checked,
                                                     conv_out_hw, conv_output_of, create_conv2d_params,
                                                     dot_product_kernel, prepack_qparams,
                                                     prepack_quantized_conv2d_weight, qparams_block, resized,
                                                     route_name, whc, with_profile)
from vkdiff.device.launchers.registry import register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.q8ta_conv2d.default"
GENERAL = "et_vk.q8ta_conv2d_general.default"
PORTS = (Q8TA_CONV2D, *q8ta_conv2d_im2col.PORTS, *SHARED_PORTS)


def pick_q8ta_conv2d_global_wg_size(out: Tensor) -> tuple[int, int, int]:
    """``pick_q8ta_conv2d_global_wg_size``: one thread per 4 widths × 4 channels, ``(W4, H, C4)``."""
    w, h, c = whc(out)
    return (div_up(w, 4), h, div_up(c, 4))


def pick_q8ta_conv2d_local_wg_size(out: Tensor, global_wg: tuple[int, int, int]) -> tuple[int, int, int]:
    """``pick_q8ta_conv2d_local_wg_size``."""
    x, y, z = global_wg
    if whc(out)[1] >= 100 and x >= 24 and z >= 24:
        return (8, 1, 8)
    if x >= 4 and y >= 2 and z >= 8:
        return (4, 2, 8)
    if x >= 6 and z >= 6:
        return (8, 1, 8)
    if x < 2:
        return (1, 1, 64)
    if z < 2:
        return (64, 1, 1)
    return (16, 1, 4)


def add_q8ta_conv2d_node(graph: ComputeGraph, x: Tensor, args: Mapping[str, Any], weight: Tensor,
                         qparams: tuple[Tensor, Tensor, Tensor], activation: int, out: Tensor) -> None:
    """``add_q8ta_conv2d_node``."""
    geometry = [args[k] for k in GEOMETRY]
    params = create_conv2d_params(x, out, *geometry, args["groups"])
    if params.groups > 1:
        check(params.in_channels_per_group % 4 == 0, "conv_params.in_channels_per_group % 4 == 0")
    check_int8x4_io(x, out)
    sums, scales, bias = qparams

    def resize() -> None:
        graph.virtual_resize(out, resized(out, conv_out_hw(x.spec.sizes, *geometry)))

    graph.dispatch(dot_product_kernel(graph, "q8ta_conv2d", scales),
                   global_wg=lambda: pick_q8ta_conv2d_global_wg_size(out),
                   local_wg=lambda: pick_q8ta_conv2d_local_wg_size(out, pick_q8ta_conv2d_global_wg_size(out)),
                   resources=[out, x, weight, sums, scales, bias, graph.meta_ubo(out), graph.meta_ubo(x),
                              graph.uniform(params.block(), "conv2d_params")],
                   immediates=qparams_block(args),
                   spec={3: int(args.get("bias") is not None), 4: activation, 5: x.spec.hashed_layout,
                         6: out.spec.hashed_layout},
                   resize=resize)


def general_conv(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``q8ta_conv2d_general``: pack the weight for the general shader, prepack the qparams, add the node."""
    x: Tensor = args["x"]
    activation = activation_type_from_string(args["activation"])
    icg = int(x.spec.sizes[-3]) // int(args["groups"])
    weight = prepack_quantized_conv2d_weight(graph, args["weights"], int(out.spec.sizes[-3]), icg,
                                             args["kernel_size"])
    add_q8ta_conv2d_node(graph, x, args, weight, prepack_qparams(graph, args), activation, out)


def use_im2col(graph: ComputeGraph, x: Tensor, out: Tensor, groups: int) -> bool:
    """``q8ta_conv2d``'s route: im2col needs ``ICg % 4 == 0``; off Mali also groups 1 and depth or a small output."""
    icg = int(x.spec.sizes[-3]) // groups
    if icg % 4:
        return False
    if graph.route.vendor == "arm":
        return True
    w, h, _ = whc(out)
    return groups == 1 and (icg >= 32 or h * w <= 4096)


@register_op(OP, output=conv_output_of, constants=CONSTANTS, ports=PORTS)
def q8ta_conv2d(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None,
                profile: str | None = None) -> None:
    """``q8ta_conv2d``: the im2col route or the general shader.

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): the schema's arguments: ``x`` (int8x4 4C, 4C1W or 4W4C), ``weights``
            ``[OC, align4(KH·KW·ICg)]``, ``weight_sums``, ``weight_scales``, ``bias`` (TensorRefs), the
            qparams, ``kernel_size``, ``stride``, ``padding``, ``dilation``, ``groups``, ``activation``.
        out (Tensor): int8x4 output (4C, 4C1W or 4W4C).
        route (str | None): ``general``, ``im2col`` (``_fallback`` without int8 dot product); checked.
        profile (str | None): a routing profile (``mali``: im2col whenever ``ICg % 4 == 0``;
            ``no-dot-product``: the ``_fallback`` shaders).

    Example::

        q8ta_conv2d(graph, {"x": x, "input_scale": 0.02, ..., "kernel_size": [3, 3], "groups": 1,
                            "activation": "none"}, out, route="im2col")
    """
    with_profile(graph, profile)
    if use_im2col(graph, args["x"], out, int(args["groups"])):
        q8ta_conv2d_im2col.im2col_conv(graph, args, out)
        checked(route_name(graph, "im2col"), route)
        return
    general_conv(graph, args, out)
    checked(route_name(graph, "general"), route)


@register_op(GENERAL, output=conv_output_of, constants=CONSTANTS, ports=(Q8TA_CONV2D, *SHARED_PORTS))
def q8ta_conv2d_general(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None,
                        profile: str | None = None) -> None:
    """``q8ta_conv2d_general``: the general shader whatever the shape; arguments as :func:`q8ta_conv2d`.

    Example::

        q8ta_conv2d_general(graph, {...}, out, route="general_fallback", profile="no-dot-product")
    """
    with_profile(graph, profile)
    general_conv(graph, args, out)
    checked(route_name(graph, "general"), route)
