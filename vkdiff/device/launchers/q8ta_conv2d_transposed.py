"""Launcher for ``et_vk.q8ta_conv2d_transposed.default``: the static-int8 transposed convolution.

Ported from ``runtime/graph/ops/impl/Q8taConv2dTransposed.cpp`` (``q8ta_conv2d_transposed``,
``add_q8ta_conv2d_transposed_node``, ``pick_q8ta_conv2d_transposed_{global,local}_wg_size``,
``resize_q8ta_conv2d_transposed_node``).

* weight ``[OC, align4(KH·KW·ICg)]`` (the pattern's regrouped transposed weight) packed as a direct conv's by
  ``prepack_quantized_conv2d_weight``; qparams as every q8ta conv;
* checks: dilation 1 (``"q8ta_conv2d_transposed only supports dilation=1"``); groups > 1 needs ``ICg % 4 == 0``;
  input and output 4C / 4C1W / 4W4C, int8x4;
* variant ``q8ta_conv2d_transposed_float`` with int8 dot product, else ``q8ta_conv2d_transposed_fallback_float``;
  bindings, push constants and spec constants as ``q8ta_conv2d``'s general node (``output_padding`` is not
  passed to the shader);
* global ``(W4, H, C4)``, local ``(8, 1, 8)`` for x, z ≥ 6, ``(1, 1, 64)`` for x < 2, ``(64, 1, 1)`` for z < 2,
  else ``(16, 1, 4)``;
* resize ``resize_q8ta_conv2d_transposed_node``: ``(in − 1)·s − 2·p + d·(k − 1) + output_padding + 1``.
"""

from __future__ import annotations

from typing import Any, Mapping

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.launchers.utils.common import div_up
from vkdiff.device.launchers.utils.q8ta_conv_utils import (CONSTANTS, GEOMETRY, Q8TA_CONV2D, SHARED_PORTS, TREE,
                                                     activation_type_from_string, check, check_int8x4_io, checked,
                                                     create_conv2d_params, dot_product_kernel, prepack_qparams,
                                                     prepack_quantized_conv2d_weight, qparams_block, resized,
                                                     route_name, transposed_out_hw, transposed_output_of, whc,
                                                     with_profile)
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.q8ta_conv2d_transposed.default"
PORT = Port(file="runtime/graph/ops/impl/Q8taConv2dTransposed.cpp",
            functions=("q8ta_conv2d_transposed", "add_q8ta_conv2d_transposed_node",
                       "pick_q8ta_conv2d_transposed_global_wg_size", "pick_q8ta_conv2d_transposed_local_wg_size",
                       "resize_q8ta_conv2d_transposed_node"),
            sha256="2226083427b8b404b73f290335fbb93e73eb68b6b207fb03b3f9f0e2f63b60b8", tree=TREE)
PORTS = (PORT, Q8TA_CONV2D, *SHARED_PORTS)


def pick_q8ta_conv2d_transposed_global_wg_size(out: Tensor) -> tuple[int, int, int]:
    """``pick_q8ta_conv2d_transposed_global_wg_size``: ``(W4, H, C4)``."""
    w, h, c = whc(out)
    return (div_up(w, 4), h, div_up(c, 4))


def pick_q8ta_conv2d_transposed_local_wg_size(global_wg: tuple[int, int, int]) -> tuple[int, int, int]:
    """``pick_q8ta_conv2d_transposed_local_wg_size``: local y always 1."""
    if global_wg[0] >= 6 and global_wg[2] >= 6:
        return (8, 1, 8)
    if global_wg[0] < 2:
        return (1, 1, 64)
    if global_wg[2] < 2:
        return (64, 1, 1)
    return (16, 1, 4)


def add_q8ta_conv2d_transposed_node(graph: ComputeGraph, x: Tensor, args: Mapping[str, Any], weight: Tensor,
                                    qparams: tuple[Tensor, Tensor, Tensor], activation: int, out: Tensor) -> None:
    """``add_q8ta_conv2d_transposed_node``."""
    geometry = [args[k] for k in GEOMETRY]
    params = create_conv2d_params(x, out, *geometry, args["groups"])
    check(params.dilation == (1, 1), "q8ta_conv2d_transposed only supports dilation=1")
    if params.groups > 1:
        check(params.in_channels_per_group % 4 == 0, "conv_params.in_channels_per_group % 4 == 0")
    check_int8x4_io(x, out)
    sums, scales, bias = qparams

    def resize() -> None:
        hw = transposed_out_hw(x.spec.sizes, *geometry, args["output_padding"])
        graph.virtual_resize(out, resized(out, hw))

    global_wg = lambda: pick_q8ta_conv2d_transposed_global_wg_size(out)  # noqa: E731
    graph.dispatch(dot_product_kernel(graph, "q8ta_conv2d_transposed", scales), global_wg=global_wg,
                   local_wg=lambda: pick_q8ta_conv2d_transposed_local_wg_size(global_wg()),
                   resources=[out, x, weight, sums, scales, bias, graph.meta_ubo(out), graph.meta_ubo(x),
                              graph.uniform(params.block(), "conv2d_params")],
                   immediates=qparams_block(args),
                   spec={3: int(args.get("bias") is not None), 4: activation, 5: x.spec.hashed_layout,
                         6: out.spec.hashed_layout},
                   resize=resize)


@register_op(OP, output=transposed_output_of, constants=CONSTANTS, ports=PORTS)
def q8ta_conv2d_transposed(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None,
                           profile: str | None = None) -> None:
    """``q8ta_conv2d_transposed``: pack the regrouped weight as a direct conv's, prepack the qparams, add the node.

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): the schema's arguments (``q8ta_conv2d``'s plus ``output_padding``); ``weights``
            ``[OC, align4(KH·KW·ICg)]``.
        out (Tensor): int8x4 output (4C, 4C1W or 4W4C).
        route (str | None): ``transposed`` or ``transposed_fallback``; checked.
        profile (str | None): a routing profile (``no-dot-product``: the ``_fallback`` shader).

    Example::

        q8ta_conv2d_transposed(graph, {"x": x, ..., "stride": [2, 2], "output_padding": [1, 1], ...}, out)
    """
    with_profile(graph, profile)
    x: Tensor = args["x"]
    activation = activation_type_from_string(args["activation"])
    icg = int(x.spec.sizes[-3]) // int(args["groups"])
    weight = prepack_quantized_conv2d_weight(graph, args["weights"], int(out.spec.sizes[-3]), icg,
                                             args["kernel_size"])
    add_q8ta_conv2d_transposed_node(graph, x, args, weight, prepack_qparams(graph, args), activation, out)
    checked(route_name(graph, "transposed"), route)
