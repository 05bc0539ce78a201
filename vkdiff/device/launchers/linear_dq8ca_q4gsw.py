"""Launcher for ``et_vk.linear_dq8ca_q4gsw``: dynamically quantized int8 activations × 4-bit weights.

Ported from ``runtime/graph/ops/impl/QuantizedLinear.cpp`` (``linear_dq8ca_q4gsw`` →
``quantized_linear_impl`` → ``add_linear_dqa_qw_node``) and ``QuantizeDequantize.cpp``
(``add_quantize_and_pack_4h4w_with_group_sums_node``). The activation scales and zero
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
"""

from __future__ import annotations

from typing import Any, Mapping

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX, prepack_standard
from vkdiff.device.launchers.choose_qparams import with_zp_suffix
from vkdiff.device.launchers.utils import arithmetic
from vkdiff.device.launchers.utils.common import div_up, pick_hw_square_wg_size, val_at
from vkdiff.device.launchers.linear_q4gsw import add_linear_qw_node, linear_out_sizes, prepack_quantized_linear_weight
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.resources import Tensor

OP = "et_vk.linear_dq8ca_q4gsw.default"

PORTS = (
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


def resize_linear_qw_node(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
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


@register_op(OP, output=resize_linear_qw_node, constants=("weights", "weight_sums", "weight_scales", "bias"),
             ports=PORTS, placements={"input_scales": "texture3d", "input_zp": "texture3d"},
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
