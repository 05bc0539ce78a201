"""Launcher for ``et_vk.q8ta_linear``: int8x4 activations × int8 weights → int8x4; and the host code
``et_vk.q8ta_linear_gemv`` (``q8ta_linear_gemv.py``) shares with it.

Ported from ``runtime/graph/ops/impl/Q8taLinear.cpp`` and ``Q8taLinearGemv.cpp`` (the same host code but
for the node), ``QuantizedLinear.cpp`` (``prepack_quantized_linear_weight``, 8-bit branch) and
``Q8taConv2d.cpp`` (``activation_type_from_string``):

* ``VK_CHECK_COND(K % 4 == 0)``; the input and the output must have the packed dim info of
  ``PACKED_INT8_4H4W`` (``q8ta_linear``: width packed in blocks of 4, height the outer dim in blocks of 4)
  or of ``PACKED_INT8_4W`` (``q8ta_linear_gemv``: outer block 1), int8x4 buffers;
* weight ``int8 [N, K]`` → ``pack_q8_linear_weight_{texture2d|buffer}`` (through the prepack cache): int32
  ``[K4, N4 * 4]``, 4×4 blocks transposed (``packed[k4][n4]``), texture2d unless ``N4 > max_texture2d_dim`` or
  ``K4 > max_texture2d_dim``; bindings packed, the weight's bytes read as int words; push constants
  ``sizes_pc_of(packed)``, ``ivec2(K, N)``; global ``(N4, K4, 1)``, local ``create_local_wg_size``;
* weight scales, weight sums and bias ``prepack_standard`` to width-packed buffers; no bias binds a
  0-dim ``TmpTensor`` of the scales' dtype;
* variant ``q8ta_linear[_gemv]`` with int8 dot product (``Route.int8_dot_product``), else
  ``q8ta_linear[_gemv]_fallback``, suffixed by the scales' dtype (``_float``); the shaders exist for
  ``WEIGHT_STORAGE`` texture2d only, whatever storage the weight was packed into;
* bindings: output, input, packed weight, weight sums, weight scales, bias; UBOs output sizes, input sizes;
  push constants ``(float input_scale, int input_zp, float 1.0f / output_scale, int output_zp)``; spec
  constants from id 3 ``apply_bias, activation_type`` (none 0, relu 1);
* ``q8ta_linear``: global ``(div_up(N, 8), div_up(M, 4), 1)`` with ``M = size_at(-2, out)``, local
  ``pick_hw_square_wg_size``; resize ``resize_q8ta_linear_node`` (the input's sizes, the output's N);
* ``q8ta_linear_gemv``: global ``(div_up(N, 8), 1, 1)``, local ``(1, 1, 64)`` (64 lanes share K); no resize
  function.

Launcher options: ``profile`` (a routing profile answering ``supports_int8_dot_product``; ``no-dot-product``
takes the ``_fallback`` variants) and ``route`` (``dot`` or ``fallback``: the variant a case expects).
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import prepack_standard
from vkdiff.device.graph.vtensor import PackedDimInfo
from vkdiff.device.launchers.utils.common import div_up, dtype_suffix, pick_hw_square_wg_size, val_at
from vkdiff.device.launchers.utils.q8_weights import prepack_quantized_linear_weight
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor
from vkdiff.device.runtime.routing import route_for

LINEAR_OP = "et_vk.q8ta_linear.default"

TREE = "executorch main cff6f4dd32"
SHARED_PORTS = (
    Port(file="runtime/graph/ops/impl/QuantizedLinear.cpp", functions=("prepack_quantized_linear_weight",),
         sha256="1f719e717139d3598137ba34f25c30c203feec9ffa646c7007d4e374e541819e", tree=TREE),
    Port(file="runtime/graph/ops/impl/Q8taConv2d.cpp", functions=("activation_type_from_string",),
         sha256="26a4ba46a8a74dba410b2ba0152d7c67d0e43f244b6468fb945ccb68434f50a7", tree=TREE),
)
LINEAR_PORTS = (
    Port(file="runtime/graph/ops/impl/Q8taLinear.cpp",
         functions=("q8ta_linear", "add_q8ta_linear_node", "q8ta_linear_check_packed_dim_info",
                    "q8ta_linear_global_wg_size", "q8ta_linear_local_wg_size", "resize_q8ta_linear_node"),
         sha256="bba1bee4fc42e7598319380eced26531bd25bf13a5a421b83fa71c690c5b23f1", tree=TREE),
    Port(file="runtime/graph/ops/impl/Common.cpp", functions=("pick_hw_square_wg_size",),
         sha256="c223f63c0b8eeb9811a0f4641886bac3959230a0aba9137eb3a87a7bdd7ffe3b", tree=TREE),
    *SHARED_PORTS,
)

ROUTES = ("dot", "fallback")
"""The variants ``add_q8ta_linear[_gemv]_node`` picks between by ``supports_int8_dot_product``."""

ACTIVATIONS = {"none": 0, "relu": 1}
"""``ActivationType`` by the string ``activation_type_from_string`` reads."""

WIDTH, HEIGHT = 0, 1
"""``WHCN::kWidthDim``, ``WHCN::kHeightDim``."""


def q8ta_linear_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``[*x.shape[:-1], N]`` int8 codes (the graph's int8x4 output)."""
    return (*np.shape(args["x"])[:-1], np.shape(args["weights"])[0]), np.int8


def activation_type_from_string(activation: str) -> int:
    """``activation_type_from_string`` (``Q8taConv2d.cpp``): ``VK_THROW`` on any other string."""
    if activation not in ACTIVATIONS:
        raise EtVkRefusal(f"Unknown activation type: {activation}")
    return ACTIVATIONS[activation]


def check_packed_dim_info(tensor: Tensor, name: str, outer_block: int, check: str) -> None:
    """``q8ta_linear[_gemv]_check_packed_dim_info``: width packed by 4, height the outer dim by ``outer_block``."""
    info: PackedDimInfo = tensor.spec.info
    if not (info.packed_dim == WIDTH and info.packed_dim_block_size == 4 and info.outer_packed_dim == HEIGHT
            and info.outer_packed_dim_block_size == outer_block):
        raise EtVkRefusal(f"VK_CHECK_COND({check}(graph.packed_dim_info_of({name}))) failed: the {name} is "
                          f"{tensor.spec.layout} {tensor.spec.storage} (packed dim {info.packed_dim} by "
                          f"{info.packed_dim_block_size}, outer dim {info.outer_packed_dim} by "
                          f"{info.outer_packed_dim_block_size})")


def requant_push_constants(input_scale: float, input_zp: int, output_scale: float, output_zp: int) -> bytes:
    """``(input_scale, input_zp, 1.0f / output_scale, output_zp)`` as the node's push constants (float32 math)."""
    inv = np.float32(1.0) / np.float32(output_scale)
    return struct.pack("<fifi", np.float32(input_scale), int(input_zp), inv, int(output_zp))


def q8ta_variant(graph: ComputeGraph, stem: str, scales: Tensor, route: str | None) -> str:
    """``q8ta_linear[_gemv]`` or its ``_fallback`` by ``supports_int8_dot_product``, with the scales' dtype."""
    taken = "dot" if graph.route.int8_dot_product else "fallback"
    if route is not None and route != taken:
        raise ValueError(f"{stem}: the case declares route={route} but the device profile takes route={taken}")
    return f"{stem}{'' if taken == 'dot' else '_fallback'}_{dtype_suffix(scales.spec.element_dtype)}"


def prepack_q8ta_linear_args(graph: ComputeGraph, args: Mapping[str, Any]
                             ) -> tuple[Tensor, Tensor, Tensor, Tensor, int]:
    """``q8ta_linear[_gemv]`` before its node: the K check, the prepacked weight, sums, scales and bias (or the
    dummy), and the activation type."""
    k = val_at(-1, args["x"].spec.sizes)
    if k % 4:
        raise EtVkRefusal(f"VK_CHECK_COND(K % 4 == 0) failed: K={k} (input sizes {list(args['x'].spec.sizes)})")
    weight = prepack_quantized_linear_weight(graph, args["weights"])
    scales = prepack_standard(graph, args["weight_scales"], "buffer", "width")
    sums = prepack_standard(graph, args["weight_sums"], "buffer", "width")
    dummy = graph.add_tensor((), scales.spec.dtype, "buffer", "width", temporary=True, label="dummy_bias")
    bias = dummy if args.get("bias") is None else prepack_standard(graph, args["bias"], "buffer", "width")
    return weight, sums, scales, bias, activation_type_from_string(str(args.get("activation", "none")))


def add_q8ta_linear_node(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, *, gemv: bool,
                         route: str | None) -> None:
    """``add_q8ta_linear_node`` / ``add_q8ta_linear_gemv_node`` after ``q8ta_linear[_gemv]``'s prepacking."""
    x = args["x"]
    weight, sums, scales, bias, activation = prepack_q8ta_linear_args(graph, args)
    check = "q8ta_linear_gemv_check_packed_dim_info" if gemv else "q8ta_linear_check_packed_dim_info"
    for tensor, name in ((x, "packed_int8_input"), (out, "packed_int8_output")):
        check_packed_dim_info(tensor, name, 1 if gemv else 4, check)
    immediates = requant_push_constants(args["input_scale"], args["input_zero_point"], args["output_scale"],
                                        args["output_zero_point"])
    shader = q8ta_variant(graph, "q8ta_linear_gemv" if gemv else "q8ta_linear", scales, route)

    def global_wg() -> tuple[int, int, int]:
        n = val_at(-1, out.spec.sizes)
        return (div_up(n, 8), 1, 1) if gemv else (div_up(n, 8), div_up(val_at(-2, out.spec.sizes), 4), 1)

    local_wg: Callable[[], tuple[int, int, int]] = (lambda: (1, 1, 64)) if gemv else (
        lambda: pick_hw_square_wg_size(global_wg()))
    graph.dispatch(shader, global_wg=global_wg, local_wg=local_wg,
                   resources=[out, x, weight, sums, scales, bias, graph.sizes_ubo(out), graph.sizes_ubo(x)],
                   immediates=immediates, spec={3: int(args.get("bias") is not None), 4: activation},
                   resize=None if gemv else (lambda: resize_q8ta_linear_node(graph, out, x)))


def resize_q8ta_linear_node(graph: ComputeGraph, out: Tensor, x: Tensor) -> None:
    """``resize_q8ta_linear_node``: the input's leading dims, the output's own last dim (N)."""
    graph.virtual_resize(out, (*x.spec.sizes[:-1], out.spec.sizes[-1]))


def with_profile(graph: ComputeGraph, profile: str | None) -> None:
    """Answer ``supports_int8_dot_product`` from a routing profile (``routes.toml``)."""
    if profile is not None:
        graph.route = route_for(profile, graph.ctx.info)


@register_op(LINEAR_OP, output=q8ta_linear_output, constants=("weights", "weight_sums", "weight_scales", "bias"),
             ports=LINEAR_PORTS)
def q8ta_linear(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None,
                profile: str | None = None) -> None:
    """``q8ta_linear``: a tiled int8 GEMM of a ``PACKED_INT8_4H4W`` input into a ``PACKED_INT8_4H4W`` output.

    Args:
        graph (ComputeGraph): the graph the nodes join.
        args (Mapping[str, Any]): ``x`` (int8x4 device tensor ``[..., M, K]``), ``input_scale``,
            ``input_zero_point``, ``weights`` (TensorRef int8 ``[N, K]``), ``weight_sums`` (int32),
            ``weight_scales``, ``output_scale``, ``output_zero_point``, ``bias`` (TensorRef or None), ``activation``.
        out (Tensor): int8x4 ``[..., M, N]``.
        route (str | None): the variant the case expects (``ROUTES``).
        profile (str | None): a routing profile answering ``supports_int8_dot_product``.

    Raises:
        EtVkRefusal: one of the C++'s ``VK_CHECK_COND``s (K % 4, the packed dim info) or an unknown activation.
        ValueError: the profile takes another route than ``route``.

    Example::

        run_op(ctx, LINEAR_OP, {"x": codes, "input_scale": 0.02, ...}, storage="buffer", layout="int8x4_4h4w")
    """
    with_profile(graph, profile)
    add_q8ta_linear_node(graph, args, out, gemv=False, route=route)
