"""Launcher for ``et_vk.linear_q4gsw`` through ET-VK's ``linear_q4gsw_{tiled,coop}`` shaders.

Ported from ``runtime/graph/ops/impl/QuantizedLinear.cpp`` (``quantized_linear_impl``
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
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.context import DeviceContext
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.compute import create_local_wg_size
from vkdiff.device.graph.staging import prepack_standard, staging_buffer
from vkdiff.device.launchers.utils import arithmetic
from vkdiff.device.launchers.utils.common import div_up, dtype_suffix, pick_hw_square_wg_size, val_at
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.resources import Storage, Tensor

OP = "et_vk.linear_q4gsw.default"

PORTS = (
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


@register_op(OP, output=resize_linear_qw_node, constants=("weights", "weight_scales", "bias"), ports=PORTS,
             arithmetic=arithmetic.legacy_linear)
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
