"""Launchers for the ops ``Slice.cpp`` registers: ``aten.slice_copy.Tensor`` and ``aten.slice.Tensor``.

Launcher for ``aten.slice_copy.Tensor`` through ET-VK's ``slice[_ubo]_*`` transfer shaders.

Ported from ``runtime/graph/ops/impl/Slice.cpp`` (``slice_copy`` → ``add_slice_copy_node``,
``resize_slice_copy_node``, ``normalize_idx``) and ``Transfer.cpp`` (``add_transfer_copy_node``,
shared with ``select_copy``, see ``launchers/select.py``):

* no storage choice: the input and output keep the storage and layout they were given; the
  variant is ``slice[_ubo]_<out storage>_<out dtype>`` (``slice_buffer_float``,
  ``slice_ubo_texture3d_half``...);
* ``_ubo`` when ``start`` is a SymInt (or ``step`` is): bindings out, in, ``meta_ubo(out)``,
  ``meta_ubo(in)``, then ``get_or_create_int_param_buffer(start, 0)`` (the SymInt's own buffer,
  which follows ``set_symint``) and ``(step, 1)`` (a fixed params buffer for an int); push constant
  ``selected_dim`` only. Otherwise the push constants are ``{selected_dim, start, step}`` by value
  (start and step as given, fixed at build; the shaders add the input's size to a negative start);
  ``end`` is never bound: it only sizes the output;
* ``selected_dim`` is the WHCN index of ``dim``; spec constants from id 3: out and in hashed layouts;
* ``DynamicDispatchNode`` with ``default_pick_global_wg_size`` (numel of out for buffers, its
  logical limits for textures) and ``default_pick_local_wg_size``, re-picked after a resize;
* resize (``resize_slice_copy_node``, resize args ``dim, start, end, step``, so an updated SymInt
  triggers it): start and end are re-read (SymInts: their current value), normalized by
  ``normalize_idx`` (``INT64_MAX`` or None → default; else ``(i % size + size) % size`` unless equal to
  the default) and the sliced dim becomes ``ceil((end - start) / step)``.

``aten.slice.Tensor`` (same file: a view when the output aliases the input) follows.

Launcher for ``aten.slice.Tensor``: ``Slice.cpp``'s ``slice`` copies unless the output is a view of the input.

Ported from ``runtime/graph/ops/impl/Slice.cpp`` (``slice``): when ``val_is_view_of(out, in)`` it adds
``add_slice_view_node`` (no dispatch: the output aliases the input's memory, checked to start at 0 with
step 1 over a contiguous region, and is only resized); otherwise ``add_slice_copy_node``, the transfer
node ``slice_copy`` uses (variant ``slice[_ubo]_<storage>_<dtype>``, see above).

The output is allocated at ATen's sizes (what the serialized graph holds); the node's resize function is
``resize_slice_copy_node``, which re-derives them on a resize (and wraps an ``end`` past the size).
A kernel case allocates its output apart from its input, so the copy route is the one it reaches; a graph
whose serialized output aliases its input (a delegate's view tensor) would take the view route, which this
port refuses rather than copying.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from vkdiff.device.graph import ComputeGraph, SymInt
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor


# -- slice_copy (and Transfer.cpp's add_transfer_copy_node) ------------------------------------------------------------

OP = "aten.slice_copy.Tensor"

TREE = "executorch main cff6f4dd32"
TRANSFER_PORT = Port(file="runtime/graph/ops/impl/Transfer.cpp", functions=("add_transfer_copy_node",),
                     sha256="b6e9abf7435ea88971838cbe9354e83b09954bf1110ee14a01693acb176e95e2", tree=TREE)
"""The node both ``slice_copy`` and ``select_copy`` add."""

PORTS = (Port(file="runtime/graph/ops/impl/Slice.cpp",
              functions=("slice_copy", "add_slice_copy_node", "resize_slice_copy_node", "normalize_idx"),
              sha256="e9a203ac534940711fdb2132d824d36d069b977ad2cca5c961fbb8ecee0801f8", tree=TREE),
         TRANSFER_PORT)

INT64_MAX = 2**63 - 1
"""What an unspecified start/end is serialized as."""

Scalar = int | SymInt | None


def normalize(index: int, size: int) -> int:
    """``normalize`` (``TensorUtils.h``): ``(index % size + size) % size`` in C++, Python's ``%`` for ``size > 0``."""
    return index % size


def normalize_idx(index: int, size: int, default: int) -> int:
    """``normalize_idx``: ``INT64_MAX`` → the default; the default itself is kept; otherwise ``normalize``."""
    if index == INT64_MAX:
        return default
    if index == default:
        return index
    return normalize(index, size)


def _optional(value: Scalar) -> int | None:
    """``extract_optional_scalar<int64_t>``: None stays None, a SymInt gives its current value."""
    return None if value is None else ComputeGraph.read_symint(value)


def _trunc_div(a: int, b: int) -> int:
    """C++ integer division (toward zero)."""
    return -(-a // b) if (a < 0) != (b < 0) else a // b


def _int32(value: int) -> int:
    """``static_cast<int32_t>`` of an int64 (``extract_scalar_or<int32_t>``)."""
    return (int(value) + 2**31) % 2**32 - 2**31


def slice_sizes(in_sizes: Sequence[int], dim: int, start: Scalar, end: Scalar, step: Scalar) -> tuple[int, ...]:
    """The output sizes ``resize_slice_copy_node`` computes."""
    dim = dim + len(in_sizes) if dim < 0 else dim
    dim_size = int(in_sizes[dim])
    opt_start, opt_end = _optional(start), _optional(end)
    first = normalize_idx(0 if opt_start is None else opt_start, dim_size, 0)
    last = normalize_idx(dim_size if opt_end is None else opt_end, dim_size, dim_size)
    step = ComputeGraph.read_symint(step)
    sizes = list(in_sizes)
    sizes[dim] = _trunc_div(last - first + step - 1, step)
    return tuple(sizes)


def resize_slice_copy_node(graph: ComputeGraph, out: Tensor, x: Tensor, dim: int, start: Scalar, end: Scalar,
                           step: Scalar) -> None:
    """``resize_slice_copy_node``: start and end re-read at every resize (SymInts follow ``set_symint``)."""
    graph.virtual_resize(out, slice_sizes(x.spec.sizes, dim, start, end, step))


def _int_param_buffer(graph: ComputeGraph, value: Scalar, default: int) -> Any:
    """``get_or_create_int_param_buffer(value, default)``: None → a fixed buffer of the default."""
    return graph.symint_ubo(default if value is None else value)


def add_transfer_copy_node(graph: ComputeGraph, select: bool, x: Tensor, dim: int, index_or_start: Scalar,
                           step: Scalar, out: Tensor, resize_args: Sequence[Any], resize: Callable[[], None]) -> None:
    """``add_transfer_copy_node`` (``Transfer.cpp``): one ``select*`` or ``slice*`` dispatch.

    Args:
        select (bool): ``TransferType::SELECT`` (else ``SLICE``).
        index_or_start: the select index or the slice start (int, SymInt or None).
        step: the slice step (ignored for select).
        resize_args: the values whose update triggers ``resize`` (SymInts among them).
    """
    ndim = len(x.spec.sizes)
    dim = dim + ndim if dim < 0 else dim
    dim_whcn = ndim - 1 - normalize(dim, ndim)
    scalar = not isinstance(index_or_start, SymInt) and (select or not isinstance(step, SymInt))
    ubos = [graph.meta_ubo(out), graph.meta_ubo(x)]
    if scalar:
        start = 0 if index_or_start is None else _int32(index_or_start)
        step_value = 0 if select else (1 if step is None else _int32(step))
        immediates = struct.pack("<3i", dim_whcn, start, step_value)
    else:
        ubos.append(_int_param_buffer(graph, index_or_start, 0))
        if not select:
            ubos.append(_int_param_buffer(graph, step, 1))
        immediates = struct.pack("<i", dim_whcn)
    name = f"{'select' if select else 'slice'}{'' if scalar else '_ubo'}_{out.spec.storage}_{SUFFIX[out.spec.dtype]}"
    graph.dispatch(name, global_wg=lambda: default_global_wg(out), resources=[out, x, *ubos],
                   spec={3: out.spec.hashed_layout, 4: x.spec.hashed_layout}, immediates=immediates,
                   resize=resize, resize_args=resize_args)


def add_slice_copy_node(graph: ComputeGraph, x: Tensor, dim: int, start: Scalar, end: Scalar, step: Scalar,
                        out: Tensor) -> None:
    """``add_slice_copy_node``: a ``SLICE`` transfer node resized by ``resize_slice_copy_node``."""
    add_transfer_copy_node(graph, False, x, dim, start, step, out, resize_args=(dim, start, end, step),
                           resize=lambda: resize_slice_copy_node(graph, out, x, dim, start, end, step))


def slice_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_slice_copy_node`` on numpy arguments."""
    x = np.asarray(args["self"])
    sizes = slice_sizes(x.shape, int(args.get("dim", 0)), args.get("start"), args.get("end"), args.get("step", 1))
    return sizes, x.dtype


@register_op(OP, output=slice_output, constants=(), ports=PORTS)
def slice_copy(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``slice_copy``: ``out = self[..., start:end:step, ...]`` along ``dim``.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor), ``dim`` (int), ``start``, ``end`` (int, SymInt or None), ``step``
            (int or SymInt), by schema name.
        out (Tensor): the output, allocated at its maximal sizes.

    Example::

        slice_copy(graph, {"self": freqs, "dim": 0, "start": input_pos, "end": pos_plus_t, "step": 1}, out)
    """
    step = args.get("step", 1)
    add_slice_copy_node(graph, args["self"], int(args.get("dim", 0)), args.get("start"), args.get("end"),
                        1 if step is None else step, out)


# -- slice.Tensor ------------------------------------------------------------------------------------------------------

SLICE_TENSOR_OP = "aten.slice.Tensor"
SLICE_TENSOR_PORTS = (Port(file=PORTS[0].file, functions=("slice", "add_slice_copy_node"),
                           sha256=PORTS[0].sha256, tree=PORTS[0].tree), *PORTS[1:])


def serialized_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """The output sizes the graph is built with: ATen's (bounds clamped to the dim, as Python slicing does).

    ``resize_slice_copy_node`` (run on a resize only) wraps an ``end`` past the size with ``normalize_idx``
    instead (``end = 100`` on a dim of 10 becomes 0), so it is not what the serialized graph allocates.
    """
    x = np.asarray(args["self"])
    dim = int(args.get("dim", 0)) % x.ndim
    start, end, step = args.get("start"), args.get("end"), args.get("step", 1)
    sizes = list(x.shape)
    sizes[dim] = len(range(*slice(start, end, 1 if step is None else int(step)).indices(x.shape[dim])))
    return tuple(sizes), x.dtype


@register_op(SLICE_TENSOR_OP, output=serialized_output, constants=(), ports=SLICE_TENSOR_PORTS)
def slice_tensor(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``slice``: ``out = self[..., start:end:step, ...]`` along ``dim``, copied.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor), ``dim`` (int), ``start``, ``end`` (int, SymInt or None), ``step``.
        out (Tensor): the output, allocated apart from ``self``.

    Raises:
        NotImplementedError: ``out`` aliases ``self`` (the view route is not ported).

    Example::

        slice_tensor(graph, {"self": x, "dim": 1, "start": 0, "end": 5, "step": 2}, out)
    """
    x = args["self"]
    if out.handle is x.handle:
        raise NotImplementedError("aten.slice.Tensor view route (add_slice_view_node) is not ported")
    step = args.get("step", 1)
    add_slice_copy_node(graph, x, int(args.get("dim", 0)), args.get("start"), args.get("end"),
                        1 if step is None else step, out)
