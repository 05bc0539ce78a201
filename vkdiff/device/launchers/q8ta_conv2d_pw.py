"""Launcher for ``et_vk.q8ta_conv2d_pw.default``: the static-int8 pointwise (1×1) convolution.

Ported from ``runtime/graph/ops/impl/Q8taConv2dPW.cpp`` (``q8ta_conv2d_pw``, ``add_q8ta_conv2d_pw_node``,
``prepack_quantized_conv2d_pw_weight``, ``pick_q8ta_conv2d_pw_{global,local}_wg_size``,
``resize_q8ta_conv2d_pw_node``, ``resize_q8ta_conv2d_pw_im2col_node``); the im2col route of ``q8ta_conv2d``
(``q8ta_conv2d_im2col.py``) adds the same node on its scratch tensor.

* ``kernel_size``, ``stride``, ``padding``, ``dilation`` and ``groups`` are read and ignored: the op computes a
  1×1, stride-1, ungrouped conv whatever they say; the weight is packed with ``IC`` = the input's channels by
  ``pack_q8_conv2d_weights_<storage>`` (see ``q8ta_conv_utils``);
* checks: input ``PACKED_INT8_4W4C``, output 4C / 4C1W / 4W4C, both int8x4;
* variant ``q8ta_conv2d_pw_float`` with int8 dot product, else ``q8ta_conv2d_pw_fallback_float``; bindings
  output, input, weight, weight sums, weight scales, bias, ``BufferMetadata`` of output and input; push constants
  ``(input_scale, input_zp, 1 / output_scale, output_zp, K4_per_group, OC4_per_group)`` with
  ``K4_per_group = div_up_4(C_in / groups)``, ``OC4_per_group = div_up_4(C_out / groups)`` (groups 1 here);
  spec constants ``apply_bias, activation_type, hashed_layout(out), hashed_layout(in)`` (ids 3-6);
* global ``(C4, W4, H)`` of the output (``TILE_N4 = TILE_M4 = 1``), local ``pick_hw_square_wg_size``;
* resize ``resize_q8ta_conv2d_pw_node``: the output takes the input's H and W (im2col route:
  ``resize_q8ta_conv2d_pw_im2col_node``, H and W of the conv from the original activation).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.launchers.utils.common import div_up, pick_hw_square_wg_size
from vkdiff.device.launchers.utils.q8ta_conv_utils import (CONSTANTS, Q8TA_CONV2D, SHARED_PORTS, TREE,
                                                     activation_type_from_string, check_int8x4_io, checked,
                                                     conv_output_of, dot_product_kernel, prepack_qparams,
                                                     prepack_quantized_conv2d_weight, qparams_block, resized,
                                                     route_name, whc, with_profile)
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.q8ta_conv2d_pw.default"
PORT = Port(file="runtime/graph/ops/impl/Q8taConv2dPW.cpp",
            functions=("q8ta_conv2d_pw", "add_q8ta_conv2d_pw_node", "prepack_quantized_conv2d_pw_weight",
                       "pick_q8ta_conv2d_pw_global_wg_size", "pick_q8ta_conv2d_pw_local_wg_size",
                       "resize_q8ta_conv2d_pw_node", "resize_q8ta_conv2d_pw_im2col_node"),
            sha256="104ea6d5e90f7c0ff86f06d0d709361856240b4414342fd6dce98e5639037e33", tree=TREE)
PORTS = (PORT, Q8TA_CONV2D, *SHARED_PORTS)


def pick_q8ta_conv2d_pw_global_wg_size(out: Tensor) -> tuple[int, int, int]:
    """``pick_q8ta_conv2d_pw_global_wg_size``: ``(C4 / TILE_N4, W4 / TILE_M4, H)``, both tiles 1."""
    w, h, c = whc(out)
    return (div_up(c, 4), div_up(w, 4), h)


def add_q8ta_conv2d_pw_node(graph: ComputeGraph, x: Tensor, args: Mapping[str, Any], weight: Tensor,
                            qparams: tuple[Tensor, Tensor, Tensor], activation: int, out: Tensor, groups: int = 1,
                            resize_hw: Callable[[], tuple[int, int]] | None = None) -> None:
    """``add_q8ta_conv2d_pw_node``; ``resize_hw`` (the im2col route) gives the conv's H, W from its activation."""
    check_int8x4_io(x, out, input_4w4c=True)
    k4_pg, oc4_pg = div_up(int(x.spec.sizes[-3]) // groups, 4), div_up(int(out.spec.sizes[-3]) // groups, 4)
    immediates = qparams_block(args) + np.array([k4_pg, oc4_pg], np.int32).tobytes()
    sums, scales, bias = qparams
    apply_bias = int(args.get("bias") is not None)

    def resize() -> None:
        hw = resize_hw() if resize_hw is not None else tuple(x.spec.sizes[-2:])
        graph.virtual_resize(out, resized(out, hw))

    graph.dispatch(dot_product_kernel(graph, "q8ta_conv2d_pw", scales),
                   global_wg=lambda: pick_q8ta_conv2d_pw_global_wg_size(out),
                   local_wg=lambda: pick_hw_square_wg_size(pick_q8ta_conv2d_pw_global_wg_size(out)),
                   resources=[out, x, weight, sums, scales, bias, graph.meta_ubo(out), graph.meta_ubo(x)],
                   immediates=immediates,
                   spec={3: apply_bias, 4: activation, 5: out.spec.hashed_layout, 6: x.spec.hashed_layout},
                   resize=resize)


@register_op(OP, output=conv_output_of, constants=CONSTANTS, ports=PORTS)
def q8ta_conv2d_pw(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None,
                   profile: str | None = None) -> None:
    """``q8ta_conv2d_pw``: pack the 1×1 weight, prepack the qparams, add the pointwise node.

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): the schema's arguments: ``x`` (int8x4 4W4C), ``weights``, ``weight_sums``,
            ``weight_scales``, ``bias`` (TensorRefs), the qparams, the (ignored) conv geometry, ``activation``.
        out (Tensor): int8x4 output (4C, 4C1W or 4W4C).
        route (str | None): ``pw`` or ``pw_fallback`` (the case's expectation; checked).
        profile (str | None): a routing profile (``no-dot-product``: the ``_fallback`` shader).

    Example::

        q8ta_conv2d_pw(graph, {"x": x, "input_scale": 0.02, "input_zero_point": 3, "weights": w, ...,
                               "activation": "relu"}, out, route="pw")
    """
    with_profile(graph, profile)
    x: Tensor = args["x"]
    activation = activation_type_from_string(args["activation"])
    weight = prepack_quantized_conv2d_weight(graph, args["weights"], int(out.spec.sizes[-3]),
                                             int(x.spec.sizes[-3]), (1, 1))
    add_q8ta_conv2d_pw_node(graph, x, args, weight, prepack_qparams(graph, args), activation, out)
    checked(route_name(graph, "pw"), route)
