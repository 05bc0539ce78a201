"""Launcher for ``et_vk.linear_dW.default``: the weight gradient ``d_out^T @ x`` of a linear.

Ported from ``runtime/graph/ops/impl/LinearDw.cpp`` (``linear_dW``, ``linear_dW_global_wg_size``,
``linear_dW_local_wg_size``, ``resize_linear_dW_node``):

* variant ``linear_dW_<dW storage>_<dW dtype>``; the yaml builds ``linear_dW_buffer_float`` only;
* checks, in order: ``d_out``, ``x``, ``dW`` float32; all three on buffers; ``N = d_out[-1] > 0``,
  ``K = x[-1] > 0``; both numels divisible and of one row count M; ``ceil(tiles / 64) <= 65535``;
* bindings: ``dW`` (write), ``d_out``, ``x``; UBOs ``sizes(d_out)``, ``sizes(x)`` (WHCN, follow resizes);
* one thread per 4×4 tile of ``dW``: global ``(div_up4(N) * div_up4(K), 1, 1)`` from ``dW``'s sizes,
  local ``(64, 1, 1)``; no push or spec constants;
* resize ``resize_linear_dW_node``: ``dW`` becomes ``[d_out[-1], x[-1]]``.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import div_up, val_at
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.linear_dW.default"
PORT = Port(file="runtime/graph/ops/impl/LinearDw.cpp",
            functions=("linear_dW", "linear_dW_global_wg_size", "linear_dW_local_wg_size", "resize_linear_dW_node"),
            sha256="a8499a7d0a1f10ccb8e93423d5baadbc99a04ffcc112b40442eff01d97e32553",
            tree="executorch main cff6f4dd32")
MAX_WORKGROUPS = 65535
"""The workgroup count the C++ checks against (the Vulkan minimum of ``maxComputeWorkGroupCount``)."""


def resize_linear_dw_sizes(d_out_sizes, x_sizes) -> tuple[int, int]:
    """``resize_linear_dW_node``'s sizes: ``[N, K]``."""
    return (int(d_out_sizes[-1]), int(x_sizes[-1]))


def output_of(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, int], Any]:
    """``dW`` as the resize function sizes it, in ``d_out``'s dtype."""
    d_out = np.asarray(args["d_out"])
    return resize_linear_dw_sizes(d_out.shape, np.shape(args["x"])), d_out.dtype


def tile_count(n: int, k: int) -> int:
    """4×4 tiles of ``dW [N, K]``: one thread each."""
    return div_up(n, 4) * div_up(k, 4)


def check_linear_dw(d_out: Tensor, x: Tensor, dw: Tensor) -> None:
    """The ``VK_CHECK_COND``s of ``linear_dW``, in their order."""
    for name, tensor in (("d_out", d_out), ("x", x), ("dW", dw)):
        if tensor.spec.dtype != "float32":
            raise EtVkRefusal(f"linear_dW: VK_CHECK_COND(graph.dtype_of({name}) == vkapi::kFloat) failed "
                              f"({tensor.spec.dtype})")
    for name, tensor in (("d_out", d_out), ("x", x), ("dW", dw)):
        if tensor.spec.storage != "buffer":
            raise EtVkRefusal(f"linear_dW: VK_CHECK_COND(graph.is_buffer_storage({name})) failed "
                              f"({tensor.spec.storage})")
    n, k = val_at(-1, d_out.spec.sizes), val_at(-1, x.spec.sizes)
    if not (n > 0 and k > 0):
        raise EtVkRefusal(f"linear_dW: VK_CHECK_COND(N > 0 && K > 0) failed (N={n}, K={k})")
    if d_out.spec.numel % n or x.spec.numel % k or d_out.spec.numel // n != x.spec.numel // k:
        raise EtVkRefusal(f"linear_dW: d_out {list(d_out.spec.sizes)} and x {list(x.spec.sizes)} differ in rows "
                          f"(VK_CHECK_COND(graph.numel_of(d_out) / N == graph.numel_of(x) / K) failed)")
    if div_up(tile_count(n, k), 64) > MAX_WORKGROUPS:
        raise EtVkRefusal("linear_dW: tile count exceeds max workgroup count")


@register_op(OP, output=output_of, constants=(), ports=(PORT,))
def linear_dw(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``linear_dW``: ``out[n, k] = Σ_m d_out[m, n] · x[m, k]`` over the flattened leading dims.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``d_out [..., N]``, ``x [..., K]`` with the same row count.
        out (Tensor): ``dW [N, K]``.

    Raises:
        EtVkRefusal: a check of the C++ fails (not float32, not a buffer, rows differ, too many tiles).

    Example::

        linear_dw(graph, {"d_out": d_out, "x": x}, dw)
    """
    d_out, x = args["d_out"], args["x"]
    check_linear_dw(d_out, x, out)

    def resize() -> None:
        graph.virtual_resize(out, resize_linear_dw_sizes(d_out.spec.sizes, x.spec.sizes))

    graph.dispatch(f"linear_dW_{out.spec.storage}_{SUFFIX[out.spec.dtype]}",
                   global_wg=lambda: (tile_count(val_at(-2, out.spec.sizes), val_at(-1, out.spec.sizes)), 1, 1),
                   local_wg=lambda: (64, 1, 1),
                   resources=[out, d_out, x, graph.sizes_ubo(d_out), graph.sizes_ubo(x)], resize=resize)
