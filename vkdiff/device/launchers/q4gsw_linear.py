"""Launcher for ``et_vk.linear_q4gsw`` on trees since v1.4.0: ``Q4gswLinear.cpp``'s ``__w_4x8`` shaders.

Ported from ``runtime/graph/ops/impl/Q4gswLinear.cpp`` (``q4gsw_linear``) and
``Preprocess.cpp`` (``add_transpose_cast_contig_to_vectorized_node``):

* the weight ``uint8 [N, K/2]`` is repacked by ``pack_q4_linear_weight__w_4x8_nc_buffer``
  into an int32 buffer of ``K/4 * N4_padded * 2`` words (no prepack cache: each use
  packs again); scales go to a buffer in the input's dtype, bias (if any) to a buffer;
* float32 input: a GEMM node (``q4gsw_linear_gemm__w_4x8_nc_<out storage>_<dtype>``, global
  ``(N/8, M/4, 1)``, local ``(8, 8, 1)``) and a GEMV node
  (``q4gsw_linear_gemv_coop__w_4x8_nc_buffer_{g1w64|g4w16|g8w8}_<out storage>_<dtype>`` by N,
  global ``(N8/groups, groups, workers)``); each is gated to a zero global size unless
  M > 1 (GEMM) or M == 1 (GEMV), so one runs;
* float16 input: the input is first transposed into a ``[K * M4 * 4]`` buffer
  (``transpose_cast_contig_to_vectorized[_4x4]_*``) and the GEMM is the ``__tin__`` variant
  (global ``(M/8, N/4, 1)``, local ``(1, 128, 1)``);
* spec constants from id 3: ``apply_bias, K, group_size``; UBOs output then input sizes;
* output ``[M, N]`` or ``[B, M, N]`` (``resize_q4gsw_linear_node``).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.staging import SUFFIX, prepack_standard, staging_buffer, write_nchw
from vkdiff.device.graph.compute import create_local_wg_size
from vkdiff.device.launchers.utils import arithmetic
from vkdiff.device.launchers.utils.common import div_up, val_at
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.linear_q4gsw.default"
OP_ALIAS = "et_vk.q4gsw_linear.default"
"""The second name ``Q4gswLinear.cpp`` registers for the same ``q4gsw_linear`` function."""

PORTS = (
    Port(file="runtime/graph/ops/impl/Q4gswLinear.cpp",
         functions=("q4gsw_linear", "add_q4gsw_linear_w_4x8_node", "add_q4gsw_linear_tin_w_4x8_node",
                    "add_q4gsw_linear_nc_coop_gemv_node", "prepack_q4_w_4x8_nc_buffer", "prepack_q4_scales",
                    "pick_coop_variant_for_N", "resize_q4gsw_linear_node"),
         sha256="cd2b1bd219d5e2edb32fea383c593dea810ba06b2b450edee0946d5b120284a1",
         tree="executorch main cff6f4dd32"),
    Port(file="runtime/graph/ops/impl/Preprocess.cpp",
         functions=("add_transpose_cast_contig_to_vectorized_node", "transpose_cast_global_wg_size"),
         sha256="b3d585b580c8532a2f0787da049533ab3ae53fbcb641f0abd884deef0445b10a", tree="executorch main cff6f4dd32"),
    *arithmetic.GEMV_W4X8_PORTS,
)

GEMM_TILE = (4, 8)
"""``kGemmTileM``, ``kGemmTileN``."""
TIN_GEMM_TILE = (8, 4)
"""``kTinGemmTileM``, ``kTinGemmTileN``."""


def pick_coop_variant_for_n(n: int) -> tuple[str, int, int]:
    """``pick_coop_variant_for_N``: (suffix, groups, workers per group); 64 threads per workgroup."""
    if n <= 1024:
        return "_g1w64", 1, 64
    if n <= 4096:
        return "_g4w16", 4, 16
    return "_g8w8", 8, 8


def resize_q4gsw_linear_node(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_q4gsw_linear_node``: ``[M, N]`` for 2-D input, else ``[B, M, N]``."""
    x, w = np.asarray(args["self"]), np.asarray(args["weights"])
    m, n = val_at(-2, x.shape), w.shape[0]
    return ((m, n) if x.ndim == 2 else (x.shape[0], m, n)), x.dtype


def prepack_q4_w_4x8_nc_buffer(graph: ComputeGraph, weights: TensorRef) -> Tensor:
    """``prepack_q4_w_4x8_nc_buffer``: ``uint8 [N, K/2]`` → int32 ``[K4 * N4_padded * 2]`` (N8-contiguous ivec4)."""
    n, k = weights.data.shape[0], weights.data.shape[1] * 2
    if n % 4 or k % 4:
        raise EtVkRefusal(f"linear_q4gsw (Q4gswLinear.cpp): N and K must be multiples of 4, got N={n}, K={k}")
    k4, n4 = k // 4, n // 4
    n4_padded = (n4 + 1) & ~1
    packed = graph.add_tensor((k4 * n4_padded * 2,), "int32", "buffer", "width", label="packed_q4_weight")
    global_wg = (k4, n4_padded // 2, 1)
    pcs = packed.spec.sizes_block() + np.array([k, n, n4_padded], np.int32).tobytes()
    src = staging_buffer(graph, np.asarray(weights.data, np.uint8), "staging_q4_weight")
    graph.dispatch("pack_q4_linear_weight__w_4x8_nc_buffer", global_wg=global_wg,
                   local_wg=create_local_wg_size(global_wg), resources=[packed, src], immediates=pcs, prepack=True)
    return packed


def prepack_q4_scales(graph: ComputeGraph, scales: TensorRef, dtype: str) -> Tensor:
    """``prepack_q4_scales``: the scales in the input's dtype, a buffer (``add_prepack_standard_node``)."""
    tensor = graph.add_tensor(np.shape(scales.data), dtype, "buffer", "width", label="q4_scales")
    write_nchw(graph, tensor, np.asarray(scales.data), prepack=True)
    return tensor


def _bias(graph: ComputeGraph, bias: TensorRef | None, out: Tensor) -> tuple[Tensor, int]:
    if bias is None:
        return graph.add_tensor((), out.spec.dtype, "buffer", "width", temporary=True, label="dummy_bias"), 0
    return prepack_standard(graph, bias, "buffer", "width"), 1


def out_sizes(x: Tensor, n: int) -> tuple[int, ...]:
    """``resize_q4gsw_linear_node``'s sizes: ``[M, N]`` for 2-D input, else ``[B, M, N]``."""
    sizes = x.spec.sizes
    m = val_at(-2, sizes)
    return (m, n) if len(sizes) == 2 else (sizes[0], m, n)


def add_transpose_cast_contig_to_vectorized_node(graph: ComputeGraph, x: Tensor, out: Tensor) -> None:
    """``add_transpose_cast_contig_to_vectorized_node`` (self-gated off when M == 1)."""
    texture = x.spec.storage != "buffer"
    name = (f"transpose_cast_contig_to_vectorized{'_4x4' if texture else ''}_{SUFFIX[x.spec.dtype]}"
            f"_{'texture3d' if texture else 'buffer'}_{SUFFIX[out.spec.dtype]}_buffer")

    def global_wg() -> tuple[int, int, int]:
        m, k = val_at(-2, x.spec.sizes), val_at(-1, x.spec.sizes)
        return (0, 0, 0) if m == 1 else ((div_up(k, 4) if texture else k), div_up(m, 4), 1)

    def resize() -> None:
        m, k = val_at(-2, x.spec.sizes), val_at(-1, x.spec.sizes)
        graph.virtual_resize(out, (k * div_up(m, 4) * 4,))

    graph.dispatch(name, global_wg=global_wg, local_wg=lambda: (2, 16, 1) if texture else (8, 8, 1),
                   resources=[out, x, graph.sizes_ubo(x)], resize=resize, resize_args=(x,))


def _gemv_node(graph: ComputeGraph, x: Tensor, tin: Tensor, weight: Tensor, scales: Tensor, bias: Tensor,
               spec: dict, out: Tensor, n: int) -> None:
    """``add_q4gsw_linear_nc_coop_gemv_node`` (self-gated: runs only when M == 1)."""
    def pick() -> tuple[str, int, int]:
        return pick_coop_variant_for_n(val_at(-1, out.spec.sizes))

    def global_wg() -> tuple[int, int, int]:
        _, groups, workers = pick()
        m = val_at(-2, out.spec.sizes)
        return (0, 0, 0) if m != 1 else (div_up(div_up(val_at(-1, out.spec.sizes), 8), groups), groups, workers)

    graph.dispatch(lambda: f"q4gsw_linear_gemv_coop__w_4x8_nc_buffer{pick()[0]}_{out.spec.storage}_"
                           f"{SUFFIX[out.spec.dtype]}",
                   global_wg=global_wg, local_wg=lambda: (1, pick()[1], pick()[2]), spec=spec,
                   resources=[out, x, tin, weight, scales, bias, graph.sizes_ubo(out), graph.sizes_ubo(x)],
                   resize=lambda: graph.virtual_resize(out, out_sizes(x, n)), resize_args=(x,))


@register_op(OP_ALIAS, output=resize_q4gsw_linear_node, constants=("weights", "weight_scales", "bias"), ports=PORTS,
             arithmetic=arithmetic.q4gsw_linear)
@register_op(OP, output=resize_q4gsw_linear_node, constants=("weights", "weight_scales", "bias"), ports=PORTS,
             arithmetic=arithmetic.q4gsw_linear)
def q4gsw_linear(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``q4gsw_linear``: the float32 path or the float16 transposed-input (``tin``) path."""
    x, weights, group_size = args["self"], args["weights"], int(args["group_size"])
    n, k = weights.data.shape[0], weights.data.shape[1] * 2
    in_dtype = x.spec.dtype
    packed = prepack_q4_w_4x8_nc_buffer(graph, weights)
    scales = prepack_q4_scales(graph, args["weight_scales"], in_dtype)
    bias, apply_bias = _bias(graph, args.get("bias"), out)
    spec = {3: apply_bias, 4: k, 5: group_size}
    storage, dtype = out.spec.storage, SUFFIX[out.spec.dtype]
    if in_dtype == "float32":
        tin = graph.add_tensor((), in_dtype, "buffer", "width", temporary=True, label="dummy_transposed_input")
        name = f"q4gsw_linear_gemm__w_4x8_nc_{storage}_{dtype}"
        tile, local = GEMM_TILE, (8, 8, 1)
    else:
        m = val_at(-2, x.spec.sizes)
        tin = graph.add_tensor((k * div_up(m, 4) * 4,), in_dtype, "buffer", "width", temporary=True, label="transposed_input")
        add_transpose_cast_contig_to_vectorized_node(graph, x, tin)
        name = f"q4gsw_linear_gemm__tin__w_4x8_nc_{storage}_{dtype}"
        tile, local = TIN_GEMM_TILE, (1, 128, 1)

    def global_wg() -> tuple[int, int, int]:
        m, cols = val_at(-2, out.spec.sizes), val_at(-1, out.spec.sizes)
        if m == 1:
            return (0, 0, 0)
        if in_dtype == "float32":
            return (div_up(cols, tile[1]), div_up(m, tile[0]), 1)
        return (div_up(m, tile[0]), div_up(cols, tile[1]), 1)

    graph.dispatch(lambda: name, global_wg=global_wg, local_wg=lambda: local, spec=spec,
                   resources=[out, x, tin, packed, scales, bias, graph.sizes_ubo(out), graph.sizes_ubo(x)],
                   resize=lambda: graph.virtual_resize(out, out_sizes(x, n)), resize_args=(x,))
    _gemv_node(graph, x, tin, packed, scales, bias, spec, out, n)
