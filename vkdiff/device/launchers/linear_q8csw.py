"""Launchers for ``et_vk.linear_q8csw`` and ``et_vk.linear_q8ta_q8csw``: int8 per-channel weights, float I/O.

Ported from ``runtime/graph/ops/impl/QuantizedLinear.cpp`` (``linear_q8csw``, ``linear_q8ta_q8csw`` →
``quantized_linear_impl`` → ``prepack_quantized_linear_weight`` (8-bit) and ``add_linear_qw_node`` /
``add_linear_qa_qw_node``, ``pick_linear_qw_shader``, ``quantized_linear_{global,local}_wg_size``,
``resize_linear_qw_node``) and ``QuantizeDequantize.cpp`` (``add_quantize_and_pack_4h4w_node``,
``quantize_and_pack_4h4w_global_wg_size``), the 8-bit siblings of ``linear_dq8ca_q4gsw.py``:

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
from vkdiff.device.launchers.linear_q4gsw import linear_out_sizes
from vkdiff.device.launchers.utils.q8_weights import prepack_quantized_linear_weight
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.resources import Tensor
from vkdiff.device.routing import route_for

OP_Q8CSW = "et_vk.linear_q8csw.default"
OP_Q8TA = "et_vk.linear_q8ta_q8csw.default"
TREE = "executorch main cff6f4dd32"

PORTS = (
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


def resize_linear_qw_node(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
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
    weight = prepack_quantized_linear_weight(graph, args["weights"])
    check_route("weight_storage", weight_storage, weight.spec.storage)
    scales = prepack_standard(graph, args["weight_scales"], "buffer", "width")
    bias_ref = args.get("bias")
    bias = (prepack_standard(graph, bias_ref, "buffer", "width") if bias_ref is not None
            else graph.add_tensor((), out.spec.dtype, "buffer", "width", temporary=True, label="dummy_bias"))
    return weight, scales, bias, bias_ref is not None


@register_op(OP_Q8CSW, output=resize_linear_qw_node, constants=("weights", "weight_scales", "bias"), ports=PORTS)
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


@register_op(OP_Q8TA, output=resize_linear_qw_node, constants=("weights", "weight_sums", "weight_scales", "bias"),
             ports=PORTS)
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
