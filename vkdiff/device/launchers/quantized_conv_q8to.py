"""Launchers for ``et_vk.conv2d_q8ta_q8csw_q8to`` and ``_q8to_dw``: int8x4 activations in and out, int8 weights.

Ported from ``runtime/graph/ops/impl/QuantizedConvolution.cpp`` (``conv2d_q8ta_q8csw_q8to`` → ``static_quantized_
conv2d_impl``, ``is_pointwise``, ``is_s1p0d1_pointwise``, ``should_use_im2col``, ``calculate_packed_int8_input_
im2col_sizes``, ``add_input_im2col_packed_int8_node``, ``im2col_packed_int8_{global,local}_wg_size``,
``add_conv2d_q8ta_q8csw_q8to_node``, ``add_conv2d_q8ta_q8csw_q8to_4w4c_node``, ``pick_static_quantized_conv2d_
{global,local}_wg_size``), ``Q8taConv2dDW.cpp`` (``prepack_quantized_conv2d_dw_weight``,
``add_conv2d_dw_q8ta_q8csw_q8to_4w4c_node``, ``int8_conv2d_dw_global_wg_size``, ``resize_q8ta_conv2d_dw_node``)
and ``Q8taConv2d.cpp`` (``prepack_quantized_conv2d_weight``; its ``add_q8ta_conv2d_node`` is ``q8ta_conv2d.py``'s).
Both ops are the same C++ function. Routes
(option ``route``, checked), by ``groups``, the int8x4 layouts of input and output and the kernel:

===========  ====================================================  ============================================
route        when                                                  shaders
===========  ====================================================  ============================================
``dw``       ``groups == C_in`` (any layout)                       ``pack_q8_conv2d_dw_weights_<w>``,
                                                                   ``conv2d_dw_q8ta_q8csw_q8to_<io>_<w>_float``
``pw``       4W4C in and out, 1×1 kernel, ``is_s1p0d1_pointwise``  ``pack_q8_linear_weight_<w>``,
                                                                   ``conv2d_q8ta_q8csw_q8to_linear_tiled_<io>_
                                                                   <w>_float`` reading the input as its im2col
``im2col``   4W4C, ``should_use_im2col`` (1×1, or Kh·Kw ≤ 10 and    ``im2col_packed_int8_<io>`` into a 4W4C
             groups 1), not ``pw``                                  ``[K, Ho, align4(Wo)]`` scratch, then as ``pw``
``direct``   4W4C otherwise                                        ``pack_q8_conv2d_weights_<w>``,
                                                                   ``conv2d_q8ta_q8csw_q8to_<io>_<w>_float``
``general``  another layout: 4C, 4C1W (4W, 4H4W are refused)         ``pack_q8_conv2d_weights_<w>``,
                                                                   ``q8ta_conv2d[_fallback]_float`` through
                                                                   ``q8ta_conv2d.add_q8ta_conv2d_node``
===========  ====================================================  ============================================

* ``is_s1p0d1_pointwise`` as written: a pair fails only when *both* entries differ (``stride[0] != 1 &&
  stride[1] != 1``), so a 1×1 conv with stride ``[1, 2]`` or padding ``[0, 1]`` takes ``pw``;
* packed weights are texture2d unless past ``max-texture-dimension-2d`` (then buffer, for which the q8to yaml
  generates no variant); ``pack_q8_conv2d_weights`` blocks ``[align4(IC/g)/4·Kh, Kw·align4(OC)]`` with push
  constants the packed sizes and ``(OC, Kh, Kw, IC/g)``; ``pack_q8_conv2d_dw_weights`` blocks
  ``[Kh·align4(Kw)/4, align4(OC)]``, push constants the packed sizes and ``(Kh, Kw, OC)``; weight sums,
  scales and bias are ``prepack_standard`` buffers (a missing bias: an empty dummy, ``apply_bias = 0``);
* push constants ``(s_x, z_x, 1/s_out, z_out)`` (``(1/s_x, z_x)`` for the im2col); spec constants
  ``GenerateSpecConstants``; UBOs output then input (im2col) sizes;
* global sizes: GEMM/direct ``(ceil(OC/8 or /4), ceil(Wo/4), Ho)`` (8 for ``linear`` shaders), local
  ``pick_hw_square_wg_size``; im2col ``(K/4·W4·Ho, 1, 1)``, local ``(64, 1, 1)``; dw ``(ceil(OC/4)·ceil(Wo/4)·Ho,
  1, 1)``, local ``create_local_wg_size``;
* only the dw and general nodes have resize functions: below the bound the other routes keep the build-time
  output sizes.

The int8x4 staging shader writes no word past the tensor's sizes, so padded lanes of a 4W4C block hold whatever
the buffer held (vkdiff's poison), as in ET-VK.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.compute import create_local_wg_size
from vkdiff.device.graph.staging import SUFFIX, prepack_standard
from vkdiff.device.launchers.utils.common import div_up, pick_hw_square_wg_size, val_at
from vkdiff.device.launchers.linear import check_route
from vkdiff.device.launchers.q8ta_conv2d import add_q8ta_conv2d_node
from vkdiff.device.launchers.quantized_conv import (COMMON_PORT, CONVOLUTION_PORT, LINEAR_PORT, TREE, Conv2DParams,
                                                    conv_out_sizes, create_conv2d_params, prepack_bias, spec_constants)
from vkdiff.device.launchers.utils.q8_weights import prepack_quantized_linear_weight
from vkdiff.device.launchers.q8ta_conv2d_dw import prepack_quantized_conv2d_dw_weight
from vkdiff.device.launchers.utils.q8ta_conv_utils import prepack_quantized_conv2d_weight
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.resources import Tensor

OP = "et_vk.conv2d_q8ta_q8csw_q8to.default"
OP_DW = "et_vk.conv2d_q8ta_q8csw_q8to_dw.default"
OPTIMIZED_LAYOUT = "int8x4_4w4c"
ACTIVATION_NONE = 0
"""``ActivationType::kNone``, which ``add_conv2d_q8ta_q8csw_q8to_node`` passes to the general node."""

PORTS = (
    Port(file=CONVOLUTION_PORT.file, sha256=CONVOLUTION_PORT.sha256, tree=TREE,
         functions=("conv2d_q8ta_q8csw_q8to", "static_quantized_conv2d_impl", "is_pointwise", "is_s1p0d1_pointwise",
                    "should_use_im2col", "calculate_packed_int8_input_im2col_sizes",
                    "add_input_im2col_packed_int8_node", "im2col_packed_int8_global_wg_size",
                    "im2col_packed_int8_local_wg_size", "add_conv2d_q8ta_q8csw_q8to_node",
                    "add_conv2d_q8ta_q8csw_q8to_4w4c_node", "pick_static_quantized_conv2d_global_wg_size",
                    "pick_static_quantized_conv2d_local_wg_size", "create_conv2d_params", "GenerateSpecConstants")),
    Port(file="runtime/graph/ops/impl/Q8taConv2dDW.cpp",
         functions=("prepack_quantized_conv2d_dw_weight", "add_conv2d_dw_q8ta_q8csw_q8to_4w4c_node",
                    "int8_conv2d_dw_global_wg_size", "resize_q8ta_conv2d_dw_node"),
         sha256="7a171f398dbea19840ae0e9bc3a855ac00aa3559005df4063aac335f8b4a7b84", tree=TREE),
    Port(file="runtime/graph/ops/impl/Q8taConv2d.cpp",
         functions=("prepack_quantized_conv2d_weight", "add_q8ta_conv2d_node"),
         sha256="26a4ba46a8a74dba410b2ba0152d7c67d0e43f244b6468fb945ccb68434f50a7", tree=TREE),
    LINEAR_PORT, COMMON_PORT,
)


def is_pointwise(kernel_size) -> bool:
    """``is_pointwise``: a 1×1 kernel."""
    return int(kernel_size[0]) == 1 and int(kernel_size[1]) == 1


def is_s1p0d1_pointwise(args: Mapping[str, Any]) -> bool:
    """``is_s1p0d1_pointwise`` as the C++ writes it: each pair is rejected only when both entries differ."""
    if not is_pointwise(args["kernel_size"]):
        return False
    for name, want in (("stride", 1), ("padding", 0), ("dilation", 1)):
        a, b = (int(v) for v in args[name])
        if a != want and b != want:
            return False
    return True


def should_use_im2col(kernel_size, groups: int) -> bool:
    """``should_use_im2col``: always for 1×1, never past 10 kernel elements, else for ungrouped convs."""
    taps = int(kernel_size[0]) * int(kernel_size[1])
    if taps == 1:
        return True
    if taps > 10:
        return False
    return int(groups) == 1


def _push(args: Mapping[str, Any]) -> bytes:
    """``(s_x, z_x, 1/s_out, z_out)`` as the C++ extracts them (float32 scales, ``1.0f / s_out``)."""
    inv = np.float32(1.0) / np.float32(args["output_scale"])
    return (np.array([args["input_scale"]], np.float32).tobytes() + np.array([args["input_zero_point"]], np.int32)
            .tobytes() + np.array([inv], np.float32).tobytes() + np.array([args["output_zero_point"]], np.int32)
            .tobytes())


def dw_out_sizes(x: Tensor, out: Tensor, args: Mapping[str, Any]) -> tuple[int, ...]:
    """``resize_q8ta_conv2d_dw_node``: H and W from the current input, N and C as allocated."""
    return conv_out_sizes(x.spec.sizes, args, val_at(-3, out.spec.sizes))


def add_conv2d_dw_q8ta_q8csw_q8to_4w4c_node(graph: ComputeGraph, args: Mapping[str, Any], x: Tensor, out: Tensor,
                                           bound: list[Tensor], p: Conv2DParams, apply_bias: bool) -> None:
    """``add_conv2d_dw_q8ta_q8csw_q8to_4w4c_node``: one 4W×4C output block per invocation, with a resize."""
    if p.groups != val_at(-3, x.spec.sizes):
        raise EtVkRefusal(f"VK_CHECK_COND(groups_val == in_channels) failed: groups {p.groups}, "
                          f"C_in {val_at(-3, x.spec.sizes)}")
    weight, scales = bound[0], bound[2]
    shader = f"conv2d_dw_q8ta_q8csw_q8to_{out.storage}_{weight.storage}_{SUFFIX[scales.spec.dtype]}"

    def global_wg() -> tuple[int, int, int]:
        o = out.spec.sizes
        return (div_up(val_at(-3, o), 4) * div_up(val_at(-1, o), 4) * val_at(-2, o), 1, 1)

    graph.dispatch(shader, global_wg=global_wg, local_wg=lambda: create_local_wg_size(global_wg()),
                   spec=spec_constants(p, int(apply_bias)), immediates=_push(args),
                   resources=[out, x, *bound, graph.sizes_ubo(out), graph.sizes_ubo(x)],
                   resize=lambda: graph.virtual_resize(out, dw_out_sizes(x, out, args)))


def calculate_packed_int8_input_im2col_sizes(out: Tensor, p: Conv2DParams) -> tuple[int, int, int]:
    """``calculate_packed_int8_input_im2col_sizes``: ``[K, Ho, align4(Wo)]``."""
    o = out.spec.sizes
    return (p.K, val_at(-2, o), -(-val_at(-1, o) // 4) * 4)


def add_input_im2col_packed_int8_node(graph: ComputeGraph, args: Mapping[str, Any], x: Tensor, out: Tensor,
                                      im2col: Tensor, p: Conv2DParams) -> None:
    """``add_input_im2col_packed_int8_node``: the int8 windows gathered into a 4W4C ``[K, Ho, W4·4]`` tensor."""
    k, h, w = (val_at(i, im2col.spec.sizes) for i in (-3, -2, -1))
    global_wg = (div_up(k, 4) * div_up(w, 4) * h, 1, 1)
    inv = np.float32(1.0) / np.float32(args["input_scale"])
    graph.dispatch(f"im2col_packed_int8_{im2col.storage}", global_wg=global_wg, local_wg=(64, 1, 1),
                   spec=spec_constants(p),
                   immediates=np.array([inv], np.float32).tobytes() + np.array([args["input_zero_point"]],
                                                                               np.int32).tobytes(),
                   resources=[im2col, x, graph.sizes_ubo(im2col), graph.sizes_ubo(out), graph.sizes_ubo(x)])


def static_conv2d_global_wg_size(shader: str, out: Tensor) -> tuple[int, int, int]:
    """``pick_static_quantized_conv2d_global_wg_size``: (C tiles of 8 for ``linear`` shaders else 4, W/4, H)."""
    o = out.spec.sizes
    per_tile = 8 if "linear" in shader else 4
    return (div_up(val_at(-3, o), per_tile), div_up(val_at(-1, o), 4), val_at(-2, o))


def add_conv2d_q8ta_q8csw_q8to_4w4c_node(graph: ComputeGraph, args: Mapping[str, Any], im2col: Tensor, out: Tensor,
                                        bound: list[Tensor], p: Conv2DParams, apply_bias: bool, use_im2col: bool
                                        ) -> None:
    """``add_conv2d_q8ta_q8csw_q8to_4w4c_node``: the tiled GEMM over the im2col (or input) or the direct conv."""
    weight, scales = bound[0], bound[2]
    stem = "conv2d_q8ta_q8csw_q8to_linear_tiled" if use_im2col else "conv2d_q8ta_q8csw_q8to"
    shader = f"{stem}_{out.storage}_{weight.storage}_{SUFFIX[scales.spec.dtype]}"
    graph.dispatch(shader, global_wg=lambda: static_conv2d_global_wg_size(shader, out),
                   local_wg=lambda: pick_hw_square_wg_size(static_conv2d_global_wg_size(shader, out)),
                   spec=spec_constants(p, int(apply_bias)), immediates=_push(args),
                   resources=[out, im2col, *bound, graph.sizes_ubo(out), graph.sizes_ubo(im2col)])


def _prepack_weight(graph: ComputeGraph, args: Mapping[str, Any], x: Tensor, out: Tensor, depthwise: bool,
                    use_im2col: bool) -> Tensor:
    """The weight packing ``static_quantized_conv2d_impl`` picks: depthwise, linear (im2col) or conv blocks."""
    if depthwise:
        return prepack_quantized_conv2d_dw_weight(graph, args["weights"])
    if use_im2col:
        return prepack_quantized_linear_weight(graph, args["weights"])
    return prepack_quantized_conv2d_weight(graph, args["weights"], val_at(-3, out.spec.sizes),
                                           val_at(-3, x.spec.sizes) // int(args["groups"]), args["kernel_size"])


def static_quantized_conv2d_impl(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> str:
    """``static_quantized_conv2d_impl``: pick the weight packing and route, add the nodes; returns the route."""
    x = args["x"]
    groups = int(args["groups"])
    depthwise = groups == val_at(-3, x.spec.sizes)
    optimized = x.spec.layout == OPTIMIZED_LAYOUT and out.spec.layout == OPTIMIZED_LAYOUT
    use_im2col = optimized and should_use_im2col(args["kernel_size"], groups)
    pointwise = is_s1p0d1_pointwise(args)
    weight = _prepack_weight(graph, args, x, out, depthwise, use_im2col)
    sums = prepack_standard(graph, args["weight_sums"], "buffer", "width")
    scales = prepack_standard(graph, args["weight_scales"], "buffer", "width")
    bias = prepack_bias(graph, args.get("bias"), np.asarray(args["weight_scales"].data).dtype.name)
    bound, apply_bias = [weight, sums, scales, bias], args.get("bias") is not None
    p = create_conv2d_params(x.spec.sizes, out.spec.sizes, args)
    if depthwise:
        add_conv2d_dw_q8ta_q8csw_q8to_4w4c_node(graph, args, x, out, bound, p, apply_bias)
        return "dw"
    if not optimized:
        add_q8ta_conv2d_node(graph, x, args, weight, (sums, scales, bias), ACTIVATION_NONE, out)
        return "general"
    im2col = x
    if use_im2col and not pointwise:
        im2col = graph.add_tensor(calculate_packed_int8_input_im2col_sizes(out, p), "int8x4", x.storage,
                                  OPTIMIZED_LAYOUT, temporary=True, label="packed_int8_input_im2col")
        add_input_im2col_packed_int8_node(graph, args, x, out, im2col, p)
    add_conv2d_q8ta_q8csw_q8to_4w4c_node(graph, args, im2col, out, bound, p, apply_bias, use_im2col)
    return ("pw" if pointwise else "im2col") if use_im2col else "direct"


def output_of(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """int8 ``[N, OC, Ho, Wo]``; OC is the weight's rows, or C_in for a depthwise (3-D) weight."""
    x, weights = np.asarray(args["x"]), np.asarray(args["weights"])
    oc = x.shape[1] if weights.ndim == 3 else weights.shape[0]
    return conv_out_sizes(x.shape, args, oc), np.int8


def _conv2d_q8ta_q8csw_q8to(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None) -> None:
    check_route("route", route, static_quantized_conv2d_impl(graph, args, out))


@register_op(OP, output=output_of, constants=("weights", "weight_sums", "weight_scales", "bias"), ports=PORTS)
def conv2d_q8ta_q8csw_q8to(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, *,
                           route: str | None = None) -> None:
    """``conv2d_q8ta_q8csw_q8to``: int8x4 activations (per-tensor qparams) through int8 per-channel weights into a
    requantized int8x4 output.

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): ``x`` (int8x4 buffer), ``input_scale``, ``input_zero_point``, ``weights``,
            ``weight_sums``, ``weight_scales``, ``bias`` (TensorRefs; bias may be None), ``output_scale``,
            ``output_zero_point``, ``kernel_size``, ``stride``, ``padding``, ``dilation``, ``groups``.
        out (Tensor): the int8x4 output ``[N, OC, Ho, Wo]``.
        route (str | None): the route the case expects (``dw``, ``pw``, ``im2col``, ``direct``); checked.

    Example::

        conv2d_q8ta_q8csw_q8to(graph, {"x": x, "input_scale": 0.05, "input_zero_point": -3, "weights": w,
                                       "weight_sums": ws, "weight_scales": s, "output_scale": 0.1,
                                       "output_zero_point": 5, "bias": b, "kernel_size": [3, 3], "stride": [1, 1],
                                       "padding": [1, 1], "dilation": [1, 1], "groups": 1}, out, route="im2col")
    """
    _conv2d_q8ta_q8csw_q8to(graph, args, out, route)


@register_op(OP_DW, output=output_of, constants=("weights", "weight_sums", "weight_scales", "bias"), ports=PORTS,
             registered_in=CONVOLUTION_PORT.file)
def conv2d_q8ta_q8csw_q8to_dw(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, *,
                              route: str | None = None) -> None:
    """``et_vk.conv2d_q8ta_q8csw_q8to_dw``: the C++ registers ``conv2d_q8ta_q8csw_q8to`` under this name too."""
    _conv2d_q8ta_q8csw_q8to(graph, args, out, route)
