"""Launcher for ``aten.slice.Tensor``: ``Slice.cpp``'s ``slice`` copies unless the output is a view of the input.

Ported from ``runtime/graph/ops/impl/Slice.cpp`` (``slice``): when ``val_is_view_of(out, in)`` it adds
``add_slice_view_node`` (no dispatch: the output aliases the input's memory, checked to start at 0 with
step 1 over a contiguous region, and is only resized); otherwise ``add_slice_copy_node``, the transfer
node ``slice_copy`` uses (variant ``slice[_ubo]_<storage>_<dtype>``, see ``launchers/slice.py``).

The output is allocated at ATen's sizes (what the serialized graph holds); the node's resize function is
``resize_slice_copy_node``, which re-derives them on a resize (and wraps an ``end`` past the size).
A kernel case allocates its output apart from its input, so the copy route is the one it reaches; a graph
whose serialized output aliases its input (a delegate's view tensor) would take the view route, which this
port refuses rather than copying.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.launchers.slice import PORTS as SLICE_PORTS, add_slice_copy_node
from vkdiff.device.resources import Tensor

OP = "aten.slice.Tensor"
PORTS = (Port(file=SLICE_PORTS[0].file, functions=("slice", "add_slice_copy_node"), sha256=SLICE_PORTS[0].sha256,
              tree=SLICE_PORTS[0].tree), *SLICE_PORTS[1:])


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


@register_op(OP, output=serialized_output, constants=(), ports=PORTS)
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
