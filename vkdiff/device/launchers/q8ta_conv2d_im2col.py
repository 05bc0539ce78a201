"""Launcher for ``et_vk.q8ta_conv2d_im2col.default``: static-int8 conv as im2col then the pointwise GEMM.

Ported from ``runtime/graph/ops/impl/Q8taConv2dIm2Col.cpp`` (``q8ta_conv2d_im2col``, ``add_q8ta_im2col_node``,
``calculate_q8ta_im2col_sizes``, ``pick_q8ta_im2col_{global,local}_wg_size``, ``resize_q8ta_im2col_node``);
``q8ta_conv2d`` (``q8ta_conv2d.py``) routes here. ``_general`` and ``_im2col`` are registered by the C++ only
(``custom_ops_lib.py`` defines neither): their schemas are ``q8ta_conv2d``'s.

* weight ``prepack_quantized_linear_weight`` (8-bit, ``[OC, K_per_group]`` → ``pack_q8_linear_weight_<storage>``),
  qparams as every q8ta conv (``q8ta_conv_utils``);
* scratch ``TmpTensor`` int8x4 ``PACKED_INT8_4W4C`` buffer ``[K, H_out, align4(W_out)]`` with
  ``K = align4(ICg·KH·KW)·groups``;
* ``q8ta_im2col``: checks input 4C / 4C1W / 4W4C, scratch 4W4C, ``ICg % 4 == 0``; bindings scratch, input,
  ``BufferMetadata`` of both, ``Conv2DParams``; push constant the input zero point (out-of-bounds taps);
  spec constants ``1, hashed_layout(scratch), hashed_layout(in)``; global ``(K4·W4·H, 1, 1)`` of the scratch,
  local ``(64, 1, 1)``; resize ``resize_q8ta_im2col_node`` (the scratch from the current input);
* then ``add_q8ta_conv2d_pw_node`` on the scratch with ``groups`` (``K4_per_group``, ``OC4_per_group``) and
  ``resize_q8ta_conv2d_pw_im2col_node``.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.launchers import q8ta_conv2d_pw
from vkdiff.device.launchers.utils.common import div_up
from vkdiff.device.launchers.utils.q8ta_conv_utils import (CONSTANTS, GEOMETRY, QUANTIZED_LINEAR, SHARED_PORTS, TREE,
                                                     activation_type_from_string, check, checked, conv_out_hw,
                                                     conv_output_of, create_conv2d_params, packed_dim_info_ok,
                                                     prepack_qparams, route_name,
                                                     with_profile)
from vkdiff.device.launchers.utils.q8_weights import prepack_quantized_linear_weight
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.q8ta_conv2d_im2col.default"
PORT = Port(file="runtime/graph/ops/impl/Q8taConv2dIm2Col.cpp",
            functions=("q8ta_conv2d_im2col", "add_q8ta_im2col_node", "calculate_q8ta_im2col_sizes",
                       "pick_q8ta_im2col_global_wg_size", "pick_q8ta_im2col_local_wg_size",
                       "resize_q8ta_im2col_node"),
            sha256="337d43a48be0226e0e2cc3456e1dd096d98b7189257b838701d618a046ec6e9d", tree=TREE)
PORTS = (PORT, q8ta_conv2d_pw.PORT, QUANTIZED_LINEAR, *SHARED_PORTS)


def calculate_q8ta_im2col_sizes(in_sizes, out_hw: tuple[int, int], kernel_size, groups: int) -> tuple[int, int, int]:
    """``calculate_q8ta_im2col_sizes``: ``[align4(ICg·KH·KW)·groups, H_out, align4(W_out)]``."""
    icg = int(in_sizes[-3]) // int(groups)
    k = div_up(icg * int(kernel_size[0]) * int(kernel_size[1]), 4) * 4 * int(groups)
    return (k, int(out_hw[0]), div_up(int(out_hw[1]), 4) * 4)


def pick_q8ta_im2col_global_wg_size(im2col: Tensor) -> tuple[int, int, int]:
    """``pick_q8ta_im2col_global_wg_size``: one thread per 4×4 block of the scratch."""
    k, h, w = (int(s) for s in im2col.spec.sizes)
    return (div_up(k, 4) * div_up(w, 4) * h, 1, 1)


def add_q8ta_im2col_node(graph: ComputeGraph, x: Tensor, args: Mapping[str, Any], out: Tensor,
                         im2col: Tensor) -> None:
    """``add_q8ta_im2col_node``."""
    check(packed_dim_info_ok(x), "q8ta_conv2d_check_packed_dim_info(graph.packed_dim_info_of(packed_int8_input))")
    check(packed_dim_info_ok(im2col, (4,)),
          "q8ta_conv2d_check_4w4c_packed_dim_info(graph.packed_dim_info_of(packed_int8_im2col))")
    geometry = [args[k] for k in GEOMETRY]
    params = create_conv2d_params(x, out, *geometry, args["groups"])
    check(params.in_channels_per_group % 4 == 0, "conv_params.in_channels_per_group % 4 == 0")

    def resize() -> None:
        hw = conv_out_hw(x.spec.sizes, *geometry)
        graph.virtual_resize(im2col, calculate_q8ta_im2col_sizes(x.spec.sizes, hw, args["kernel_size"],
                                                                 int(args["groups"])))

    graph.dispatch("q8ta_im2col", global_wg=lambda: pick_q8ta_im2col_global_wg_size(im2col), local_wg=(64, 1, 1),
                   resources=[im2col, x, graph.meta_ubo(im2col), graph.meta_ubo(x),
                              graph.uniform(params.block(), "conv2d_params")],
                   immediates=np.array([args["input_zero_point"]], np.int32).tobytes(),
                   spec={3: 1, 4: im2col.spec.hashed_layout, 5: x.spec.hashed_layout}, resize=resize)


def im2col_conv(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``q8ta_conv2d_im2col``: pack, im2col into the scratch, then the pointwise GEMM."""
    x: Tensor = args["x"]
    weight = prepack_quantized_linear_weight(graph, args["weights"])
    qparams = prepack_qparams(graph, args)
    activation = activation_type_from_string(args["activation"])
    geometry = [args[k] for k in GEOMETRY]
    sizes = calculate_q8ta_im2col_sizes(x.spec.sizes, tuple(out.spec.sizes[-2:]), args["kernel_size"],
                                        int(args["groups"]))
    im2col = graph.add_tensor(sizes, "int8", "buffer", "int8x4_4w4c", temporary=True, label="q8ta_im2col")
    add_q8ta_im2col_node(graph, x, args, out, im2col)
    q8ta_conv2d_pw.add_q8ta_conv2d_pw_node(graph, im2col, args, weight, qparams, activation, out,
                                           groups=int(args["groups"]),
                                           resize_hw=lambda: conv_out_hw(x.spec.sizes, *geometry))


@register_op(OP, output=conv_output_of, constants=CONSTANTS, ports=PORTS)
def q8ta_conv2d_im2col(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None,
                       profile: str | None = None) -> None:
    """``q8ta_conv2d_im2col`` for any conv the C++ accepts (``ICg % 4 == 0``, groups included).

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): ``q8ta_conv2d``'s arguments; ``x`` int8x4 (4C, 4C1W or 4W4C), ``weights``
            ``[OC, align4(KH·KW·ICg)]``.
        out (Tensor): int8x4 output (4C, 4C1W or 4W4C).
        route (str | None): ``im2col`` or ``im2col_fallback``; checked.
        profile (str | None): a routing profile (``no-dot-product``: the pointwise GEMM's ``_fallback``).

    Example::

        q8ta_conv2d_im2col(graph, {"x": x, ..., "kernel_size": [3, 3], "groups": 2, ...}, out, route="im2col")
    """
    with_profile(graph, profile)
    im2col_conv(graph, args, out)
    checked(route_name(graph, "im2col"), route)
