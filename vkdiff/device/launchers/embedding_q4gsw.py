"""Launcher for ``et_vk.embedding_q4gsw`` through ET-VK's ``embedding_q4gsw*`` shaders.

Ported from ``runtime/graph/ops/impl/EmbeddingQ4gsw.cpp`` (``embedding_q4gsw`` →
``add_embedding_q4gsw_node``):

* ``is_linear_weight=False``: the 4-bit table ``uint8 [V, D/2]`` (byte = ``(even + 8) << 4 |
  (odd + 8)``) goes to a buffer as is (``prepack_standard``; bytes copied, see ``staging``); ``True``: the table is in
  ``linear_q4gsw``'s nibble order and is repacked by ``prepack_quantized_linear_weight``
  through the same prepack cache, so a weight tied to a linear is packed once;
* scales ``[V, D/gs]`` to a buffer in their own dtype;
* variant ``embedding_q4gsw[_float_scales][_linear_weight_{weight storage}]_{out storage}_{dtype}``
  (``_float_scales`` unless the scales are float16);
* global size ``(D/32, H, prod(leading dims))`` of the output, local size
  ``create_local_wg_size`` (``default_pick_local_wg_size``);
* push constants ``group_size``, ``is_linear_weight`` (int32); UBO: output sizes, WHCN ``ivec4``;
* output sizes ``indices.shape + [D]`` (``resize_embedding_q4gsw_node``); ``D % 32 == 0``.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import prepack_standard
from vkdiff.device.launchers.utils.common import dtype_suffix
from vkdiff.device.launchers.quantized_linear import prepack_quantized_linear_weight
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.embedding_q4gsw.default"

PORTS = (
    Port(file="runtime/graph/ops/impl/EmbeddingQ4gsw.cpp",
         functions=("embedding_q4gsw", "add_embedding_q4gsw_node", "pick_embedding_q4gsw_global_wg_size",
                    "resize_embedding_q4gsw_node"),
         sha256="5bc5cc37b363b78b291d142d8f507f2576a6d83780b2080d5b5372c3de6d5cbe",
         tree="executorch main cff6f4dd32"),
)


def pick_embedding_q4gsw_global_wg_size(out: Tensor) -> tuple[int, int, int]:
    """``(D/32, H, product of the leading dims)`` of the output."""
    sizes = tuple(out.spec.sizes)
    *leading, height, width = (1, *sizes) if len(sizes) == 1 else sizes
    return width // 32, height, int(np.prod(leading, dtype=np.int64)) if leading else 1


def embedding_shader(out: Tensor, weight: Tensor, scales: Tensor, is_linear_weight: bool) -> str:
    """The variant ``add_embedding_q4gsw_node`` picks."""
    name = "embedding_q4gsw" + ("" if scales.dtype == np.float16 else "_float_scales")
    if is_linear_weight:
        name += f"_linear_weight_{weight.storage}"
    return f"{name}_{out.storage}_{dtype_suffix(out.dtype)}"


def add_embedding_q4gsw_node(graph: ComputeGraph, out: Tensor, indices: Tensor, weight: Tensor, scales: Tensor,
                             group_size: int, is_linear_weight: bool) -> None:
    """``add_embedding_q4gsw_node``: one dispatch gathering and dequantizing 32 values per invocation."""
    embed_dim = out.spec.sizes[-1]
    if embed_dim % 32:
        raise EtVkRefusal(f"embedding_q4gsw: embed_dim must be a multiple of 32, got {embed_dim}")
    name = embedding_shader(out, weight, scales, is_linear_weight)
    immediates = np.array([group_size, int(is_linear_weight)], dtype=np.int32).tobytes()
    ubo = graph.sizes_ubo(out)
    graph.dispatch(lambda: name, global_wg=lambda: pick_embedding_q4gsw_global_wg_size(out),
                   resources=[out, indices, weight, scales, ubo], immediates=immediates,
                   resize=lambda: graph.virtual_resize(out, (*indices.spec.sizes, embed_dim)))


def resize_embedding_q4gsw_node(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_embedding_q4gsw_node``: ``indices.shape + [D]``, D = 2 × the table's packed width."""
    weight = np.asarray(args["weight"])
    return (*np.shape(args["indices"]), weight.shape[-1] * 2), np.dtype(dtype or np.asarray(args["weight_scales"]).dtype)


@register_op(OP, output=resize_embedding_q4gsw_node, constants=("weight", "weight_scales"), ports=PORTS)
def embedding_q4gsw_impl(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``embedding_q4gsw``: prepack the table (standard or linear repack) and the scales, then the node.

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): ``weight``, ``weight_scales`` (TensorRef), ``group_size`` (int), ``indices`` (Tensor,
            int32), ``is_linear_weight`` (bool), by schema name.
        out (Tensor): the output ``indices.shape + [D]``.
    """
    is_linear_weight = bool(args["is_linear_weight"])
    weight = (prepack_quantized_linear_weight(graph, args["weight"]) if is_linear_weight
              else prepack_standard(graph, args["weight"], "buffer", "width"))
    scales = prepack_standard(graph, args["weight_scales"], "buffer", "width")
    add_embedding_q4gsw_node(graph, out, args["indices"], weight, scales, int(args["group_size"]), is_linear_weight)
