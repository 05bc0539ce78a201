"""Launcher for ``aten.expand_copy.default`` through ``expand_{buffer|texture3d}_*``.

Ported from ``runtime/graph/ops/impl/Expand.cpp`` (``expand``, ``add_expand_node``, ``resize_expand_node``):
variant ``expand_<out storage>_<out dtype>``; bindings out, in, ``meta_ubo(out)``, ``meta_ubo(in)``; spec
constant id 3: the output's hashed layout (the buffer shader declares none); no push constants;
``implicit`` is ignored; ``DynamicDispatchNode`` with the default global and local sizes; resize (resize arg
``size``): a ``-1`` takes the aligned input size (1 in a new leading dim), any other entry is the size.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.permute import TREE
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "aten.expand_copy.default"
PORTS = (Port(file="runtime/graph/ops/impl/Expand.cpp", functions=("expand", "add_expand_node", "resize_expand_node"),
              sha256="6ec46729d5e9ff7af4e964ca8cb8048ad1a01a8b5ea80384b666df7d3504a545", tree=TREE),)


def expanded_sizes(in_sizes: Sequence[int], target: Sequence[int]) -> tuple[int, ...]:
    """``resize_expand_node``.

    Raises:
        ValueError: fewer target dims than input dims, or none (the C++ ``VK_CHECK_COND``).
    """
    if len(target) < len(in_sizes):
        raise EtVkRefusal("expand: target sizes must have at least as many dims as input")
    if not target:
        raise EtVkRefusal("expand: target sizes must not be empty")
    offset = len(target) - len(in_sizes)
    return tuple((int(in_sizes[i - offset]) if i >= offset else 1) if t == -1 else int(t)
                 for i, t in enumerate(target))


def expand_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    x = np.asarray(args["self"])
    return expanded_sizes(x.shape, [int(s) for s in args["size"]]), x.dtype


@register_op(OP, output=expand_output, constants=(), ports=PORTS)
def expand(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``add_expand_node``: ``out = self.expand(size)`` materialised.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor), ``size`` (int list, ``-1`` keeps a dim), ``implicit`` (ignored).
        out (Tensor): the output.

    Example::

        expand(graph, {"self": x, "size": [4, -1, 6], "implicit": False}, out)
    """
    x, size = args["self"], [int(s) for s in args["size"]]
    name = f"expand_{out.spec.storage}_{SUFFIX[out.spec.dtype]}"

    def resize() -> None:
        """``resize_expand_node``."""
        graph.virtual_resize(out, expanded_sizes(x.spec.sizes, size))

    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, x, graph.meta_ubo(out), graph.meta_ubo(x)], spec={3: out.spec.hashed_layout},
                   resize=resize, resize_args=(tuple(size),))
