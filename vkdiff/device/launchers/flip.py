"""Launcher for ``aten.flip.default`` through ``flip_<dtype>`` (channels-packed textures only).

Ported from ``runtime/graph/ops/impl/Flip.cpp`` (``flip``, ``add_flip_node``, ``check_flip_args``,
``create_whcn_bitmap``, ``flip_global_wg_size``, ``resize_flip_node``): input and output must be
channels packed (``VK_CHECK_COND``); variant ``flip_<out dtype>`` (a texture3d shader); bindings out, in,
``logical_limits_ubo(out)``, ``sizes_ubo(out)`` and a params buffer holding the WHCN ``ivec4`` bitmap of
flipped dims (each dim wrapped by the input's rank, then reversed), fixed at build; no push or spec
constants; global size ``create_global_wg_size(out)``; default local size; resize: the input's sizes.
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

OP = "aten.flip.default"
PORTS = (Port(file="runtime/graph/ops/impl/Flip.cpp",
              functions=("flip", "add_flip_node", "check_flip_args", "create_whcn_bitmap", "flip_global_wg_size",
                         "resize_flip_node"),
              sha256="e7cc4ab4057f9f03cf0d7394ee05111f6a9971dc493b94e7c2ff2164f288663c", tree=TREE),)


def create_whcn_bitmap(dims: Sequence[int], ndim: int) -> np.ndarray:
    """``create_whcn_bitmap``: 1 at the WHCN index of each flipped dim.

    Raises:
        ValueError: a WHCN index past 3 (``std::vector::at`` on the 4-entry bitmap).
    """
    bitmap = [0, 0, 0, 0]
    for d in dims:
        whcn = ndim - 1 - (int(d) % ndim + ndim) % ndim
        if not 0 <= whcn < 4:
            raise EtVkRefusal(f"vector::_M_range_check: __n (which is {whcn}) >= this->size() (which is 4)")
        bitmap[whcn] = 1
    return np.array(bitmap, np.int32)


def flip_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    x = np.asarray(args["self"])
    return x.shape, x.dtype


@register_op(OP, output=flip_output, constants=(), ports=PORTS)
def flip(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``add_flip_node``: ``out = self.flip(dims)``.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor) and ``dims`` (int list, negatives allowed), by schema name.
        out (Tensor): the output.

    Raises:
        ValueError: input or output is not channels packed (``check_flip_args``).

    Example::

        flip(graph, {"self": x, "dims": [0, -1]}, out)
    """
    x = args["self"]
    if x.spec.info.packed_dim != 2 or out.spec.info.packed_dim != 2:
        raise EtVkRefusal("graph.packed_dim_of(in) == WHCN::kChannelsDim failed: flip needs channels-packed tensors")
    bitmap = create_whcn_bitmap(args["dims"], len(x.spec.sizes))
    name = f"flip_{SUFFIX[out.spec.dtype]}"
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, x, graph.logical_limits_ubo(out), graph.sizes_ubo(out),
                              graph.uniform(bitmap.tobytes(), "dims")],
                   resize=lambda: graph.virtual_resize(out, x.spec.sizes))
