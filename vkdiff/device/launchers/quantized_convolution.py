"""Launchers for the ops ``QuantizedConvolution.cpp`` registers: ``et_vk.conv2d_q8csw``, ``et_vk.conv2d_q8ta_q8csw``
(float activations and output), ``et_vk.conv2d_q8ta_q8csw_q8to`` and ``et_vk.conv2d_q8ta_q8csw_q8to_dw`` (int8x4
activations in and out); its test-only ``etvk.test_conv2d_q8ta_q8csw_q8to`` is not ported.

Launchers for ``et_vk.conv2d_q8csw`` and ``et_vk.conv2d_q8ta_q8csw``: float activations and output, int8 weights.

Ported from ``runtime/graph/ops/impl/QuantizedConvolution.cpp`` (``conv2d_q8csw``, ``conv2d_q8ta_q8csw`` →
``quantized_conv2d_impl``, ``create_conv2d_params``, ``calculate_input_im2col_sizes``,
``GenerateSpecConstants``, ``add_input_im2col_node``, ``add_quantize_and_pack_im2col_node``,
``add_conv2d_q8csw_linear_node``, ``add_conv2d_q8ta_q8csw_linear_node``, ``im2col_global_wg_size``,
``col2im_global_wg_size``) and ``QuantizedLinear.cpp`` (``prepack_quantized_linear_weight``, 8-bit;
``quantized_linear_local_wg_size``). Routes (option ``route``, checked):

===============  ==========================================================  ====================================
route            when                                                        shaders
===============  ==========================================================  ====================================
``weight_only``  ``conv2d_q8csw``; ``conv2d_q8ta_q8csw`` without int8 dot    ``im2col_buffer_<in>_float`` →
                 product (profile ``no-dot-product``): the input is never    ``conv2d_q8csw_linear_tiled_<out>_
                 quantized                                                   buffer_<weight>_float``
``int8``         ``conv2d_q8ta_q8csw`` with int8 dot product                 ``quantize_and_pack_im2col_buffer_
                                                                             <in>_float`` → ``conv2d_q8ta_q8csw_
                                                                             linear_tiled_<out>_buffer_<weight>_
                                                                             float``
===============  ==========================================================  ====================================

* weight ``int8 [OC, K]`` (``K = align4(Kh·Kw·IC/groups)``, ``K % 4 == 0`` checked) packed by
  ``pack_q8_linear_weight_<storage>`` into int32 blocks ``[K/4, align4(OC)]`` (texture2d unless past
  ``max-texture-dimension-2d``; prepack cache keyed by kernel name), push constants the packed sizes and
  ``(K, OC)``, global ``(OC/4, K/4, 1)``; weight scales, weight sums and bias through ``prepack_standard``
  (buffers); a missing bias binds an empty dummy buffer (``apply_bias = 0``);
* im2col scratch: ``[M, K]`` with ``M = align4(Ho·Wo·N)`` and ``K = align4(Kh·Kw·IC/groups)·groups``, a float32
  width-packed buffer (weight-only) or an int8x4 ``4H4W`` buffer (int8); global ``(K/4, M/4, 1)``, local
  ``create_local_wg_size``; push constants ``(1/s_x, z_x)`` for the quantizing variant;
* the GEMM: global ``(ceil(OC/4), ceil(Ho·Wo·N/4), 1)``, local ``pick_hw_square_wg_size``; UBOs output and
  input sizes; push constants ``(s_x, z_x)`` for the int8 variant;
* spec constants (every dispatch, from id 3): ``apply_bias, stride, padding, dilation, kernel (x, y each),
  IC/groups, OC/groups, K4_per_group, K4, K_per_group, logical_K, logical_K_per_group, groups``;
* ``VK_CHECK_COND(OC/groups % 4 == 0)`` for grouped convolutions; no node has a resize function, so below the
  bound the output keeps its build-time sizes.

Only ``texture3d`` outputs and inputs have variants (the shaders assume channels packing and batch 1).

Launchers for ``et_vk.conv2d_q8ta_q8csw_q8to`` and ``_q8to_dw``: int8x4 activations in and out, int8 weights.

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
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.compute import create_local_wg_size
from vkdiff.device.graph.staging import SUFFIX, prepack_standard
from vkdiff.device.launchers.utils.common import div_up, pick_hw_square_wg_size, val_at
from vkdiff.device.launchers.utils.conv_utils import calc_out_size
from vkdiff.device.launchers.linear import check_route
from vkdiff.device.launchers.q8ta_conv2d import add_q8ta_conv2d_node
from vkdiff.device.launchers.q8ta_conv2d_dw import prepack_quantized_conv2d_dw_weight
from vkdiff.device.launchers.utils.q8_weights import prepack_quantized_linear_weight
from vkdiff.device.launchers.utils.q8ta_conv_utils import (GEOMETRY, Conv2DParams, conv2d_params,
                                                           prepack_quantized_conv2d_weight)
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Storage, Tensor
from vkdiff.device.runtime.routing import route_for


# -- conv2d_q8csw / conv2d_q8ta_q8csw ----------------------------------------------------------------------------------

TREE = "executorch main cff6f4dd32"
OP_Q8CSW = "et_vk.conv2d_q8csw.default"
OP_Q8TA = "et_vk.conv2d_q8ta_q8csw.default"

CONVOLUTION_PORT = Port(
    file="runtime/graph/ops/impl/QuantizedConvolution.cpp",
    functions=("conv2d_q8csw", "conv2d_q8ta_q8csw", "quantized_conv2d_impl", "create_conv2d_params",
               "calculate_input_im2col_sizes", "GenerateSpecConstants", "add_input_im2col_node",
               "add_quantize_and_pack_im2col_node", "add_conv2d_q8csw_linear_node",
               "add_conv2d_q8ta_q8csw_linear_node", "im2col_global_wg_size", "col2im_global_wg_size"),
    sha256="6197338935809667a4d76c17ba4eb7ad25973f15ba9a79c6e55c3167c63ea5a0", tree=TREE)
LINEAR_PORT = Port(file="runtime/graph/ops/impl/QuantizedLinear.cpp",
                   functions=("prepack_quantized_linear_weight", "quantized_linear_local_wg_size"),
                   sha256="1f719e717139d3598137ba34f25c30c203feec9ffa646c7007d4e374e541819e", tree=TREE)
COMMON_PORT = Port(file="runtime/graph/ops/impl/Common.cpp",
                   functions=("pick_hw_square_wg_size", "default_pick_local_wg_size"),
                   sha256="c223f63c0b8eeb9811a0f4641886bac3959230a0aba9137eb3a87a7bdd7ffe3b", tree=TREE)
PORTS = (CONVOLUTION_PORT, LINEAR_PORT, COMMON_PORT)


def create_conv2d_params(x_sizes, out_sizes, args: Mapping[str, Any]) -> Conv2DParams:
    """``create_conv2d_params`` from the input and output sizes and the op's geometry arguments."""
    return conv2d_params(val_at(-3, x_sizes), val_at(-3, out_sizes), *(args[k] for k in GEOMETRY), args["groups"])


def spec_constants(p: Conv2DParams, apply_bias: int = 1) -> dict[int, int]:
    """``GenerateSpecConstants``: 17 values from spec id 3, in the shaders' declaration order."""
    values = (apply_bias, *p.stride, *p.padding, *p.dilation, *p.kernel_size, p.in_channels_per_group,
              p.out_channels_per_group, p.K4_per_group, p.K4, p.K_per_group, p.logical_K, p.logical_K_per_group,
              p.groups)
    return {3 + i: int(v) for i, v in enumerate(values)}


def conv_out_sizes(x_shape, args: Mapping[str, Any], out_channels: int) -> tuple[int, int, int, int]:
    """``[N, OC, Ho, Wo]`` of a 4-D input (``calc_out_size`` per spatial dim)."""
    n, _, h, w = (int(v) for v in x_shape)
    kh, kw = (int(v) for v in args["kernel_size"])
    (sy, sx), (py, px), (dy, dx) = ([int(v) for v in args[k]] for k in ("stride", "padding", "dilation"))
    return (n, out_channels, calc_out_size(h, kh, sy, py, dy), calc_out_size(w, kw, sx, px, dx))


def output_of(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """The float output ``[N, OC, Ho, Wo]`` in the input's dtype (OC: the weight's rows)."""
    x = np.asarray(args["x"])
    return conv_out_sizes(x.shape, args, np.asarray(args["weights"]).shape[0]), x.dtype


def prepack_bias(graph: ComputeGraph, bias: TensorRef | None, dtype: str) -> Tensor:
    """The bias buffer, or the empty dummy tensor ``quantized_conv2d_impl`` binds in its slot."""
    if bias is None:
        return graph.add_tensor((), dtype, "buffer", "width", temporary=True, label="dummy_bias")
    return prepack_standard(graph, bias, "buffer", "width")


def calculate_input_im2col_sizes(out: Tensor, p: Conv2DParams) -> tuple[int, int]:
    """``calculate_input_im2col_sizes``: ``[M, K]``, M = align4(Ho·Wo·N)."""
    o = out.spec.sizes
    m = val_at(-2, o) * val_at(-1, o) * val_at(-4, o)
    return (-(-m // 4) * 4, p.K)


def im2col_global_wg_size(out: Tensor, p: Conv2DParams) -> tuple[int, int, int]:
    """``im2col_global_wg_size``: one 4×4 block of the im2col matrix per invocation."""
    m, k = calculate_input_im2col_sizes(out, p)
    return (div_up(k, 4), div_up(m, 4), 1)


def col2im_global_wg_size(out: Tensor) -> tuple[int, int, int]:
    """``col2im_global_wg_size``: ``(ceil(OC/4), ceil(Ho·Wo·N/4), 1)``."""
    o = out.spec.sizes
    return (div_up(val_at(-3, o), 4), div_up(val_at(-2, o) * val_at(-1, o) * val_at(-4, o), 4), 1)


def _scalar_block(*values: float | int) -> bytes:
    """By-value push constants: floats as float32, ints as int32, in order."""
    return b"".join(np.array([v], np.float32 if isinstance(v, float) else np.int32).tobytes() for v in values)


def add_input_im2col_node(graph: ComputeGraph, x: Tensor, out: Tensor, im2col: Tensor, p: Conv2DParams) -> None:
    """``add_input_im2col_node``: ``im2col_<im2col storage>_<input storage>_<dtype>``."""
    shader = f"im2col_{im2col.storage}_{x.storage}_{_dtype(out)}"
    graph.dispatch(shader, global_wg=lambda: im2col_global_wg_size(out, p),
                   local_wg=lambda: create_local_wg_size(im2col_global_wg_size(out, p)), spec=spec_constants(p),
                   resources=[im2col, x, graph.sizes_ubo(im2col), graph.sizes_ubo(x), graph.sizes_ubo(out)])


def add_quantize_and_pack_im2col_node(graph: ComputeGraph, x: Tensor, out: Tensor, im2col: Tensor, p: Conv2DParams,
                                      input_scale: float, input_zp: int) -> None:
    """``add_quantize_and_pack_im2col_node``: the im2col blocks quantized with ``(1/s_x, z_x)`` into 4H4W words."""
    shader = f"quantize_and_pack_im2col_{im2col.storage}_{x.storage}_{_dtype(out)}"
    inv_scale = float(np.float32(1.0) / np.float32(input_scale))
    graph.dispatch(shader, global_wg=lambda: im2col_global_wg_size(out, p),
                   local_wg=lambda: create_local_wg_size(im2col_global_wg_size(out, p)), spec=spec_constants(p),
                   resources=[im2col, x, graph.sizes_ubo(im2col), graph.sizes_ubo(x), graph.sizes_ubo(out)],
                   immediates=_scalar_block(inv_scale, int(input_zp)))


def _dtype(t: Tensor) -> str:
    """``add_dtype_suffix`` of a tensor's dtype."""
    return SUFFIX[t.spec.dtype]


def check_grouped_tiles(p: Conv2DParams) -> None:
    """``VK_CHECK_COND(conv_params.out_channels_per_group % 4 == 0)`` of grouped convolutions."""
    if p.groups > 1 and p.out_channels_per_group % 4:
        raise EtVkRefusal(f"VK_CHECK_COND(conv_params.out_channels_per_group % 4 == 0) failed: "
                          f"{p.out_channels_per_group} output channels per group")


def add_conv2d_linear_node(graph: ComputeGraph, stem: str, out: Tensor, im2col: Tensor, x: Tensor,
                           bound: list[Tensor], p: Conv2DParams, apply_bias: bool,
                           immediates: bytes = b"") -> None:
    """``add_conv2d_q8csw_linear_node`` / ``add_conv2d_q8ta_q8csw_linear_node`` (``stem``): the tiled GEMM
    writing the output image; ``bound`` are the weight tensors after the im2col matrix, in binding order."""
    check_grouped_tiles(p)
    weight = bound[0]
    shader = f"{stem}_{out.storage}_{im2col.storage}_{weight.storage}_{_dtype(out)}"
    graph.dispatch(shader, global_wg=lambda: col2im_global_wg_size(out),
                   local_wg=lambda: pick_hw_square_wg_size(col2im_global_wg_size(out)),
                   spec=spec_constants(p, int(apply_bias)), immediates=immediates,
                   resources=[out, im2col, *bound, graph.sizes_ubo(out), graph.sizes_ubo(x)])


def quantized_conv2d_impl(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, quantized: bool,
                          weight_storage: Storage | None) -> str:
    """``quantized_conv2d_impl``: prepack, then the weight-only or the int8 route; returns the route taken."""
    x, p = args["x"], create_conv2d_params(args["x"].spec.sizes, out.spec.sizes, args)
    weight = prepack_quantized_linear_weight(graph, args["weights"], weight_storage)
    scales = prepack_standard(graph, args["weight_scales"], "buffer", "width")
    bias = prepack_bias(graph, args.get("bias"), out.spec.dtype)
    apply_bias = args.get("bias") is not None
    m, k = calculate_input_im2col_sizes(out, p)
    if not graph.route.int8_dot_product or not quantized:
        im2col = graph.add_tensor((m, k), "float32", "buffer", "width", temporary=True, label="input_im2col")
        add_input_im2col_node(graph, x, out, im2col, p)
        add_conv2d_linear_node(graph, "conv2d_q8csw_linear_tiled", out, im2col, x, [weight, scales, bias], p,
                               apply_bias)
        return "weight_only"
    sums = prepack_standard(graph, args["weight_sums"], "buffer", "width")
    im2col = graph.add_tensor((m, k), "int8x4", "buffer", "int8x4_4h4w", temporary=True, label="input_int_im2col")
    scale, zp = float(args["input_scale"]), int(args["input_zero_point"])
    add_quantize_and_pack_im2col_node(graph, x, out, im2col, p, scale, zp)
    add_conv2d_linear_node(graph, "conv2d_q8ta_q8csw_linear_tiled", out, im2col, x, [weight, sums, scales, bias], p,
                           apply_bias, immediates=_scalar_block(float(np.float32(scale)), zp))
    return "int8"


def _with_profile(graph: ComputeGraph, profile: str | None) -> None:
    """Answer ``can_use_int8_dot_product`` from a routing profile (``no-dot-product``) instead of the adapter."""
    if profile is not None:
        graph.route = route_for(profile, graph.ctx.info)


@register_op(OP_Q8CSW, output=output_of, constants=("weights", "weight_scales", "bias"), ports=PORTS)
def conv2d_q8csw(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, *, route: str | None = None,
                 profile: str | None = None, weight_storage: Storage | None = None) -> None:
    """``conv2d_q8csw``: weight-only int8 convolution (the input is never quantized).

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): ``x`` (texture3d, channels packed), ``weights``, ``weight_scales``, ``bias`` (TensorRefs;
            bias may be None), ``kernel_size``, ``stride``, ``padding``, ``dilation`` (``[H, W]``), ``groups``.
        out (Tensor): the float output ``[N, OC, Ho, Wo]``.
        route (str | None): the route the case expects (``weight_only``); checked.
        profile (str | None): a routing profile answering the device queries.
        weight_storage (str | None): force the packed weight's storage (a device with a smaller 2D limit).
    """
    _with_profile(graph, profile)
    check_route("route", route, quantized_conv2d_impl(graph, args, out, False, weight_storage))


@register_op(OP_Q8TA, output=output_of, constants=("weights", "weight_sums", "weight_scales", "bias"), ports=PORTS)
def conv2d_q8ta_q8csw(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, *, route: str | None = None,
                      profile: str | None = None, weight_storage: Storage | None = None) -> None:
    """``conv2d_q8ta_q8csw``: the float input quantized per tensor (``input_scale``, ``input_zero_point``) into
    an int8 im2col matrix, integer GEMM with dot products, float output; weight-only without dot products.

    Example::

        conv2d_q8ta_q8csw(graph, {"x": x, "input_scale": 0.05, "input_zero_point": -3, "weights": w,
                                  "weight_sums": ws, "weight_scales": s, "bias": None, "kernel_size": [3, 3],
                                  "stride": [1, 1], "padding": [1, 1], "dilation": [1, 1], "groups": 1},
                          out, route="int8")
    """
    _with_profile(graph, profile)
    check_route("route", route, quantized_conv2d_impl(graph, args, out, True, weight_storage))


# -- conv2d_q8ta_q8csw_q8to / conv2d_q8ta_q8csw_q8to_dw ----------------------------------------------------------------

OP_Q8TO = "et_vk.conv2d_q8ta_q8csw_q8to.default"
OP_Q8TO_DW = "et_vk.conv2d_q8ta_q8csw_q8to_dw.default"
OPTIMIZED_LAYOUT = "int8x4_4w4c"
ACTIVATION_NONE = 0
"""``ActivationType::kNone``, which ``add_conv2d_q8ta_q8csw_q8to_node`` passes to the general node."""

Q8TO_PORTS = (
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


def q8to_output_of(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """int8 ``[N, OC, Ho, Wo]``; OC is the weight's rows, or C_in for a depthwise (3-D) weight."""
    x, weights = np.asarray(args["x"]), np.asarray(args["weights"])
    oc = x.shape[1] if weights.ndim == 3 else weights.shape[0]
    return conv_out_sizes(x.shape, args, oc), np.int8


def _conv2d_q8ta_q8csw_q8to(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None) -> None:
    check_route("route", route, static_quantized_conv2d_impl(graph, args, out))


@register_op(OP_Q8TO, output=q8to_output_of, constants=("weights", "weight_sums", "weight_scales", "bias"),
             ports=Q8TO_PORTS)
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


@register_op(OP_Q8TO_DW, output=q8to_output_of, constants=("weights", "weight_sums", "weight_scales", "bias"),
             ports=Q8TO_PORTS, registered_in=CONVOLUTION_PORT.file)
def conv2d_q8ta_q8csw_q8to_dw(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, *,
                              route: str | None = None) -> None:
    """``et_vk.conv2d_q8ta_q8csw_q8to_dw``: the C++ registers ``conv2d_q8ta_q8csw_q8to`` under this name too."""
    _conv2d_q8ta_q8csw_q8to(graph, args, out, route)
