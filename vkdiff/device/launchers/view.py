"""Launchers for the ops ``View.cpp`` registers: ``aten.view_copy.default`` and
``dim_order_ops._to_dim_order_copy.default``, and ``View.cpp``'s copy nodes other ops reuse.

Launcher for ``aten.view_copy.default`` through ET-VK's ``view_buffer`` / ``view_texture`` shaders.

Ported from ``runtime/graph/ops/impl/View.cpp`` (``view`` → ``add_view_copy_node``):
variant ``view_{buffer|texture}_<dtype>``; UBOs ``meta_ubo`` of out then in; spec constants
from id 3: (out, in) hashed layouts for buffers but (in, out) for textures, as the C++
orders them; global size ``create_global_wg_size(out)``; output sizes from the view
sizes with one ``-1`` inferred (``compute_out_sizes``).

Launcher for ``dim_order_ops._to_dim_order_copy.default``, and ``View.cpp``'s copy nodes other ops reuse.

Ported from ``runtime/graph/ops/impl/View.cpp`` (``to_dim_order_copy``, ``add_view_copy_node``,
``add_view_copy_convert_node``, ``resize_to_dim_order_copy_node``):

* ``to_dim_order_copy``: input and output must be buffers (``VK_CHECK_COND``); the ``dtype``, ``layout``,
  ``device``, ``pin_memory``, ``non_blocking`` and ``dim_order`` arguments are read and ignored, so the
  output's dim order is the one its placement gives; same dtype → ``add_view_copy_node``, else
  ``add_view_copy_convert_node``; resize: the output takes the input's sizes;
* ``add_view_copy_node``: variant ``view_{buffer|texture}_<out dtype>``; UBOs ``meta_ubo`` of out then in;
  spec constants from id 3: (out, in) hashed layouts for buffers but (in, out) for textures;
* ``add_view_copy_convert_node``: buffers ``view_convert_buffer_<in dtype>_<out dtype>`` with
  ``buffer_meta_ubo`` of out then in and spec constants (out, in) hashed layouts; textures
  ``view_convert_texture_<in>_<out>`` with push constant ``sizes_pc_of(out)`` and spec constant
  ``packed_dim_of(out)``;
* both: ``DynamicDispatchNode`` with the default global (numel of out, or its logical limits) and local
  sizes.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor


# -- view_copy ---------------------------------------------------------------------------------------------------------

PORTS = (Port(file="runtime/graph/ops/impl/View.cpp", functions=("view", "add_view_copy_node", "compute_out_sizes",
                                                                  "resize_view_node"),
              sha256="304ab6618892de350380d0337f19283c428b8714f8c9ed5cfcb12c306ee596a4",
              tree="executorch main cff6f4dd32"),)


def compute_out_sizes(in_sizes, view_sizes) -> tuple[int, ...]:
    """``compute_out_sizes``: ``-1`` becomes numel / product of the given sizes."""
    numel = int(np.prod(in_sizes, dtype=np.int64))
    known = int(np.prod([s for s in view_sizes if s > 0], dtype=np.int64))
    return tuple(numel // known if s == -1 else int(s) for s in view_sizes)


def resize_view_node(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    x = np.asarray(args["self"])
    return compute_out_sizes(x.shape, args["size"]), x.dtype


@register_op("aten.view_copy.default", output=resize_view_node, constants=(), ports=PORTS)
def view(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``add_view_copy_node``."""
    x = args["self"]
    buffer = out.spec.storage == "buffer"
    name = f"view_{'buffer' if buffer else 'texture'}_{SUFFIX[out.spec.dtype]}"
    first, second = (out, x) if buffer else (x, out)
    size = args.get("size")

    def resize() -> None:
        """``resize_view_node``."""
        if size is None:
            graph.virtual_resize(out, x.spec.sizes)
        else:
            graph.virtual_resize(out, compute_out_sizes(x.spec.sizes, [graph.read_symint(s) for s in size]))

    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, x, graph.meta_ubo(out), graph.meta_ubo(x)],
                   spec={3: first.spec.hashed_layout, 4: second.spec.hashed_layout}, resize=resize,
                   resize_args=(size,) if size is not None else ())


# -- _to_dim_order_copy ------------------------------------------------------------------------------------------------

DIM_ORDER_COPY_OP = "dim_order_ops._to_dim_order_copy.default"
DIM_ORDER_COPY_PORTS = (Port(file=PORTS[0].file, functions=("to_dim_order_copy", "add_view_copy_node",
                                                            "add_view_copy_convert_node",
                                                            "resize_to_dim_order_copy_node"),
                             sha256=PORTS[0].sha256, tree=PORTS[0].tree),)

Resize = Callable[[], None]


def add_view_copy_node(graph: ComputeGraph, x: Tensor, out: Tensor, resize: Resize,
                       resize_args: tuple = ()) -> None:
    """``add_view_copy_node``: one ``view_buffer_*`` / ``view_texture_*`` dispatch."""
    buffer = out.spec.storage == "buffer"
    name = f"view_{'buffer' if buffer else 'texture'}_{SUFFIX[out.spec.dtype]}"
    first, second = (out, x) if buffer else (x, out)
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, x, graph.meta_ubo(out), graph.meta_ubo(x)],
                   spec={3: first.spec.hashed_layout, 4: second.spec.hashed_layout}, resize=resize,
                   resize_args=resize_args)


def add_view_copy_convert_node(graph: ComputeGraph, x: Tensor, out: Tensor, resize: Resize,
                               resize_args: tuple = ()) -> None:
    """``add_view_copy_convert_node``: one ``view_convert_{buffer|texture}_<in>_<out>`` dispatch."""
    suffix = f"{SUFFIX[x.spec.dtype]}_{SUFFIX[out.spec.dtype]}"
    if out.spec.storage == "buffer":
        name = f"view_convert_buffer_{suffix}"
        resources = [out, x, graph.meta_ubo(out), graph.meta_ubo(x)]
        spec, immediates = {3: out.spec.hashed_layout, 4: x.spec.hashed_layout}, []
    else:
        name = f"view_convert_texture_{suffix}"
        resources, spec, immediates = [out, x], {3: out.spec.info.packed_dim}, [graph.pc(out, "sizes")]
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out), resources=resources, spec=spec,
                   immediates=immediates, resize=resize, resize_args=resize_args)


def same_sizes_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """An output of the input's sizes, in the ``dtype`` argument where given (``resize_to_dim_order_copy_node``)."""
    x = np.asarray(args["self"])
    return x.shape, np.dtype(args["dtype"]) if args.get("dtype") is not None else x.dtype


@register_op(DIM_ORDER_COPY_OP, output=same_sizes_output, constants=(), ports=DIM_ORDER_COPY_PORTS)
def to_dim_order_copy(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``to_dim_order_copy``: ``out = self.to(dtype)`` between buffers; the dim order argument is ignored.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor), ``dtype`` (numpy dtype name or None), ``dim_order`` (int list or
            None) and the ignored ``layout``, ``device``, ``pin_memory``, ``non_blocking``, by schema name.
        out (Tensor): the output buffer.

    Raises:
        ValueError: input or output is not a buffer (the C++ ``VK_CHECK_COND``).

    Example::

        to_dim_order_copy(graph, {"self": x, "dtype": "float16", "dim_order": [0, 1, 2]}, out)
    """
    x = args["self"]
    if x.spec.storage != "buffer" or out.spec.storage != "buffer":
        raise EtVkRefusal("graph.is_buffer_storage(in) && graph.is_buffer_storage(out) failed: "
                         f"_to_dim_order_copy runs on buffers only (got {x.spec.storage} → {out.spec.storage})")

    def resize() -> None:
        """``resize_to_dim_order_copy_node``."""
        graph.virtual_resize(out, x.spec.sizes)

    add = add_view_copy_node if x.spec.dtype == out.spec.dtype else add_view_copy_convert_node
    add(graph, x, out, resize)
