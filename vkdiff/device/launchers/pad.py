"""Launcher for ``aten.constant_pad_nd.default`` through ``pad_{buffer|texture3d}_*``.

Ported from ``runtime/graph/ops/impl/Pad.cpp`` (``constant_pad_nd``, ``add_constant_pad_nd_node``,
``create_pad_per_dim``, ``resize_constant_pad_node``): variant ``pad_<out storage>_<out dtype>``; bindings out,
in, ``meta_ubo(out)``, ``meta_ubo(in)``, a params buffer with the WHCN ``ivec4`` of the *leading* pads
(``pad[0]`` → W, ``pad[2]`` → H, ``pad[4]`` → C, ``pad[6]`` → N; the trailing pads only size the output) and
one with the fill value as a ``float`` (``extract_scalar<float>``), both fixed at build; spec constant id 3:
the output's hashed layout; ``DynamicDispatchNode`` with the default global and local sizes; resize (resize
arg ``pad``): each pair adds ``before + after`` to its dim, innermost first (negative pads crop).
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

OP = "aten.constant_pad_nd.default"
PORTS = (Port(file="runtime/graph/ops/impl/Pad.cpp",
              functions=("constant_pad_nd", "add_constant_pad_nd_node", "create_pad_per_dim",
                         "resize_constant_pad_node"),
              sha256="5d7398c97d8da5d1924370af64e645f3783fa42d2e8f667d53647fa7e9cfad09", tree=TREE),)


def create_pad_per_dim(pad: Sequence[int]) -> np.ndarray:
    """``create_pad_per_dim``: the leading pad of W, H, C, N (int32, as ``static_cast<int32_t>``)."""
    out = [0, 0, 0, 0]
    for whcn in range(4):
        if len(pad) >= 2 * whcn + 2:
            out[whcn] = (int(pad[2 * whcn]) + 2**31) % 2**32 - 2**31
    return np.array(out, np.int32)


def padded_sizes(in_sizes: Sequence[int], pad: Sequence[int]) -> tuple[int, ...]:
    """``resize_constant_pad_node``: pairs from the innermost dim outwards."""
    sizes = [int(s) for s in in_sizes]
    dim = len(sizes) - 1
    for i in range(0, len(pad), 2):
        sizes[dim] += int(pad[i]) + int(pad[i + 1])
        dim -= 1
    return tuple(sizes)


def pad_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    x = np.asarray(args["self"])
    return padded_sizes(x.shape, args["pad"]), x.dtype


@register_op(OP, output=pad_output, constants=(), ports=PORTS)
def constant_pad_nd(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``add_constant_pad_nd_node``: ``out = F.pad(self, pad, value=value)``.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor), ``pad`` (int list, pairs innermost first, negatives crop) and
            ``value`` (number), by schema name.
        out (Tensor): the output.

    Example::

        constant_pad_nd(graph, {"self": x, "pad": [1, 2, 0, -1], "value": 0.5}, out)
    """
    x, pad = args["self"], [int(p) for p in args["pad"]]
    value = float(args.get("value", 0))
    name = f"pad_{out.spec.storage}_{SUFFIX[out.spec.dtype]}"

    def resize() -> None:
        """``resize_constant_pad_node``."""
        graph.virtual_resize(out, padded_sizes(x.spec.sizes, pad))

    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, x, graph.meta_ubo(out), graph.meta_ubo(x),
                              graph.uniform(create_pad_per_dim(pad).tobytes(), "pad_per_dim"),
                              graph.uniform(np.array([value], np.float32).tobytes(), "fill_value")],
                   spec={3: out.spec.hashed_layout}, resize=resize, resize_args=(tuple(pad),))
