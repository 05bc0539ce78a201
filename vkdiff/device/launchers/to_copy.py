"""Launcher for ``aten._to_copy.default``: an image blit for float copies, ``view_convert_*`` shaders otherwise.

Ported from ``runtime/graph/ops/impl/ToCopy.cpp`` (``to_copy`` → ``add_to_copy_node``, ``is_float_type``,
``resize_to_copy_op_node``) and ``runtime/graph/ops/BlitNode.cpp`` (``BlitNode::encode``):

* same dtype, or float ↔ half: a ``BlitNode`` — ``vkCmdBlitImage`` of the whole source image onto the whole
  destination image (``VK_FILTER_NEAREST``), no shader. ``BlitNode::encode`` refuses buffers
  (``VK_CHECK_COND``: "BlitNode: Only texture backed tensors are supported."), although the partitioner
  offers ``ANY_STORAGE`` for float ↔ float copies. wgpu has no blit command: a blit between images of one
  format and equal extents is a texel-for-texel copy and runs as ``copy_texture_to_texture``; a
  format-converting blit (float ↔ half) cannot be issued through wgpu and is ``NOT_SUPPORTED`` by that
  transport, with that reason; the raw Vulkan transport issues ``vkCmdBlitImage`` as ET-VK does. The blit is logged as ``blit:Blit_<in>_to_<out>`` (the name ET-VK's
  profiler reports). ``add_to_copy_node`` gives the ``BlitNode`` no resize function, so its output keeps the
  serialized sizes when the input shrinks (the partitioner declares ``supports_resize=True``), and the blit
  always covers the whole allocated images;
* any other conversion (int32 ↔ float/half): ``add_view_copy_convert_node`` (``view_convert_buffer_*`` /
  ``view_convert_texture_*``, see ``launchers/view.py``), resized by ``resize_to_copy_op_node``
  (the output takes the input's sizes). The partitioner places those on contiguous buffers.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.boundary import DispatchError
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.compute import DispatchRecord
from vkdiff.device.launchers.permute import TREE
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.launchers.view import DIM_ORDER_COPY_PORTS as VIEW_PORTS, add_view_copy_convert_node
from vkdiff.device.runtime.resources import Tensor

OP = "aten._to_copy.default"
PORTS = (Port(file="runtime/graph/ops/impl/ToCopy.cpp",
              functions=("to_copy", "add_to_copy_node", "is_float_type", "resize_to_copy_op_node"),
              sha256="c5835b0e8aad9e5c1effd2b7c54dd9edff52a7f09efad557e4aade94cb65fd10", tree=TREE),
         Port(file="runtime/graph/ops/BlitNode.cpp", functions=("BlitNode::encode",),
              sha256="10afb79a7146aa4268a8b4b9f0ac58edabc2116e0683bcfecb88bac2ddd0fc74", tree=TREE),
         *VIEW_PORTS)

FLOATS = frozenset({"float32", "float16"})
"""``is_float_type``: Float and Half."""
VK_DTYPE_NAMES = {"float32": "float", "float16": "half", "int32": "int"}
"""``vkapi::to_string`` of the dtypes blits see (the profiler's kernel name)."""


def blit_name(x: Tensor, out: Tensor) -> str:
    """The kernel name ``BlitNode::encode`` reports to the profiler."""
    src, dst = (VK_DTYPE_NAMES.get(t.spec.dtype, t.spec.dtype) for t in (x, out))
    return f"Blit_{src}_to_{dst}"


def encode_blit(graph: ComputeGraph, src: Tensor, dst: Tensor) -> None:
    """``BlitNode::encode``: the whole source image onto the whole destination image.

    Raises:
        ValueError: a buffer tensor (the C++ ``VK_CHECK_COND``).
        DeviceLimitError: a blit the transport cannot issue (wgpu: a format conversion or scaling).
    """
    if src.spec.storage == "buffer" or dst.spec.storage == "buffer":
        raise EtVkRefusal("BlitNode: Only texture backed tensors are supported.")
    name = blit_name(src, dst)
    graph.device.call(DispatchError, name, graph.device.blit, src, dst, name)
    graph.dispatches.append(DispatchRecord(shader=f"blit:{name}", global_wg=tuple(src.allocated.extents),
                                           local_wg=(1, 1, 1), spec={}, prepack=False, node=graph.node,
                                           execution=graph.executions))


def add_blit_node(graph: ComputeGraph, x: Tensor, out: Tensor) -> None:
    """``new BlitNode(graph, in, out)``: no resize function; encoded at every execute."""
    graph.host_node(args=(x, out), run=lambda: encode_blit(graph, x, out))


def to_copy_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """The input's sizes in the ``dtype`` argument (the input's dtype when None)."""
    x = np.asarray(args["self"])
    return x.shape, np.dtype(args["dtype"]) if args.get("dtype") is not None else x.dtype


@register_op(OP, output=to_copy_output, constants=(), ports=PORTS)
def to_copy(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``add_to_copy_node``: ``out = self.to(out dtype)``.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor), ``dtype`` (numpy dtype name or None) and the ignored ``layout``,
            ``device``, ``pin_memory``, ``non_blocking``, ``memory_format``, by schema name.
        out (Tensor): the output, in the requested dtype.

    Example::

        to_copy(graph, {"self": x, "dtype": "int32"}, out)
    """
    x = args["self"]
    if x.spec.dtype == out.spec.dtype or (x.spec.dtype in FLOATS and out.spec.dtype in FLOATS):
        return add_blit_node(graph, x, out)

    def resize() -> None:
        """``resize_to_copy_op_node``."""
        graph.virtual_resize(out, x.spec.sizes)

    add_view_copy_convert_node(graph, x, out, resize)
