"""Launcher for ``et_vk.q4gsw_requant``: float latent weights re-quantized into ``W_4X8`` packed 4-bit codes.

Ported from ``runtime/graph/ops/impl/QuantizedLinearRequant.cpp`` (``q4gsw_requant``,
``q4gsw_requant_global_wg_size``, ``q4gsw_requant_local_wg_size``, ``resize_q4gsw_requant_node``):

* ``VK_CHECK_COND``s: latent and scales float32, output int32, latent and output on buffers, ``group_size > 0``
  and a multiple of 4, latent 2-D ``[N, K]`` with ``N, K > 0``, ``N % 4 == 0``, ``K % 4 == 0``,
  ``K % group_size == 0``, ``K4 <= 65535`` and ``N8 <= 65535``;
* scales ``[K / gs, N]`` prepacked to a buffer (``prepack_standard``);
* variant ``q4gsw_requant_<latent storage>_<latent dtype>`` (the yaml builds ``q4gsw_requant_buffer_float``);
  bindings packed output, latent, scales, UBO latent sizes; spec constant ``group_size`` (id 3);
  global ``(K4, N8, 1)`` with ``N8 = ceil(ceil(N / 4) / 2)``, local ``(8, 8, 1)``;
* output int32 ``[K4 * N4_padded * 2]`` (``resize_q4gsw_requant_node``, ``N4_padded`` = ``N / 4`` rounded up to
  even).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX, prepack_standard
from vkdiff.device.launchers.utils.common import div_up
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.q4gsw_requant.default"

PORTS = (Port(file="runtime/graph/ops/impl/QuantizedLinearRequant.cpp",
              functions=("q4gsw_requant", "q4gsw_requant_global_wg_size", "q4gsw_requant_local_wg_size",
                         "resize_q4gsw_requant_node"),
              sha256="69cc705b5d411851b78fa4ef8aa0e3a1a11537c547eaaf147d7669a0f447a98b",
              tree="executorch main cff6f4dd32"),)


def packed_numel(n: int, k: int) -> int:
    """``resize_q4gsw_requant_node``: ``K4 * N4_padded * 2`` int32 words."""
    n4 = n // 4
    return (k // 4) * ((n4 + 1) & ~1) * 2


def output_of(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """The packed output the graph declares: int32 ``[K4 * N4_padded * 2]``."""
    n, k = np.shape(args["latent"])
    return (packed_numel(n, k),), np.int32


def _checks(latent: Tensor, scales: np.ndarray, packed: Tensor, group_size: int) -> None:
    """``q4gsw_requant``'s ``VK_CHECK_COND``s, in order."""
    sizes = latent.spec.sizes
    n, k = sizes if len(sizes) == 2 else (0, 0)
    checks = (
        (latent.spec.dtype == "float32", "graph.dtype_of(latent) == vkapi::kFloat"),
        (scales.dtype == np.float32, "graph.dtype_of(scales) == vkapi::kFloat"),
        (packed.spec.dtype == "int32", "graph.dtype_of(packed) == vkapi::kInt"),
        (latent.spec.storage == "buffer", "graph.is_buffer_storage(latent)"),
        (packed.spec.storage == "buffer", "graph.is_buffer_storage(packed)"),
        (group_size > 0 and group_size % 4 == 0, "group_size_val > 0 && group_size_val % 4 == 0"),
        (len(sizes) == 2, "latent_sizes.size() == 2"),
        (n > 0 and k > 0, "N > 0 && K > 0"),
        (n % 4 == 0 and k % 4 == 0, "N % 4 == 0 && K % 4 == 0"),
        (k % max(group_size, 1) == 0, "K % group_size_val == 0"),
        (k // 4 <= 65535 and div_up(n // 4, 2) <= 65535, "K4 <= 65535u && N8 <= 65535u"),
    )
    for ok, text in checks:
        if not ok:
            raise EtVkRefusal(f"q4gsw_requant: VK_CHECK_COND({text}) fails for latent {latent.spec.storage} "
                              f"{latent.spec.dtype} {list(sizes)}, group_size {group_size}")


@register_op(OP, output=output_of, constants=("scales",), ports=PORTS)
def q4gsw_requant(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``q4gsw_requant``: one ``ivec4`` (a 4K x 8N block of codes) per thread.

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): ``latent`` (Tensor ``[N, K]``, float32, buffer), ``scales`` (TensorRef ``[K / gs, N]``),
            ``group_size`` (int).
        out (Tensor): int32 ``[K4 * N4_padded * 2]`` on a buffer.
    """
    latent, group_size = args["latent"], int(args["group_size"])
    _checks(latent, np.asarray(args["scales"].data), out, group_size)
    scales = prepack_standard(graph, args["scales"], "buffer", "width")
    name = f"q4gsw_requant_{latent.spec.storage}_{SUFFIX[latent.spec.dtype]}"

    def global_wg() -> tuple[int, int, int]:
        n, k = latent.spec.sizes
        return (k // 4, div_up(div_up(n, 4), 2), 1)

    def resize() -> None:
        graph.virtual_resize(out, (packed_numel(*latent.spec.sizes),))

    graph.dispatch(name, global_wg=global_wg, local_wg=(8, 8, 1), spec={3: group_size},
                   resources=[out, latent, scales, graph.sizes_ubo(latent)], resize=resize)
