"""Launchers for the ops ``Select.cpp`` registers: ``aten.select_copy.int`` and ``aten.select.int``.

Launcher for ``aten.select_copy.int`` through ET-VK's ``select[_ubo]_*`` transfer shaders.

Ported from ``runtime/graph/ops/impl/Select.cpp`` (``select_int`` → ``add_select_copy_node``,
``check_select_args``, ``resize_select_node``) on ``Transfer.cpp``'s ``add_transfer_copy_node``
(shared with ``slice_copy``, see ``launchers/slice.py``):

* no storage choice: the variant is ``select[_ubo]_<out storage>_<out dtype>``;
* a plain ``index`` is pushed as given (``{selected_dim, index, 0}``, fixed at build); the shaders add
  the input's *current* size along the dim to a negative index, so ``index=-1`` follows a resize of
  the input (the tiny Llama's last-token ``[1, T, 64] → [1, 64]``); a SymInt index picks ``select_ubo_*``
  with the SymInt's own params buffer after ``meta_ubo(out)``, ``meta_ubo(in)`` (push constant
  ``selected_dim`` only);
* spec constants from id 3: out and in hashed layouts; ``DynamicDispatchNode`` with the default global
  (numel of out, or its logical limits) and local sizes;
* ``check_select_args`` at build (dim and index in range, output rank and sizes; its size loop runs
  over the selected dim's *size*, not the rank, as the C++ does: ``size_at`` past the rank is 1);
* resize (``resize_select_node``, resize args ``dim, index``): the input's sizes without ``dim``.

Launcher for ``aten.select.int``: ``Select.cpp`` registers it to the same ``select_int`` as ``select_copy``.

``REGISTER_OPERATORS { VK_REGISTER_OP(aten.select.int, select_int); VK_REGISTER_OP(aten.select_copy.int,
select_int); }``: the view op has no view path; it adds the same ``select[_ubo]_*`` transfer node (the variant,
bindings, spec constants and resize are listed above).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.launchers.utils.common import val_at
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.launchers.slice import TRANSFER_PORT, TREE, Scalar, add_transfer_copy_node
from vkdiff.device.runtime.resources import Tensor


# -- select_copy.int ---------------------------------------------------------------------------------------------------

OP = "aten.select_copy.int"

PORTS = (Port(file="runtime/graph/ops/impl/Select.cpp",
              functions=("select_int", "add_select_copy_node", "check_select_args", "resize_select_node"),
              sha256="c5a9cf34989600a0c16136d64a1233d983ddb0a79805d7c8c910e140e0d6ad9b", tree=TREE),
         TRANSFER_PORT)


def size_at(dim: int, sizes) -> int:
    """``ComputeGraph::size_at``: ``utils::val_at`` (1 past either end)."""
    if dim >= 0:
        return 1 if dim >= len(sizes) else int(sizes[dim])
    return val_at(dim, sizes)


def select_sizes(in_sizes, dim: int) -> tuple[int, ...]:
    """The output sizes ``resize_select_node`` computes: the input's without ``dim``."""
    dim = dim + len(in_sizes) if dim < 0 else dim
    return tuple(int(s) for i, s in enumerate(in_sizes) if i != dim)


def resize_select_node(graph: ComputeGraph, out: Tensor, x: Tensor, dim: int) -> None:
    """``resize_select_node``."""
    graph.virtual_resize(out, select_sizes(x.spec.sizes, dim))


def check_select_args(x: Tensor, dim: int, index: Scalar, out: Tensor) -> None:
    """``check_select_args``: ``VK_CHECK_COND`` failures raise ``ValueError`` with the C++ message."""
    index = 0 if index is None else ComputeGraph.read_symint(index)
    in_sizes, out_sizes = x.spec.sizes, out.spec.sizes
    in_ndim = len(in_sizes)
    dim = dim + in_ndim if dim < 0 else dim
    if not 0 <= dim < in_ndim:
        raise EtVkRefusal(f"Dimension out of range (expected to be in range of [{-in_ndim}, {in_ndim - 1}], "
                         f"but got {dim})")
    in_size_at_dim = size_at(dim, in_sizes)
    index = index + in_size_at_dim if index < 0 else index
    if not 0 <= index < in_size_at_dim:
        raise EtVkRefusal(f"select(): index {index} out of range for tensor of size {in_size_at_dim} at dimension {dim}")
    if len(out_sizes) != in_ndim - 1:
        raise EtVkRefusal(f"Output tensor dimension mismatch (expected {in_size_at_dim - 1}, but got {len(out_sizes)})")
    out_idx = 0
    for i in range(in_size_at_dim):
        if i == dim:
            continue
        if size_at(out_idx, out_sizes) != size_at(i, in_sizes):
            raise EtVkRefusal(f"Output size mismatch at dimension {out_idx} (expected {size_at(i, in_sizes)}, "
                             f"but got {size_at(out_idx, out_sizes)})")
        out_idx += 1


def select_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_select_node`` on numpy arguments."""
    x = np.asarray(args["self"])
    return select_sizes(x.shape, int(args["dim"])), x.dtype


@register_op(OP, output=select_output, constants=(), ports=PORTS)
def select_copy(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``select_int`` → ``add_select_copy_node``: ``out = self.select(dim, index)``.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor), ``dim`` (int), ``index`` (int or SymInt; negative counts from the
            current end), by schema name.
        out (Tensor): the output (``self``'s sizes without ``dim``), allocated at its maximal sizes.

    Raises:
        ValueError: ``check_select_args`` fails (dim or index out of range, output sizes wrong).

    Example::

        select_copy(graph, {"self": hidden, "dim": 1, "index": -1}, last_token)
    """
    x, dim, index = args["self"], int(args["dim"]), args["index"]
    check_select_args(x, dim, index, out)
    add_transfer_copy_node(graph, True, x, dim, index, None, out, resize_args=(dim, index),
                           resize=lambda: resize_select_node(graph, out, x, dim))


# -- select.int --------------------------------------------------------------------------------------------------------

SELECT_INT_OP = "aten.select.int"

register_op(SELECT_INT_OP, output=select_output, constants=(), ports=PORTS)(select_copy)
