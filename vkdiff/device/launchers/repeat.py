"""Launcher for ``aten.repeat.default`` through ``repeat_{buffer|texture3d}_*``.

Ported from ``runtime/graph/ops/impl/Repeat.cpp`` (``repeat``, ``add_repeat_node``, ``resize_repeat_node``):
variant ``repeat_<out storage>_<out dtype>``; bindings out, in, ``meta_ubo(out)``, ``meta_ubo(in)``; spec
constant id 3: the output's hashed layout; no push constants; ``DynamicDispatchNode`` with the default global
and local sizes; resize (resize arg ``repeats``): sizes and repeats right-aligned, 1 where one is shorter,
each output size ``in_size * r``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.permute import TREE
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "aten.repeat.default"
PORTS = (Port(file="runtime/graph/ops/impl/Repeat.cpp", functions=("repeat", "add_repeat_node", "resize_repeat_node"),
              sha256="d00096617a5e840f53176461dd34cfe0e947d0624609a4d6525f985d268bbed2", tree=TREE),)


def repeated_sizes(in_sizes: Sequence[int], repeats: Sequence[int]) -> tuple[int, ...]:
    """``resize_repeat_node``."""
    ndim = max(len(in_sizes), len(repeats))
    sizes = [1] * (ndim - len(in_sizes)) + [int(s) for s in in_sizes]
    reps = [1] * (ndim - len(repeats)) + [int(r) for r in repeats]
    return tuple(s * r for s, r in zip(sizes, reps))


def repeat_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    x = np.asarray(args["self"])
    return repeated_sizes(x.shape, args["repeats"]), x.dtype


@register_op(OP, output=repeat_output, constants=(), ports=PORTS)
def repeat(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``add_repeat_node``: ``out = self.repeat(repeats)``.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor) and ``repeats`` (int list, at least ``self``'s rank), by schema name.
        out (Tensor): the output.

    Example::

        repeat(graph, {"self": x, "repeats": [2, 1, 3]}, out)
    """
    x, repeats = args["self"], [int(r) for r in args["repeats"]]
    name = f"repeat_{out.spec.storage}_{SUFFIX[out.spec.dtype]}"

    def resize() -> None:
        """``resize_repeat_node``."""
        graph.virtual_resize(out, repeated_sizes(x.spec.sizes, repeats))

    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, x, graph.meta_ubo(out), graph.meta_ubo(x)], spec={3: out.spec.hashed_layout},
                   resize=resize, resize_args=(tuple(repeats),))
