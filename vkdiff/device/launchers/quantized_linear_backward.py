"""Launcher for ``et_vk.linear_q4gsw_backward.default``: the input gradient through a frozen 4-bit linear.

Ported from ``runtime/graph/ops/impl/QuantizedLinearBackward.cpp`` (``linear_q4gsw_backward``,
``linear_q4gsw_backward_global_wg_size``, ``linear_q4gsw_backward_local_wg_size``,
``resize_linear_q4gsw_backward_node``), with ``Q4gswLinear.cpp``'s prepack helpers (shared with
``q4gsw_linear``, see ``launchers/q4gsw_linear.py``):

* checks, in order: ``d_out`` and ``d_x`` float32 on buffers; ``group_size > 0`` and a multiple of 4;
  ``N = weights[0] > 0``, ``K = 2 * weights[1] > 0``, both multiples of 4; ``K % group_size == 0``;
  ``d_out[-1] == N``; ``ceil(tiles / 64) <= 65535``;
* prepack: ``pack_q4_linear_weight__w_4x8_nc_buffer`` (the forward's ``W_4X8`` block layout) and the scales
  ``[K/gs, N]`` as a float32 buffer;
* variant ``q4gsw_backward_<d_x storage>_<dtype>`` (the yaml builds ``q4gsw_backward_buffer_float``);
  bindings ``d_x`` (write), ``d_out``, packed weight, scales; UBOs ``sizes(d_out)``, ``sizes(d_x)``;
  spec constant 3 ``group_size``;
* one thread per 4×4 tile of ``d_x [M, K]``: global ``(div_up4(M) * div_up4(K), 1, 1)`` from ``d_x``'s sizes,
  local ``(64, 1, 1)``;
* resize ``resize_linear_q4gsw_backward_node``: ``d_x`` becomes ``d_out``'s sizes with the last set to K.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import div_up, val_at
from vkdiff.device.launchers.q4gsw_linear import (
    prepack_q4_scales,
    prepack_q4_w_4x8_nc_buffer,
)
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.linear_q4gsw_backward.default"
PORTS = (
    Port(file="runtime/graph/ops/impl/QuantizedLinearBackward.cpp",
         functions=("linear_q4gsw_backward", "linear_q4gsw_backward_global_wg_size",
                    "linear_q4gsw_backward_local_wg_size", "resize_linear_q4gsw_backward_node"),
         sha256="4b3fdf6600fd9df02b0c8852916b37bddcece6d5f2a272dbb8a3bc090b4720d5",
         tree="executorch main cff6f4dd32"),
    Port(file="runtime/graph/ops/impl/Q4gswLinear.cpp",
         functions=("prepack_q4_w_4x8_nc_buffer", "prepack_q4_scales"),
         sha256="cd2b1bd219d5e2edb32fea383c593dea810ba06b2b450edee0946d5b120284a1",
         tree="executorch main cff6f4dd32"),
)
MAX_WORKGROUPS = 65535


def resize_sizes(d_out_sizes, k: int) -> tuple[int, ...]:
    """``resize_linear_q4gsw_backward_node``'s sizes: ``d_out``'s with the last set to K."""
    return (*(int(s) for s in d_out_sizes[:-1]), int(k))


def output_of(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``linear_q4gsw_backward_meta``: ``d_out.shape[:-1] + (K,)`` in ``d_out``'s dtype."""
    d_out = np.asarray(args["d_out"])
    return resize_sizes(d_out.shape, np.shape(args["weights"])[1] * 2), d_out.dtype


def tile_count(m: int, k: int) -> int:
    """4×4 tiles of ``d_x [M, K]``: one thread each."""
    return div_up(m, 4) * div_up(k, 4)


def check_linear_q4gsw_backward(d_out: Tensor, d_x: Tensor, n: int, k: int, group_size: int) -> None:
    """The ``VK_CHECK_COND``s of ``linear_q4gsw_backward``, in their order."""
    checks = (
        (lambda: d_out.spec.dtype == "float32", "graph.dtype_of(d_out) == vkapi::kFloat"),
        (lambda: d_x.spec.dtype == "float32", "graph.dtype_of(d_x) == vkapi::kFloat"),
        (lambda: d_out.spec.storage == "buffer", "graph.is_buffer_storage(d_out)"),
        (lambda: d_x.spec.storage == "buffer", "graph.is_buffer_storage(d_x)"),
        (lambda: group_size > 0 and group_size % 4 == 0, "group_size_val > 0 && group_size_val % 4 == 0"),
        (lambda: n > 0 and k > 0, "N > 0 && K > 0"),
        (lambda: n % 4 == 0 and k % 4 == 0, "N % 4 == 0 && K % 4 == 0"),
        (lambda: k % group_size == 0, "K % group_size_val == 0"),
        (lambda: val_at(-1, d_out.spec.sizes) == n, "graph.size_at<int64_t>(-1, d_out) == N"),
    )
    for holds, condition in checks:
        if not holds():
            raise EtVkRefusal(f"linear_q4gsw_backward: VK_CHECK_COND({condition}) failed (d_out "
                              f"{list(d_out.spec.sizes)} {d_out.spec.dtype} {d_out.spec.storage}, N={n}, K={k}, "
                              f"group_size={group_size})")
    if div_up(tile_count(d_out.spec.numel // n, k), 64) > MAX_WORKGROUPS:
        raise EtVkRefusal("linear_q4gsw_backward: tile count exceeds max workgroup count")


@register_op(OP, output=output_of, constants=("weights", "weight_scales"), ports=PORTS)
def linear_q4gsw_backward(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``linear_q4gsw_backward``: ``d_x[m, k] = Σ_n d_out[m, n] · (code[n, k] - 8) · scale[k / gs, n]``.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``d_out [..., N]`` (tensor), ``weights`` uint8 ``[N, K/2]`` and ``weight_scales``
            ``[K/gs, N]`` (constants), ``group_size`` (int).
        out (Tensor): ``d_x [..., K]``.

    Raises:
        EtVkRefusal: a check of the C++ fails (not float32 buffers, N or K not multiples of 4, group size).

    Example::

        linear_q4gsw_backward(graph, {"d_out": d_out, "weights": w, "weight_scales": s, "group_size": 32}, d_x)
    """
    d_out, weights, group_size = args["d_out"], args["weights"], int(args["group_size"])
    n, k = int(weights.data.shape[0]), int(weights.data.shape[1]) * 2
    check_linear_q4gsw_backward(d_out, out, n, k, group_size)
    packed = prepack_q4_w_4x8_nc_buffer(graph, weights)
    scales = prepack_q4_scales(graph, args["weight_scales"], d_out.spec.dtype)

    def global_wg() -> tuple[int, int, int]:
        cols = val_at(-1, out.spec.sizes)
        return (tile_count(out.spec.numel // cols, cols), 1, 1)

    graph.dispatch(f"q4gsw_backward_{out.spec.storage}_{SUFFIX[out.spec.dtype]}", global_wg=global_wg,
                   local_wg=lambda: (64, 1, 1), spec={3: group_size},
                   resources=[out, d_out, packed, scales, graph.sizes_ubo(d_out), graph.sizes_ubo(out)],
                   resize=lambda: graph.virtual_resize(out, resize_sizes(d_out.spec.sizes, k)), resize_args=(d_out,))
