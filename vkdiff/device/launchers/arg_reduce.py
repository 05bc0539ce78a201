"""Launchers for ``aten.argmax.default`` and ``aten.argmin.default`` through ``arg{max,min}_per_row_buffer_<dtype>``.

Ported from ``runtime/graph/ops/impl/ArgReduce.cpp`` (``arg_reduce_impl``): the input must be a
buffer (``VK_CHECK_COND``) and the dim the last one (``dim=None`` reads as 0, so only 1-D inputs
take it); the node is ``Reduce.cpp``'s ``add_reduce_per_row_node`` with the op's name: variant
``arg{max,min}_per_row_buffer_<input dtype>`` writing int32 indices; bindings out, in, ``meta_ubo``
of out and in; global ``(1, numel(out), 1)``, local ``(64, 1, 1)``; resize: the last dim becomes 1
(keepdim) or is dropped (route ``per_row``).
"""

from __future__ import annotations

from typing import Any, Mapping

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.launchers.reduce import PORTS as REDUCE_PORTS, add_reduce_per_row_node, normalize, reduce_output
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

PORTS = (Port(file="runtime/graph/ops/impl/ArgReduce.cpp", functions=("arg_reduce_impl", "argmin", "argmax"),
              sha256="d2dfc6715ccaadd7cd8e51211065a201f65e6ab68045d36dddb9d16144443220",
              tree="executorch main cff6f4dd32"), *REDUCE_PORTS)


def arg_reduce_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """ATen's reduced shape; int32 indices (ET-VK stores int64 as int32)."""
    return reduce_output(args, dtype, indices=True)


def arg_reduce_impl(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, op_name: str,
                    route: str | None = None) -> None:
    """``arg_reduce_impl``: buffer input, last dim only, then ``add_reduce_per_row_node``.

    Raises:
        ValueError: a texture input or another dim (the C++'s ``VK_CHECK_COND``), or a case expecting
            another route than ``per_row``.
    """
    x = args["self"]
    if x.spec.storage != "buffer":
        raise EtVkRefusal(f"{op_name}: ArgReduce.cpp requires buffer storage (VK_CHECK_COND)")
    ndim = len(x.spec.sizes)
    dim = 0 if args.get("dim") is None else int(args["dim"])
    if normalize(dim, ndim) != ndim - 1:
        raise ValueError(f"{op_name}: ArgReduce.cpp reduces the last dim only, got dim {dim} of {ndim}")
    if route not in (None, "per_row"):
        raise ValueError(f"{op_name}: ArgReduce.cpp takes route per_row, the case expects {route}")
    add_reduce_per_row_node(graph, x, bool(args.get("keepdim", False)), out, op_name)


@register_op("aten.argmax.default", output=arg_reduce_output, constants=(), ports=PORTS)
def argmax(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None) -> None:
    """``argmax``: ``arg_reduce_impl(graph, args, "argmax")``."""
    arg_reduce_impl(graph, args, out, "argmax", route)


@register_op("aten.argmin.default", output=arg_reduce_output, constants=(), ports=PORTS)
def argmin(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None) -> None:
    """``argmin``: ``arg_reduce_impl(graph, args, "argmin")``."""
    arg_reduce_impl(graph, args, out, "argmin", route)
