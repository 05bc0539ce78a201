"""Launchers for the ops ``QuantizedLinear.cpp`` registers: ``et_vk.linear_q8ta_q8csw``, ``et_vk.linear_q8csw``,
``et_vk.linear_dq8ca_q4gsw``, and ``et_vk.linear_q4gsw`` in trees before v1.4.0 (since then ``Q4gswLinear.cpp``
registers it, ``q4gsw_linear.py``).

``et_vk.linear_q4gsw`` through ET-VK's ``linear_q4gsw_{tiled,coop}`` shaders, ported from
``runtime/graph/ops/impl/QuantizedLinear.cpp`` (``quantized_linear_impl``
→ ``prepack_quantized_linear_weight`` + ``add_linear_qw_node``), the path of trees
before v1.4.0 and dq8ca's weight-only fallback after it:

* the 4-bit weight ``uint8 [N, K/2]`` is repacked on the device by
  ``pack_q4_linear_weight_{storage}`` into int32 blocks ``[N/8, K/4 * 4]``, stored as
  texture2d unless that exceeds ``max-texture-dimension-2d`` (then buffer); the
  prepack cache is keyed by (weight constant, kernel name), so a weight shared by two
  consumers is packed once;
* scales ``[K/gs, N4*4]`` and bias go to buffers in their constants' dtype
  (``prepack_standard``, through ``nchw_to_buffer``); a missing bias binds a dummy buffer;
* ``pick_linear_qw_shader``: ``_coop`` when M == 1 (GEMV), else ``_tiled``, suffixed
  by output storage, weight storage and dtype (the ``_coopmat`` branch, taken only on
  subgroup-64 devices, is not ported);
* global size ``(div_up(N, 8), div_up(M, 4 or 1), 1)``; local size
  ``pick_hw_square_wg_size`` (tiled) or ``(1, 1, 64)`` (coop);
* spec constants ``[apply_bias, K4_per_group, num_groups, N]`` from id 3; UBOs:
  output sizes then input sizes, WHCN ``ivec4``;
* output sizes ``[..., M, N]`` (``resize_linear_qw_node``).

``et_vk.linear_dq8ca_q4gsw``: dynamically quantized int8 activations × 4-bit weights, ported from
``QuantizedLinear.cpp`` (``linear_dq8ca_q4gsw`` → ``quantized_linear_impl`` → ``add_linear_dqa_qw_node``) and
``QuantizeDequantize.cpp`` (``add_quantize_and_pack_4h4w_with_group_sums_node``). The activation scales and zero
points come from the graph (``choose_qparams_affine``'s outputs, texture3d).

* The weight is packed by ``pack_q4_linear_weight_{texture2d|buffer}`` through the prepack
  cache (shared with ``linear_q4gsw_{tiled,coop}`` and tied embeddings); weight scales,
  weight sums and bias go to buffers.
* Without int8 dot product (``Route.int8_dot_product``) the op is the weight-only
  ``add_linear_qw_node`` (``linear_q4gsw_{tiled,coop}``): activations are not quantized.
* Otherwise the input is quantized and packed into int8x4 ``4H4W`` blocks with per-group
  sums (``quantize_and_pack_4h4w_with_group_sums_{o2w32|o4w16}_buffer_<in storage>_<dtype>_<zp
  mode>``, gated off when M == 1), then ``linear_dq8ca_q4gsw_{tiled|coop}_<out storage>_<weight
  storage>_<dtype>_<zp mode>`` (``_coopmat`` with int8 cooperative matrix on AMD, subgroup 64,
  fp16 buffer output, no bias, tile-aligned sizes).
* Spec constants from id 3: ``apply_bias, K4_per_group, K / group_size, N``; UBOs output,
  input sizes; global ``(N/8, M/4 or M, 1)``, local ``pick_hw_square_wg_size`` (tiled) or
  ``(1, 1, 64)`` (coop).

``et_vk.linear_q8csw`` and ``et_vk.linear_q8ta_q8csw``: int8 per-channel weights, float I/O, ported from
``QuantizedLinear.cpp`` (``linear_q8csw``, ``linear_q8ta_q8csw`` →
``quantized_linear_impl`` → ``prepack_quantized_linear_weight`` (8-bit) and ``add_linear_qw_node`` /
``add_linear_qa_qw_node``, ``pick_linear_qw_shader``, ``quantized_linear_{global,local}_wg_size``,
``resize_linear_qw_node``) and ``QuantizeDequantize.cpp`` (``add_quantize_and_pack_4h4w_node``,
``quantize_and_pack_4h4w_global_wg_size``), the 8-bit siblings of ``linear_dq8ca_q4gsw``:

* ``VK_CHECK_COND(K % 4 == 0)``; the int8 weight ``[N, K]`` is packed by ``pack_q8_linear_weight_<storage>``
  (prepack cache; global ``(N4, K4, 1)``, push constants packed sizes and ``(K, N)``) into int32 4x4 blocks
  ``[K4, N4 * 4]``, texture2d unless ``N4 * 4 > 4 * max2d`` or ``K4 > max2d`` (then buffer); weight scales,
  weight sums and bias go to buffers; a missing bias binds a 0-d dummy buffer;
* weight-only (``linear_q8csw``, and ``linear_q8ta_q8csw`` without int8 dot product): variant
  ``linear_q8csw_tiled_<out>_<weight>_<dtype>``, global ``(ceil(N/4), ceil(M/4), 1)``, local
  ``pick_hw_square_wg_size``; spec constants from id 3 ``apply_bias, K4_per_group = 0, num_groups = 0, N``;
  UBOs sizes of output and input; resize ``resize_linear_qw_node`` (``[M, N]`` / ``[B, M, N]``);
* static int8 input (``linear_q8ta_q8csw`` with int8 dot product): ``quantize_and_pack_4h4w_per_tensor_
  buffer_<in>_<dtype>`` into an int8x4 ``4H4W`` buffer temporary (global ``(K4, M4, 1)``, default local size,
  UBO input sizes, push constants ``1 / input_scale`` and ``input_zero_point``, no resize function), then
  ``linear_q8ta_q8csw_tiled_<out>_buffer_<weight>_<dtype>`` (global ``(ceil(N/8), ceil(M/4), 1)``, local
  ``pick_hw_square_wg_size``, spec constant ``apply_bias``, UBOs sizes of output and packed input, push
  constants ``input_scale``, ``input_zero_point``, resize args the float input but no resize function: the
  output keeps its built sizes).

Options: ``route`` (``tiled`` for the weight-only shader, ``int8`` for the quantized-input pair; checked),
``weight_storage`` (checked), ``profile`` (a routing profile answering ``can_use_int8_dot_product``:
``no-dot-product`` takes the weight-only route).

The three ops share ``resize_linear_qw_node`` on their own schemas (the input is ``self``, ``input`` or ``x``):
``resize_linear_qw_node``, ``resize_linear_qw_node_dq8ca`` and ``resize_linear_qw_node_q8csw`` here.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.runtime.context import DeviceContext
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.compute import create_local_wg_size
from vkdiff.device.graph.staging import SUFFIX, prepack_standard, staging_buffer
from vkdiff.device.launchers.choose_qparams import with_zp_suffix
from vkdiff.device.launchers.linear import check_route
from vkdiff.device.launchers.utils import arithmetic, q8_weights
from vkdiff.device.launchers.utils.common import div_up, dtype_suffix, pick_hw_square_wg_size, val_at
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Storage, Tensor
from vkdiff.device.runtime.routing import route_for


# -- linear_q4gsw (the weight-only 4-bit path; dq8ca's fallback) -------------------------------------------------------

OP_Q4GSW = "et_vk.linear_q4gsw.default"

Q4GSW_PORTS = (
    Port(file="runtime/graph/ops/impl/QuantizedLinear.cpp",
         functions=("quantized_linear_impl", "prepack_quantized_linear_weight", "add_linear_qw_node",
                    "pick_linear_qw_shader", "quantized_linear_global_wg_size", "quantized_linear_local_wg_size",
                    "resize_linear_qw_node"),
         sha256="1f719e717139d3598137ba34f25c30c203feec9ffa646c7007d4e374e541819e",
         tree="executorch main cff6f4dd32"),
    Port(file="runtime/graph/ops/impl/Common.cpp", functions=("pick_hw_square_wg_size",),
         sha256="c223f63c0b8eeb9811a0f4641886bac3959230a0aba9137eb3a87a7bdd7ffe3b",
         tree="executorch main cff6f4dd32"),
    *arithmetic.LEGACY_PORTS,
)


def weight_storage_for(ctx: DeviceContext, n: int, k: int) -> Storage:
    """ET-VK's choice: texture2d unless the packed weight exceeds the 2D texture limit."""
    height, width = div_up(n, 8), div_up(k, 4) * 4
    limit = ctx.device.limits["max-texture-dimension-2d"]
    return "buffer" if width > limit * 4 or height > limit else "texture2d"


def prepack_quantized_linear_weight(graph: ComputeGraph, weights: TensorRef,
                                    storage: Storage | None = None) -> Tensor:
    """``prepack_quantized_linear_weight`` (4-bit): ``uint8 [N, K/2]`` → int32 blocks ``[N/8, K/4 * 4]``.

    Args:
        graph (ComputeGraph): the graph the prepack node joins.
        weights (TensorRef): the packed 4-bit weight constant.
        storage (str | None): storage of the packed tensor; None applies ET-VK's rule.
    """
    n, k = weights.data.shape[0], weights.data.shape[1] * 2
    if k % 8:
        raise EtVkRefusal(f"linear_q4gsw needs K % 8 == 0, got K={k}")
    storage = storage or weight_storage_for(graph.ctx, n, k)
    name = f"pack_q4_linear_weight_{storage}"
    cached = graph.get_cached_prepack(weights, name)
    if cached is not None:
        return cached
    blocks_shape = (div_up(n, 8), div_up(k, 4) * 4)
    global_wg = (div_up(div_up(k, 4), 2), div_up(n, 8), 1)
    src = staging_buffer(graph, np.asarray(weights.data, dtype=np.uint8), "int4_weight")
    packed = graph.add_tensor(blocks_shape, "int32", storage, "width", label="packed_int4_weight")
    immediates = packed.spec.sizes_block() + np.array([k, n], dtype=np.int32).tobytes()
    graph.dispatch(name, global_wg=global_wg, local_wg=create_local_wg_size(global_wg), resources=[packed, src],
                   immediates=immediates, prepack=True)
    graph.cache_prepack(weights, name, packed)
    return packed


def pick_linear_qw_shader(out: Tensor, x: Tensor, packed_weight: Tensor) -> str:
    """``pick_linear_qw_shader`` for 4-bit weights: ``linear_q4gsw_{coop|tiled}_{out}_{weight}_{dtype}``."""
    gemv = val_at(-2, x.spec.sizes) == 1
    return (f"linear_q4gsw_{'coop' if gemv else 'tiled'}_{out.storage}_{packed_weight.storage}_"
            f"{dtype_suffix(out.dtype)}")


def linear_out_sizes(x: Tensor, n: int) -> tuple[int, ...]:
    """``resize_linear_qw_node``'s sizes: ``[M, N]`` or ``[B, M, N]``."""
    sizes = x.spec.sizes
    return (val_at(-2, sizes), n) if len(sizes) == 2 else (sizes[0], val_at(-2, sizes), n)


def linear_global_wg(out: Tensor, shader: str) -> tuple[int, int, int]:
    """``quantized_linear_global_wg_size``: N/8 by M/4 (tiled) or M (coop)."""
    m, n = val_at(-2, out.spec.sizes), val_at(-1, out.spec.sizes)
    return (div_up(n, 8), div_up(m, 1 if "_coop" in shader else 4), 1)


def add_linear_qw_node(graph: ComputeGraph, out: Tensor, x: Tensor, packed_weight: Tensor, scales: Tensor,
                       bias: Tensor, group_size: int, apply_bias: bool) -> None:
    """``add_linear_qw_node``: one dispatch of the picked shader, ``out = x @ dequant(W).T (+ bias)``."""
    n, k = val_at(-1, out.spec.sizes), val_at(-1, x.spec.sizes)
    spec = {3: int(apply_bias), 4: div_up(group_size, 4), 5: k // group_size, 6: n}
    ubos = [graph.sizes_ubo(out), graph.sizes_ubo(x)]

    def shader() -> str:
        return pick_linear_qw_shader(out, x, packed_weight)

    def local_wg() -> tuple[int, int, int]:
        name = shader()
        return (1, 1, 64) if "_coop" in name else pick_hw_square_wg_size(linear_global_wg(out, name))

    graph.dispatch(shader, global_wg=lambda: linear_global_wg(out, shader()), local_wg=local_wg, spec=spec,
                   resources=[out, x, packed_weight, scales, bias, *ubos],
                   resize=lambda: graph.virtual_resize(out, linear_out_sizes(x, n)))


def resize_linear_qw_node(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_linear_qw_node``: output ``[..., M, N]`` in the input's dtype."""
    x, weights = np.asarray(args["self"]), np.asarray(args["weights"])
    return (*x.shape[:-1], weights.shape[0]), x.dtype


@register_op(OP_Q4GSW, output=resize_linear_qw_node, constants=("weights", "weight_scales", "bias"),
             ports=Q4GSW_PORTS, arithmetic=arithmetic.legacy_linear)
def quantized_linear_impl(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, *,
                          weight_storage: Storage | None = None) -> None:
    """``quantized_linear_impl`` (weight-only path): prepack weight, scales and bias, then the linear node.

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): ``self`` (Tensor), ``weights``, ``weight_scales``, ``bias`` (TensorRef or None),
            ``group_size`` (int), by schema name.
        out (Tensor): the output ``[..., M, N]``.
        weight_storage (str | None): force the packed weight's storage; None applies ET-VK's rule.
    """
    x, weights, group_size = args["self"], args["weights"], int(args["group_size"])
    k = val_at(-1, x.spec.sizes)
    if k % 4 or weights.data.shape[1] * 2 != k:
        raise EtVkRefusal(f"linear_q4gsw: input is [..., K]={x.spec.sizes}, weights must be [N, K/2] with K % 4 == 0, "
                         f"got {weights.data.shape}")
    n4 = div_up(weights.data.shape[0], 4)
    if args["weight_scales"].data.shape != (k // group_size, n4 * 4):
        raise EtVkRefusal(f"linear_q4gsw: weight_scales must be [K/gs, N4*4] = {(k // group_size, n4 * 4)}, "
                         f"got {args['weight_scales'].data.shape}")
    packed = prepack_quantized_linear_weight(graph, weights, weight_storage)
    scales = prepack_standard(graph, args["weight_scales"], "buffer", "width")
    bias_ref = args.get("bias")
    bias = (prepack_standard(graph, bias_ref, "buffer", "width") if bias_ref is not None
            else graph.add_tensor((), out.dtype.name, "buffer", "width", temporary=True, label="dummy_bias"))
    add_linear_qw_node(graph, out, x, packed, scales, bias, group_size, apply_bias=bias_ref is not None)


# -- linear_dq8ca_q4gsw ------------------------------------------------------------------------------------------------

OP_DQ8CA = "et_vk.linear_dq8ca_q4gsw.default"

DQ8CA_PORTS = (
    Port(file="runtime/graph/ops/impl/QuantizedLinear.cpp",
         functions=("linear_dq8ca_q4gsw", "quantized_linear_impl", "add_linear_dqa_qw_node", "pick_linear_dqa_qw_shader",
                    "can_use_q4gsw_coopmat", "quantized_linear_global_wg_size", "quantized_linear_local_wg_size",
                    "resize_linear_qw_node"),
         sha256="1f719e717139d3598137ba34f25c30c203feec9ffa646c7007d4e374e541819e",
         tree="executorch main cff6f4dd32"),
    Port(file="runtime/graph/ops/impl/QuantizeDequantize.cpp",
         functions=("add_quantize_and_pack_4h4w_with_group_sums_node",
                    "pick_quantize_and_pack_4h4w_with_group_sums_shader",
                    "pick_quantize_and_pack_4h4w_with_group_sums_global_wg_size",
                    "pick_quantize_and_pack_4h4w_with_group_sums_local_wg_size", "is_gemv"),
         sha256="fd71fd02a608fb31fc8533e519743cadfbe26874a43a983e7ac61052ddd125d4",
         tree="executorch main cff6f4dd32"),
    *arithmetic.DQ8CA_PORTS,
)

COOPMAT_TILE = (128, 64, 32)
"""``kDq8caQ4gswCoopmatDims``: M, N, K tiles."""


def resize_linear_qw_node_dq8ca(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_linear_qw_node``: ``[M, N]`` or ``[B, M, N]``."""
    import numpy as np

    x, w = np.asarray(args["input"]), np.asarray(args["weights"])
    m, n = val_at(-2, x.shape), w.shape[0]
    return ((m, n) if x.ndim == 2 else (x.shape[0], m, n)), x.dtype


def can_use_coopmat(graph: ComputeGraph, out: Tensor, x: Tensor, group_size: int, has_bias: bool) -> bool:
    """``can_use_q4gsw_coopmat`` with the dq8ca tiles (and ``supports_int8_cooperative_matrix``)."""
    route = graph.route
    if has_bias or not (route.int8_cooperative_matrix and route.cooperative_matrix) or route.subgroup_size != 64:
        return False
    if route.vendor != "amd" or len(out.spec.sizes) > 2 or out.spec.storage != "buffer" or out.spec.dtype != "float16":
        return False
    m, n, k = val_at(-2, out.spec.sizes), val_at(-1, out.spec.sizes), val_at(-1, x.spec.sizes)
    tm, tn, tk = COOPMAT_TILE
    return m % tm == 0 and n % tn == 0 and k % tk == 0 and group_size % tk == 0


def add_quantize_and_pack_4h4w_with_group_sums_node(graph: ComputeGraph, x: Tensor, sums: Tensor, scales: Tensor,
                                                    zps: Tensor, packed: Tensor, group_size: int) -> None:
    """``add_quantize_and_pack_4h4w_with_group_sums_node`` (self-gated off when M == 1; no resize function)."""
    shader = with_zp_suffix(graph, f"quantize_and_pack_4h4w_with_group_sums_{'o2w32' if group_size >= 128 else 'o4w16'}_"
                                   f"{packed.spec.storage}_{x.spec.storage}_{SUFFIX[x.spec.dtype]}", zps.spec.dtype)

    def global_wg() -> tuple[int, int, int]:
        m, k = val_at(-2, x.spec.sizes), val_at(-1, x.spec.sizes)
        return (0, 0, 0) if m == 1 else (div_up(k, 4) // (group_size // 4), div_up(m, 4), 1)

    def local_wg() -> tuple[int, int, int]:
        if val_at(-2, x.spec.sizes) == 1:
            return (1, 1, 1)
        return (2, 1, 32) if "o2w32" in shader else (4, 1, 16)

    graph.dispatch(lambda: shader, global_wg=global_wg, local_wg=local_wg, spec={3: div_up(group_size, 4)},
                   resources=[packed, sums, x, scales, zps, graph.sizes_ubo(x)])


def add_linear_dqa_qw_node(graph: ComputeGraph, out: Tensor, x: Tensor, packed_input: Tensor, sums: Tensor,
                           scales: Tensor, zps: Tensor, weight: Tensor, weight_sums: Tensor, weight_scales: Tensor,
                           bias: Tensor, group_size: int, apply_bias: bool) -> None:
    """``add_linear_dqa_qw_node`` with ``pick_linear_dqa_qw_shader`` and ``quantized_linear_*_wg_size``."""
    n, k = val_at(-1, out.spec.sizes), val_at(-1, x.spec.sizes)

    def shader() -> str:
        if val_at(-2, x.spec.sizes) != 1 and can_use_coopmat(graph, out, x, group_size, apply_bias):
            return f"linear_dq8ca_q4gsw_coopmat_{out.spec.storage}_{weight.storage}_{SUFFIX[out.spec.dtype]}"
        gemv = val_at(-2, x.spec.sizes) == 1
        return with_zp_suffix(graph, f"linear_dq8ca_q4gsw_{'coop' if gemv else 'tiled'}_{out.spec.storage}_"
                                     f"{weight.storage}_{SUFFIX[out.spec.dtype]}", zps.spec.dtype)

    def global_wg() -> tuple[int, int, int]:
        name, m = shader(), val_at(-2, out.spec.sizes)
        if "_coopmat" in name:
            tm, tn, _ = COOPMAT_TILE
            return (div_up(n, tn) * 256, div_up(m, tm), 1)
        return (div_up(n, 8), div_up(m, 1 if "_coop_" in name else 4), 1)

    def local_wg() -> tuple[int, int, int]:
        name = shader()
        if "_coopmat" in name:
            return (256, 1, 1)
        return (1, 1, 64) if "_coop_" in name else pick_hw_square_wg_size(global_wg())

    spec = {3: int(apply_bias), 4: div_up(group_size, 4), 5: k // group_size, 6: n}
    graph.dispatch(shader, global_wg=global_wg, local_wg=local_wg, spec=spec,
                   resources=[out, x, packed_input, sums, scales, zps, weight, weight_sums, weight_scales, bias,
                              graph.sizes_ubo(out), graph.sizes_ubo(x)],
                   resize=lambda: graph.virtual_resize(out, linear_out_sizes(x, n)))


@register_op(OP_DQ8CA, output=resize_linear_qw_node_dq8ca,
             constants=("weights", "weight_sums", "weight_scales", "bias"), ports=DQ8CA_PORTS,
             placements={"input_scales": "texture3d", "input_zp": "texture3d"},
             arithmetic=arithmetic.legacy_linear)
def linear_dq8ca_q4gsw(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``linear_dq8ca_q4gsw`` → ``quantized_linear_impl`` (per-channel dynamic int8 input, 4-bit group weights)."""
    x, group_size = args["input"], int(args["group_size"])
    if val_at(-1, x.spec.sizes) % 4:
        raise EtVkRefusal(f"linear_dq8ca_q4gsw: K must be a multiple of 4, got {x.spec.sizes}")
    weight = prepack_quantized_linear_weight(graph, args["weights"])
    weight_scales = prepack_standard(graph, args["weight_scales"], "buffer", "width")
    bias_ref = args.get("bias")
    bias = (prepack_standard(graph, bias_ref, "buffer", "width") if bias_ref is not None
            else graph.add_tensor((), out.spec.dtype, "buffer", "width", temporary=True, label="dummy_bias"))
    if not graph.route.int8_dot_product:
        add_linear_qw_node(graph, out, x, weight, weight_scales, bias, group_size, apply_bias=bias_ref is not None)
        return
    scales, zps = args["input_scales"], args["input_zp"]
    weight_sums = prepack_standard(graph, args["weight_sums"], "buffer", "width")
    packed_input = graph.add_tensor(x.spec.sizes, "int8x4", "buffer", "int8x4_4h4w", temporary=True, label="packed_int_input")
    num_groups = args["weight_scales"].data.shape[-2]
    sums = graph.add_tensor((num_groups * div_up(val_at(-2, x.spec.sizes), 4) * 4,), "int32", "buffer", "width",
                            temporary=True, label="int_input_sums")
    add_quantize_and_pack_4h4w_with_group_sums_node(graph, x, sums, scales, zps, packed_input, group_size)
    add_linear_dqa_qw_node(graph, out, x, packed_input, sums, scales, zps, weight, weight_sums, weight_scales, bias,
                           group_size, apply_bias=bias_ref is not None)


# -- linear_q8csw / linear_q8ta_q8csw ----------------------------------------------------------------------------------

OP_Q8CSW = "et_vk.linear_q8csw.default"
OP_Q8TA = "et_vk.linear_q8ta_q8csw.default"
TREE = "executorch main cff6f4dd32"

Q8CSW_PORTS = (
    Port(file="runtime/graph/ops/impl/QuantizedLinear.cpp",
         functions=("linear_q8csw", "linear_q8ta_q8csw", "quantized_linear_impl", "prepack_quantized_linear_weight",
                    "add_linear_qw_node", "add_linear_qa_qw_node", "pick_linear_qw_shader",
                    "quantized_linear_global_wg_size", "quantized_linear_local_wg_size", "resize_linear_qw_node"),
         sha256="1f719e717139d3598137ba34f25c30c203feec9ffa646c7007d4e374e541819e", tree=TREE),
    Port(file="runtime/graph/ops/impl/QuantizeDequantize.cpp",
         functions=("add_quantize_and_pack_4h4w_node", "quantize_and_pack_4h4w_global_wg_size",
                    "get_quantized_input_num_blocks"),
         sha256="fd71fd02a608fb31fc8533e519743cadfbe26874a43a983e7ac61052ddd125d4", tree=TREE),
    Port(file="runtime/graph/ops/impl/Common.cpp", functions=("pick_hw_square_wg_size",),
         sha256="c223f63c0b8eeb9811a0f4641886bac3959230a0aba9137eb3a87a7bdd7ffe3b", tree=TREE),
)


def resize_linear_qw_node_q8csw(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_linear_qw_node``: ``[M, N]`` or ``[B, M, N]`` in the input's dtype, N from the weight's rows."""
    x, weights = np.asarray(args["x"]), np.asarray(args["weights"])
    m, n = val_at(-2, x.shape), weights.shape[0]
    return ((m, n) if x.ndim == 2 else (x.shape[0], m, n)), x.dtype


def add_linear_q8csw_node(graph: ComputeGraph, out: Tensor, x: Tensor, weight: Tensor, scales: Tensor,
                          bias: Tensor, apply_bias: bool) -> None:
    """``add_linear_qw_node`` (8-bit): ``pick_linear_qw_shader`` gives ``linear_q8csw_tiled_*``."""
    n = val_at(-1, out.spec.sizes)
    name = f"linear_q8csw_tiled_{out.spec.storage}_{weight.spec.storage}_{SUFFIX[out.spec.dtype]}"

    def global_wg() -> tuple[int, int, int]:
        return (div_up(val_at(-1, out.spec.sizes), 4), div_up(val_at(-2, out.spec.sizes), 4), 1)

    graph.dispatch(lambda: name, global_wg=global_wg, local_wg=lambda: pick_hw_square_wg_size(global_wg()),
                   spec={3: int(apply_bias), 4: 0, 5: 0, 6: n},
                   resources=[out, x, weight, scales, bias, graph.sizes_ubo(out), graph.sizes_ubo(x)],
                   resize=lambda: graph.virtual_resize(out, linear_out_sizes(x, n)))


def add_quantize_and_pack_4h4w_node(graph: ComputeGraph, x: Tensor, packed: Tensor, scale: float,
                                    zero_point: int) -> None:
    """``add_quantize_and_pack_4h4w_node`` (per tensor): ``1 / scale`` and the zero point by value."""
    name = f"quantize_and_pack_4h4w_per_tensor_{packed.spec.storage}_{x.spec.storage}_{SUFFIX[x.spec.dtype]}"

    def global_wg() -> tuple[int, int, int]:
        return (div_up(val_at(-1, x.spec.sizes), 4), div_up(val_at(-2, x.spec.sizes), 4), 1)

    immediates = np.array([np.float32(1) / np.float32(scale)], np.float32).tobytes() + np.array(
        [zero_point], np.int32).tobytes()
    graph.dispatch(lambda: name, global_wg=global_wg, local_wg=lambda: create_local_wg_size(global_wg()),
                   resources=[packed, x, graph.sizes_ubo(x)], immediates=immediates)


def add_linear_qa_qw_node(graph: ComputeGraph, out: Tensor, x: Tensor, packed_input: Tensor, weight: Tensor,
                          sums: Tensor, scales: Tensor, bias: Tensor, scale: float, zero_point: int,
                          apply_bias: bool) -> None:
    """``add_linear_qa_qw_node``: ``linear_q8ta_q8csw_tiled_*``; resize args the float input, no resize function."""
    name = (f"linear_q8ta_q8csw_tiled_{out.spec.storage}_{packed_input.spec.storage}_{weight.spec.storage}_"
            f"{SUFFIX[out.spec.dtype]}")

    def global_wg() -> tuple[int, int, int]:
        return (div_up(val_at(-1, out.spec.sizes), 8), div_up(val_at(-2, out.spec.sizes), 4), 1)

    immediates = np.array([scale], np.float32).tobytes() + np.array([zero_point], np.int32).tobytes()
    graph.dispatch(lambda: name, global_wg=global_wg, local_wg=lambda: pick_hw_square_wg_size(global_wg()),
                   spec={3: int(apply_bias)},
                   resources=[out, packed_input, weight, sums, scales, bias, graph.sizes_ubo(out),
                              graph.sizes_ubo(packed_input)],
                   immediates=immediates, resize_args=(x,))


def _prepacked(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, weight_storage: str | None
               ) -> tuple[Tensor, Tensor, Tensor, bool]:
    """``quantized_linear_impl``'s common part: the K check, weight, scales and (dummy) bias."""
    x = args["x"]
    if val_at(-1, x.spec.sizes) % 4:
        raise EtVkRefusal(f"quantized_linear_impl: VK_CHECK_COND(K % 4 == 0) fails for input {list(x.spec.sizes)}")
    weight = q8_weights.prepack_quantized_linear_weight(graph, args["weights"])
    check_route("weight_storage", weight_storage, weight.spec.storage)
    scales = prepack_standard(graph, args["weight_scales"], "buffer", "width")
    bias_ref = args.get("bias")
    bias = (prepack_standard(graph, bias_ref, "buffer", "width") if bias_ref is not None
            else graph.add_tensor((), out.spec.dtype, "buffer", "width", temporary=True, label="dummy_bias"))
    return weight, scales, bias, bias_ref is not None


@register_op(OP_Q8CSW, output=resize_linear_qw_node_q8csw, constants=("weights", "weight_scales", "bias"),
             ports=Q8CSW_PORTS)
def linear_q8csw(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None,
                 weight_storage: str | None = None) -> None:
    """``linear_q8csw``: float input, no activation quantization (always the weight-only tiled shader).

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): ``x`` (Tensor ``[..., M, K]``), ``weights`` (int8 ``[N, K]``), ``weight_scales``
            (``[N4 * 4]``), ``bias`` (``[N4 * 4]`` or None) as TensorRefs.
        out (Tensor): ``[..., M, N]``.
        route (str | None): ``tiled``, the only route (checked).
        weight_storage (str | None): the packed weight's storage the case expects (checked).
    """
    weight, scales, bias, apply_bias = _prepacked(graph, args, out, weight_storage)
    check_route("route", route, "tiled")
    add_linear_q8csw_node(graph, out, args["x"], weight, scales, bias, apply_bias)


@register_op(OP_Q8TA, output=resize_linear_qw_node_q8csw,
             constants=("weights", "weight_sums", "weight_scales", "bias"), ports=Q8CSW_PORTS)
def linear_q8ta_q8csw(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None,
                      weight_storage: str | None = None, profile: str | None = None) -> None:
    """``linear_q8ta_q8csw``: per-tensor static int8 input; weight-only without int8 dot product.

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): ``x`` (Tensor), ``input_scale`` (float), ``input_zero_point`` (int), ``weights``,
            ``weight_sums`` (int32 ``[N4 * 4]``), ``weight_scales``, ``bias`` as TensorRefs (bias may be None).
        out (Tensor): ``[..., M, N]``.
        route (str | None): ``int8`` or ``tiled`` (weight-only); checked.
        weight_storage (str | None): the packed weight's storage the case expects (checked).
        profile (str | None): a routing profile answering ``can_use_int8_dot_product`` (``no-dot-product``).
    """
    if profile is not None:
        graph.route = route_for(profile, graph.ctx.info)
    x = args["x"]
    weight, scales, bias, apply_bias = _prepacked(graph, args, out, weight_storage)
    if not graph.route.int8_dot_product:
        check_route("route", route, "tiled")
        add_linear_q8csw_node(graph, out, x, weight, scales, bias, apply_bias)
        return
    check_route("route", route, "int8")
    scale, zero_point = float(np.float32(args["input_scale"])), int(args["input_zero_point"])
    sums = prepack_standard(graph, args["weight_sums"], "buffer", "width")
    packed_input = graph.add_tensor(x.spec.sizes, "int8x4", "buffer", "int8x4_4h4w", temporary=True, label="packed_int_input")
    add_quantize_and_pack_4h4w_node(graph, x, packed_input, scale, zero_point)
    add_linear_qa_qw_node(graph, out, x, packed_input, weight, sums, scales, bias, scale, zero_point, apply_bias)
