"""Launchers for ``Full.cpp``: ``aten.full``, ``full_like``, ``zeros``, ``zeros_like``, ``ones``, ``ones_like``.

Ported from ``runtime/graph/ops/impl/Full.cpp`` (``add_full_node``): variant
``full_<out storage>_<out dtype>``; UBOs: ``meta_ubo(out)`` and a params buffer holding the
fill value as float; spec constant: the output's hashed layout; no inputs (a ``*_like``
op's tensor only sizes the output); output sizes from the size list or the input
(``resize_full_node``); global size ``create_global_wg_size(out)``.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

PORTS = (Port(file="runtime/graph/ops/impl/Full.cpp", functions=("add_full_node", "resize_full_node", "full",
                                                                 "zeros", "ones"),
              sha256="e1da035624d5c8e4dcae3a532bd62503aec5466eed73db5f8b5902f57fc5ba4a", tree="executorch main cff6f4dd32"),)

FILLS = {"aten.full.default": None, "aten.full_like.default": None, "aten.zeros.default": 0.0,
         "aten.zeros_like.default": 0.0, "aten.ones.default": 1.0, "aten.ones_like.default": 1.0}
"""``VK_REGISTER_OP`` of ``Full.cpp``: op → fixed fill value (None: the op's ``fill_value``)."""


def resize_full_node(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_full_node``: the size list, or the ``*_like`` input's sizes; the requested dtype, else float32."""
    shape = np.shape(args["self"]) if "self" in args else tuple(int(s) for s in args["size"])
    like = np.asarray(args["self"]).dtype if "self" in args else np.dtype(np.float32)
    return tuple(shape), np.dtype(dtype) if dtype is not None else like


def add_full_node(graph: ComputeGraph, size_or_in: Any, fill: float, out: Tensor) -> None:
    """``add_full_node``: resized to the ``*_like`` input's sizes (``resize_full_node``; a size list is fixed)."""
    name = f"full_{out.spec.storage}_{SUFFIX[out.spec.dtype]}"
    like = isinstance(size_or_in, Tensor)
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, graph.meta_ubo(out), graph.uniform(np.array([fill], np.float32).tobytes(), "fill")],
                   spec={3: out.spec.hashed_layout},
                   resize=(lambda: graph.virtual_resize(out, size_or_in.spec.sizes)) if like else None,
                   resize_args=(size_or_in,) if like else ())


def _register(op: str, fixed: float | None) -> None:
    @register_op(op, output=resize_full_node, constants=(), ports=PORTS)
    def full(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
        size_or_in = args["self"] if "self" in args else args["size"]
        add_full_node(graph, size_or_in, float(args["fill_value"]) if fixed is None else fixed, out)

    full.__qualname__ = f"full_{op.split('.')[1]}"


for _op, _fill in FILLS.items():
    _register(_op, _fill)
