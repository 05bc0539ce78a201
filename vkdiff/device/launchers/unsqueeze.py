"""Launcher for ``aten.unsqueeze_copy.default``: a view copy on buffers, a permute on textures.

Ported from ``runtime/graph/ops/impl/Unsqueeze.cpp`` (``unsqueeze``, ``add_unsqueeze_node``,
``resize_unsqueeze_node``):

* buffer input: ``add_view_copy_node`` (``view_buffer_<dtype>``) resized by ``resize_unsqueeze_node``;
* texture input (``add_unsqueeze_node``): at most 3 input dims (``VK_CHECK_COND``); ``dim`` wrapped by the
  output's rank; permutation ``[1, .., dim, 0, dim + 1, ..]`` of the output's rank through
  ``add_permute_node`` (``permute_texture3d_<dtype>``), resized by ``resize_permute_node``;
* ``resize_unsqueeze_node`` (resize arg ``dim``): a 1 inserted at ``dim`` (negatives wrapped by the
  input's rank + 1).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.launchers.permute import TREE, add_permute_node
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.launchers.view import add_view_copy_node
from vkdiff.device.runtime.resources import Tensor

OP = "aten.unsqueeze_copy.default"
PORTS = (Port(file="runtime/graph/ops/impl/Unsqueeze.cpp",
              functions=("unsqueeze", "add_unsqueeze_node", "resize_unsqueeze_node"),
              sha256="e199c93b183f5b98d7c7039d884bed44180f1fa050965b39264c40a2fd3d062e", tree=TREE),)


def unsqueezed_sizes(in_sizes: Sequence[int], dim: int) -> tuple[int, ...]:
    """``resize_unsqueeze_node``: a 1 inserted at ``dim`` (negative: counted from the end of the result)."""
    out = [int(s) for s in in_sizes]
    out.insert(dim + len(out) + 1 if dim < 0 else dim, 1)
    return tuple(out)


def unsqueeze_permutation(out_ndim: int, dim: int) -> list[int]:
    """``add_unsqueeze_node``'s permutation of the output's rank."""
    dim = dim + out_ndim if dim < 0 else dim
    return [*range(1, dim + 1), 0, *range(dim + 1, out_ndim)]


def unsqueeze_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    x = np.asarray(args["self"])
    return unsqueezed_sizes(x.shape, int(args["dim"])), x.dtype


@register_op(OP, output=unsqueeze_output, constants=(), ports=PORTS)
def unsqueeze(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``unsqueeze``: ``out = self.unsqueeze(dim)``.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor) and ``dim`` (int, negative counts from the end of the result).
        out (Tensor): the output, one rank more than ``self``.

    Raises:
        ValueError: a texture input of more than 3 dims (the C++ ``VK_CHECK_COND``).

    Example::

        unsqueeze(graph, {"self": x, "dim": -1}, out)
    """
    x, dim = args["self"], int(args["dim"])
    if x.spec.storage == "buffer":
        def resize() -> None:
            """``resize_unsqueeze_node``."""
            graph.virtual_resize(out, unsqueezed_sizes(x.spec.sizes, dim))

        return add_view_copy_node(graph, x, out, resize, resize_args=(dim,))
    if len(x.spec.sizes) >= 4:
        raise EtVkRefusal("Cannot unsqueeze a tensor with more than 3 dimensions")
    add_permute_node(graph, x, unsqueeze_permutation(len(out.spec.sizes), dim), out)
