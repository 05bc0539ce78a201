"""Launchers for ``et_vk.conv2d_q8csw`` and ``et_vk.conv2d_q8ta_q8csw``: float activations and output, int8 weights.

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
from vkdiff.device.launchers.utils.q8_weights import prepack_quantized_linear_weight
from vkdiff.device.launchers.utils.q8ta_conv_utils import GEOMETRY, Conv2DParams, conv2d_params
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.resources import Storage, Tensor
from vkdiff.device.routing import route_for

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
