"""Launcher for ``aten.squeeze_copy.dims``: a view copy on buffers, a permute (or clone) on textures.

Ported from ``runtime/graph/ops/impl/Squeeze.cpp`` (``squeeze_copy_dims``, ``add_squeeze_copy_dims_node``,
``resize_squeeze_node``):

* buffer input: ``add_view_copy_node`` (``view_buffer_<dtype>``) resized by ``resize_squeeze_node``;
* texture input (``add_squeeze_copy_dims_node``): the dims to squeeze are those whose *given* value is not
  0 (a dim written as ``-ndim`` is kept) and whose size is 1, negatives wrapped; none → ``add_clone_node``
  (``clone_<dtype>``); else ``add_permute_node`` with the identity permutation where each squeezed dim is
  rotated to the front, in order (``std::rotate``), resized by ``resize_permute_node``;
* ``resize_squeeze_node`` (resize arg ``dims``) erases, from the input's sizes, each listed dim that is in
  range (negative dims are skipped) and of size 1, and decrements the later dims *of the graph's own list*
  (``for (auto& d : *dims) --d``): the list is changed in place at every resize, as the C++ does.
"""

from __future__ import annotations

from typing import Any, Mapping, MutableSequence, Sequence

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.launchers.clone import add_clone_node
from vkdiff.device.launchers.permute import TREE, add_permute_node
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.launchers.view import add_view_copy_node
from vkdiff.device.runtime.resources import Tensor

OP = "aten.squeeze_copy.dims"
PORTS = (Port(file="runtime/graph/ops/impl/Squeeze.cpp",
              functions=("squeeze_copy_dims", "add_squeeze_copy_dims_node", "resize_squeeze_node"),
              sha256="863a34b46fad94ce5d10d63fe5246c2ca7dbbae4be6685b3f052c51f18809a43", tree=TREE),)


def resize_squeeze_node(in_sizes: Sequence[int], dims: MutableSequence[int]) -> list[int]:
    """``resize_squeeze_node``'s output sizes; decrements entries of ``dims`` in place as the C++ does."""
    out = [int(s) for s in in_sizes]
    for i in range(len(dims)):
        dim = dims[i]
        if 0 <= dim < len(out) and out[dim] == 1:
            del out[dim]
            for j in range(len(dims)):
                if dims[j] > dim:
                    dims[j] -= 1
    return out


def squeeze_permutation(in_sizes: Sequence[int], dims: Sequence[int]) -> list[int] | None:
    """``add_squeeze_copy_dims_node``'s permutation, or None when it clones instead."""
    ndim = len(in_sizes)
    squeeze = [d + ndim if d < 0 else d for d in dims]
    squeeze = [v for d, v in zip(dims, squeeze) if d != 0 and in_sizes[v] == 1]
    if not squeeze:
        return None
    order = list(range(ndim))
    for elem in squeeze:
        at = order.index(elem)
        order = [order[at]] + order[:at] + order[at + 1:]
    return order


def squeeze_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """The output ATen gives (the serialized size the graph allocates)."""
    x = np.asarray(args["self"])
    drop = {d % x.ndim for d in args["dim"] if x.shape[d % x.ndim] == 1} if x.ndim else set()
    return tuple(s for i, s in enumerate(x.shape) if i not in drop), x.dtype


@register_op(OP, output=squeeze_output, constants=(), ports=PORTS)
def squeeze_copy_dims(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``squeeze_copy_dims``: ``out = self.squeeze(dim)``.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor) and ``dim`` (int list, negatives allowed), by schema name.
        out (Tensor): the output (the size-1 dims among ``dim`` removed).

    Example::

        squeeze_copy_dims(graph, {"self": x, "dim": [1, -1]}, out)
    """
    x, dims = args["self"], [int(d) for d in args["dim"]]
    if x.spec.storage == "buffer":
        graph_dims = list(dims)

        def resize() -> None:
            """``resize_squeeze_node``."""
            graph.virtual_resize(out, resize_squeeze_node(x.spec.sizes, graph_dims))

        return add_view_copy_node(graph, x, out, resize, resize_args=(tuple(dims),))
    order = squeeze_permutation(x.spec.sizes, dims)
    if order is None:
        return add_clone_node(graph, x, out)
    add_permute_node(graph, x, order, out)
