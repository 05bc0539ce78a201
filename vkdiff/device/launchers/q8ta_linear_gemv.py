"""Launcher for ``et_vk.q8ta_linear_gemv``: one int8x4 ``PACKED_INT8_4W`` row × int8 weights → int8x4.

Ported from ``runtime/graph/ops/impl/Q8taLinearGemv.cpp`` (``q8ta_linear_gemv``, ``add_q8ta_linear_gemv_node``,
``q8ta_linear_gemv_check_packed_dim_info``, ``q8ta_linear_gemv_{global,local}_wg_size``): the host code of
``Q8taLinear.cpp`` but for the node, so it runs ``q8ta_linear.py``'s ``add_q8ta_linear_node`` with ``gemv=True``
(whose docstring lists the checks, prepacking, variants, bindings and sizes of both): variant
``q8ta_linear_gemv[_fallback]_<scales dtype>``, global ``(div_up(N, 8), 1, 1)``, local ``(1, 1, 64)`` (64 lanes share
K); no resize function.

Launcher options: ``profile`` and ``route``, as ``q8ta_linear``'s.
"""

from __future__ import annotations

from typing import Any, Mapping

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.launchers.q8ta_linear import (SHARED_PORTS, TREE, add_q8ta_linear_node, q8ta_linear_output,
                                                 with_profile)
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

GEMV_OP = "et_vk.q8ta_linear_gemv.default"

GEMV_PORTS = (
    Port(file="runtime/graph/ops/impl/Q8taLinearGemv.cpp",
         functions=("q8ta_linear_gemv", "add_q8ta_linear_gemv_node", "q8ta_linear_gemv_check_packed_dim_info",
                    "q8ta_linear_gemv_global_wg_size", "q8ta_linear_gemv_local_wg_size"),
         sha256="bd4f639b32ecbbacccb0e208e5569f28a6ced42bbcdcadf2c6c85080a9d78624", tree=TREE),
    *SHARED_PORTS,
)


@register_op(GEMV_OP, output=q8ta_linear_output, constants=("weights", "weight_sums", "weight_scales", "bias"),
             ports=GEMV_PORTS)
def q8ta_linear_gemv(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None,
                     profile: str | None = None) -> None:
    """``q8ta_linear_gemv``: 64 lanes split K for one ``PACKED_INT8_4W`` row into a ``PACKED_INT8_4W`` output.

    Args:
        graph (ComputeGraph): the graph the nodes join.
        args (Mapping[str, Any]): as :func:`q8ta_linear`, ``x`` an int8x4 ``4W`` tensor ``[..., 1, K]``.
        out (Tensor): int8x4 ``[..., 1, N]``.
        route (str | None): the variant the case expects (``ROUTES``).
        profile (str | None): a routing profile answering ``supports_int8_dot_product``.

    Raises:
        EtVkRefusal: one of the C++'s ``VK_CHECK_COND``s or an unknown activation.
        ValueError: the profile takes another route than ``route``.
    """
    with_profile(graph, profile)
    add_q8ta_linear_node(graph, args, out, gemv=True, route=route)
