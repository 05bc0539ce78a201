"""Launchers for ``aten.{sum.dim_IntList, mean.dim, amax.default, amin.default}``: three routes by dims and storage.

Ported from ``runtime/graph/ops/impl/Reduce.cpp`` (``DEFINE_REDUCE_FN`` → ``add_reduce_node``,
``add_reduce2d_node``, ``add_reduce_per_row_node``). The route (case option ``route``):

* ``per_row`` — one dim, the last (``-1`` or ``ndim - 1``), buffer input: variant
  ``<op>_per_row_buffer_<in dtype>``; bindings out, in, ``meta_ubo`` of out and in; no spec
  constants; global ``(1, numel(out), 1)``, local ``(64, 1, 1)`` (64 workers per output row);
  resize: the last dim becomes 1 (keepdim) or is dropped;
* ``reduce`` — one dim, texture only (``VK_CHECK_COND`` refuses buffers): variant ``<op>_<dtype>``;
  bindings out, in, UBOs ``logical_limits`` and ``sizes`` of in; spec constants 3: packed dim of out,
  4: reduce dim (WHCN), 5: group dim (whichever other axis of out's logical limits is larger, the
  second on a tie); global: out's logical limits with the reduce axis 1; local 4 along the reduce
  axis and 4 along the group axis (``reduce_local_wg_size``); resize: the reduced dim becomes 1;
* ``reduce2d`` — two dims, texture, neither the packed dim: variant ``<op>2d_<dtype>``; spec constants
  3: packed dim of out, 4 and 5: the reduce dims, 6: the remaining axis; global as ``reduce`` with the
  first reduce axis 1; local: ``reduce_local_wg_size`` reads its resize args 1 and 2, which here
  are the two reduce dims, so 4 along each reduce axis and 1 along the remaining one;
  resize: both reduced dims become 1.

The texture routes keep the reduced dims in their resize whatever ``keepdim`` says (the partitioner
sends them ``keepdim=True`` only). ``dim=None`` is taken only for 1-D inputs (``[-1]``). The concat dim
(channels) may not be reduced when a 4-D input has a batch above 1. Reducing the batch dim of a 4-D
texture tensor (WHCN 3) indexes a ``uvec3`` out of range in the C++: refused here.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.launchers.utils.common import dtype_suffix
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OPS = ("sum", "mean", "amax", "amin")
"""Op stems of ``Reduce.cpp``'s ``DEFINE_REDUCE_FN``; shader stems equal them."""
FULL_NAMES = {"sum": "aten.sum.dim_IntList", "mean": "aten.mean.dim", "amax": "aten.amax.default",
              "amin": "aten.amin.default"}

PORTS = (Port(file="runtime/graph/ops/impl/Reduce.cpp",
              functions=("resize_reduce_node", "resize_reduce2d_node", "resize_reduce_per_row_node",
                         "reduce_global_wg_size", "reduce_local_wg_size", "add_reduce_node", "add_reduce2d_node",
                         "reduce_per_row_global_wg_size", "reduce_per_row_local_wg_size", "add_reduce_per_row_node",
                         "DEFINE_REDUCE_FN"),
              sha256="1af07d05bf97b59a567d3ec412a2ebce019d86a8a5d4159e1c86506f185447d5",
              tree="executorch main cff6f4dd32"),)

NWORKERS = 4
"""``nworkers_per_group`` (``NWORKERS`` of ``reduce.glsl``)."""
NGROUPS = 4
"""``ngroups``: reduction rows per workgroup."""
PER_ROW_WORKERS = 64
"""``workers_per_output`` of ``reduce_per_row_local_wg_size``."""


def normalize(dim: int, ndim: int) -> int:
    """``utils::normalize``: a negative dim counted from the end."""
    return (int(dim) % ndim + ndim) % ndim if ndim else 0


def nchw_dim_to_whcn_dim(dim: int, ndim: int) -> int:
    """``nchw_dim_to_whcn_dim``."""
    return ndim - 1 - dim


def concat_dim(tensor: Tensor) -> int:
    """``concat_dim_of``: axis map entry 3 (channels for the default map)."""
    return int(tensor.spec.axis_map[3])


def check_concat_dim(x: Tensor, out: Tensor, reduce_dims: Sequence[int]) -> None:
    """The ``VK_CHECK_COND``: with a batch above 1 a 4-D input may not reduce along its concat dim."""
    if len(x.spec.sizes) == 4 and x.spec.sizes[0] > 1:
        for d in reduce_dims:
            if concat_dim(x) == d or concat_dim(out) == d:
                raise EtVkRefusal(f"reduction along the concat dim (WHCN {d}) of a 4-D input with batch "
                                 f"{x.spec.sizes[0]} is refused by the C++ (VK_CHECK_COND)")


def check_axis(dim_whcn: int, op: str) -> None:
    """WHCN 3 (the batch of a 4-D tensor) has no axis in a ``uvec3``: the C++ would index it out of range."""
    if dim_whcn > 2:
        raise EtVkRefusal(f"{op}: reducing WHCN dim {dim_whcn} (the batch of a 4-D tensor) indexes a uvec3 out of "
                         f"range in the C++ (undefined behaviour); vkdiff does not run it")


def reduced_axes(ndim: int, dim: Any) -> tuple[int, ...]:
    """ATen's reading of a ``dim`` list: None or empty reduces every dim."""
    dims = [] if dim is None else [int(dim)] if isinstance(dim, (int, np.integer)) else [int(d) for d in dim]
    return tuple(sorted({normalize(d, ndim) for d in dims})) if dims else tuple(range(ndim))


def reduce_output(args: Mapping[str, Any], dtype: Any = None, *, indices: bool = False) -> tuple[tuple[int, ...], Any]:
    """The output the graph allocates: ATen's reduced shape, the input's dtype (int32 indices for arg ops)."""
    x = np.asarray(args["self"])
    dim = args.get("dim")
    axes = reduced_axes(x.ndim, dim) if not indices else (
        tuple(range(x.ndim)) if dim is None else (normalize(int(dim), x.ndim),))
    keep = bool(args.get("keepdim", False))
    shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape) if keep or i not in axes)
    return shape, (np.int32 if indices else x.dtype)


def pick_route(x: Tensor, dims: Sequence[int]) -> str:
    """``DEFINE_REDUCE_FN``'s choice: ``per_row`` (last dim, buffer), ``reduce`` (one dim) or ``reduce2d``."""
    ndim = len(x.spec.sizes)
    if len(dims) == 1:
        if (dims[0] == -1 or dims[0] == ndim - 1) and x.spec.storage == "buffer":
            return "per_row"
        return "reduce"
    if len(dims) == 2:
        return "reduce2d"
    raise EtVkRefusal(f"Only 1 or 2 dimensions supported (VK_CHECK_COND), got dims {list(dims)}")


def reduce_dims_of(x: Tensor, dim: Any) -> list[int]:
    """``dims_list``: the given dims, or ``[-1]`` for a 1-D input without dims.

    Raises:
        ValueError: no dims on an input of more than one dim (``VK_THROW``).
    """
    if dim is not None:
        return [int(d) for d in ([dim] if isinstance(dim, (int, np.integer)) else dim)]
    if len(x.spec.sizes) == 1:
        return [-1]
    raise EtVkRefusal("dims_list=None only supported for 1D tensors")


def add_reduce_per_row_node(graph: ComputeGraph, x: Tensor, keepdim: bool, out: Tensor, op_name: str) -> None:
    """``add_reduce_per_row_node`` (also ``ArgReduce.cpp``'s path)."""
    name = f"{op_name}_per_row_{x.spec.storage}_{dtype_suffix(x.spec.dtype)}"

    def resize_reduce_per_row_node() -> None:
        sizes = list(x.spec.sizes)
        sizes = sizes[:-1] + [1] if keepdim else sizes[:-1]
        graph.virtual_resize(out, sizes)

    graph.dispatch(name, global_wg=lambda: (1, out.spec.numel, 1), local_wg=lambda: (PER_ROW_WORKERS, 1, 1),
                   resources=[out, x, graph.meta_ubo(out), graph.meta_ubo(x)], resize=resize_reduce_per_row_node)


def _texture_only(x: Tensor, out: Tensor) -> None:
    if x.spec.storage == "buffer" or out.spec.storage == "buffer":
        raise EtVkRefusal("Vulkan reduction only supports texture storage (VK_CHECK_COND)")


def reduce_local_wg_size(reduce_whcn: int, group_whcn: int) -> tuple[int, int, int]:
    """``reduce_local_wg_size``: 4 workers along the reduce axis, 4 groups along the group axis."""
    local = [1, 1, 1]
    local[reduce_whcn] = NWORKERS
    local[group_whcn] = NGROUPS
    return tuple(local)  # type: ignore[return-value]


def reduce_global_wg_size(out: Tensor, reduce_whcn: int) -> tuple[int, int, int]:
    """``reduce_global_wg_size``: out's logical limits, 1 along the reduce axis."""
    size = list(out.spec.logical_limits)
    size[reduce_whcn] = 1
    return tuple(size)  # type: ignore[return-value]


def add_reduce_node(graph: ComputeGraph, x: Tensor, dim: int, out: Tensor, op_name: str) -> None:
    """``add_reduce_node``: one dim, texture."""
    _texture_only(x, out)
    ndim = len(x.spec.sizes)
    reduce_whcn = nchw_dim_to_whcn_dim(normalize(dim, ndim), ndim)
    check_axis(reduce_whcn, op_name)
    check_concat_dim(x, out, [reduce_whcn])
    limits = out.spec.logical_limits
    other1, other2 = (reduce_whcn + 1) % 3, (reduce_whcn + 2) % 3
    group = other1 if limits[other1] > limits[other2] else other2

    def resize_reduce_node() -> None:
        sizes = list(x.spec.sizes)
        sizes[normalize(dim, len(sizes))] = 1
        graph.virtual_resize(out, sizes)

    graph.dispatch(f"{op_name}_{dtype_suffix(out.spec.dtype)}",
                   global_wg=lambda: reduce_global_wg_size(out, reduce_whcn),
                   local_wg=lambda: reduce_local_wg_size(reduce_whcn, group),
                   resources=[out, x, graph.logical_limits_ubo(x), graph.sizes_ubo(x)],
                   spec={3: out.spec.info.packed_dim, 4: reduce_whcn, 5: group}, resize=resize_reduce_node)


def add_reduce2d_node(graph: ComputeGraph, x: Tensor, dims: Sequence[int], out: Tensor, op_name: str) -> None:
    """``add_reduce2d_node``: two dims, texture, neither packed."""
    _texture_only(x, out)
    ndim = len(x.spec.sizes)
    whcn = [nchw_dim_to_whcn_dim(normalize(d, ndim), ndim) for d in dims]
    for d in whcn:
        check_axis(d, op_name)
        if d in (x.spec.info.packed_dim, out.spec.info.packed_dim):
            raise EtVkRefusal(f"{op_name}2d: reduce dim WHCN {d} is the packed dim (VK_CHECK_COND)")
    check_concat_dim(x, out, whcn)
    group = next(i for i in range(3) if i not in whcn)

    def resize_reduce2d_node() -> None:
        sizes = list(x.spec.sizes)
        for d in dims:
            sizes[normalize(d, len(sizes))] = 1
        graph.virtual_resize(out, sizes)

    graph.dispatch(f"{op_name}2d_{dtype_suffix(out.spec.dtype)}",
                   global_wg=lambda: reduce_global_wg_size(out, whcn[0]),
                   local_wg=lambda: reduce_local_wg_size(whcn[0], whcn[1]),
                   resources=[out, x, graph.logical_limits_ubo(x), graph.sizes_ubo(x)],
                   spec={3: out.spec.info.packed_dim, 4: whcn[0], 5: whcn[1], 6: group}, resize=resize_reduce2d_node)


def add_reduce(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, op_name: str,
               route: str | None = None) -> None:
    """``DEFINE_REDUCE_FN(op_name)``: picks the route; a case's ``route`` option must be the one picked.

    Args:
        graph (ComputeGraph): the graph the node joins.
        args (Mapping[str, Any]): ``self`` (Tensor), ``dim`` (list of ints or None), ``keepdim`` (bool).
        out (Tensor): the output.
        op_name (str): ``sum``, ``mean``, ``amax`` or ``amin``.
        route (str | None): the route a kernel case expects (``per_row``, ``reduce``, ``reduce2d``).

    Raises:
        ValueError: the C++ refuses the arguments, or picks another route than ``route``.
    """
    x = args["self"]
    dims = reduce_dims_of(x, args.get("dim"))
    picked = pick_route(x, dims)
    if route is not None and route != picked:
        raise ValueError(f"{op_name}: Reduce.cpp takes route {picked}, the case expects {route}")
    if picked == "per_row":
        add_reduce_per_row_node(graph, x, bool(args.get("keepdim", False)), out, op_name)
    elif picked == "reduce":
        add_reduce_node(graph, x, dims[0], out, op_name)
    else:
        add_reduce2d_node(graph, x, dims, out, op_name)


def _register(op_name: str) -> None:
    def op(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None) -> None:
        add_reduce(graph, args, out, op_name, route)

    op.__name__ = op.__qualname__ = op_name
    op.__doc__ = f"``{op_name}`` of ``DEFINE_REDUCE_FN``: see ``add_reduce``."
    register_op(FULL_NAMES[op_name], output=reduce_output, constants=(), ports=PORTS)(op)


for _name in OPS:
    _register(_name)
