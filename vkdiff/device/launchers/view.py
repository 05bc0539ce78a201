"""Launcher for ``aten.view_copy.default`` through ET-VK's ``view_buffer`` / ``view_texture`` shaders.

Ported from ``runtime/graph/ops/impl/View.cpp`` (``view`` → ``add_view_copy_node``):
variant ``view_{buffer|texture}_<dtype>``; UBOs ``meta_ubo`` of out then in; spec constants
from id 3: (out, in) hashed layouts for buffers but (in, out) for textures, as the C++
orders them; global size ``create_global_wg_size(out)``; output sizes from the view
sizes with one ``-1`` inferred (``compute_out_sizes``).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.resources import Tensor

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
