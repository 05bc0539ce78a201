"""Launcher for ``aten.cat.default`` through ET-VK's ``concat_{1,2,3}_*`` shaders.

Ported from ``runtime/graph/ops/impl/Concat.cpp`` (``cat_tensor`` → ``add_concat_node``,
``concat_pick_global_wg_size``, ``get_concat_sizes``, ``resize_concat_node``):

* a temporary ``int32`` buffer ``[1]`` (width packed) holds the running offset along ``dim``: a
  ``set_zero_int32`` dispatch (global and local ``{1, 1, 1}``, UBO ``numel_ubo``) zeroes it first;
* the inputs go in batches of up to 3: per batch one ``concat_<n>_<out storage>_<out dtype>`` dispatch
  (bindings out (read-write), the batch's inputs, the offset buffer, then ``meta_ubo`` of out and of each
  input; spec constants from id 3: ``dim_whcn``, out's hashed layout, and on textures each input's hashed
  layout), then, between batches, ``update_concat_offset_<n>_int32`` (global and local ``{1, 1, 1}``,
  ``sizes_ubo`` of each input of the batch, spec constant ``dim_whcn``) adds the batch's sizes along ``dim``;
* global size (``concat_pick_global_wg_size``, re-picked after a resize): buffers, the batch's total numel;
  textures, the texel count of the batch's volume (out's sizes with ``dim`` set to the batch's sum) with one
  extra texel along the packed dim, for a batch starting mid-texel; local size the default;
* only the first batch's node has the resize function (``resize_concat_node``: the sum along ``dim``), with
  resize args ``tensors, dim``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.graph.vtensor import flip_and_unsqueeze
from vkdiff.device.launchers.utils.common import div_up
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "aten.cat.default"

PORTS = (Port(file="runtime/graph/ops/impl/Concat.cpp",
              functions=("cat_tensor", "add_concat_node", "concat_pick_global_wg_size", "get_concat_sizes",
                         "resize_concat_node"),
              sha256="79260ed057159f17f5632ce40f9a0c530e41aefc181dabafafa0356908ac03dd",
              tree="executorch main cff6f4dd32"),)

BATCH_SIZE = 3
"""Inputs per ``concat_<n>`` dispatch."""


def get_concat_sizes(all_sizes: Sequence[Sequence[int]], dim: int) -> tuple[int, ...]:
    """``get_concat_sizes``: the first input's sizes with ``dim`` summed over all inputs."""
    sizes = [int(s) for s in all_sizes[0]]
    for other in all_sizes[1:]:
        sizes[dim] += int(other[dim])
    return tuple(sizes)


def concat_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_concat_node`` on numpy arguments, in the first input's dtype."""
    tensors = [np.asarray(t) for t in args["tensors"]]
    dim = int(args.get("dim", 0))
    return get_concat_sizes([t.shape for t in tensors], dim + tensors[0].ndim if dim < 0 else dim), tensors[0].dtype


def concat_pick_global_wg_size(out: Tensor, batch: Sequence[Tensor], dim: int) -> tuple[int, int, int]:
    """``concat_pick_global_wg_size`` (``dim`` normalized, NCHW)."""
    total_numel = sum(t.spec.numel for t in batch) & 0xFFFFFFFF
    if out.spec.storage == "buffer":
        return (total_numel, 1, 1)
    volume = list(out.spec.sizes)
    volume[dim] = sum(int(t.spec.sizes[dim]) for t in batch)
    texels = flip_and_unsqueeze(volume, "sizes", 1)
    packed = out.spec.info.packed_dim
    texels[packed] = div_up(texels[packed], 4) + 1
    return (int(np.prod(texels, dtype=np.int64)) & 0xFFFFFFFF, 1, 1)


def add_concat_node(graph: ComputeGraph, tensors: Sequence[Tensor], dim: int, out: Tensor) -> None:
    """``add_concat_node``."""
    ndim = len(tensors[0].spec.sizes)
    dim = dim + ndim if dim < 0 else dim
    dim_whcn = ndim - 1 - dim % ndim
    offset = graph.add_tensor((1,), "int32", "buffer", "width", temporary=True, label="concat_offset")
    graph.dispatch("set_zero_int32", global_wg=(1, 1, 1), local_wg=(1, 1, 1),
                   resources=[offset, graph.numel_ubo(offset)])
    for start in range(0, len(tensors), BATCH_SIZE):
        batch = list(tensors[start:start + BATCH_SIZE])
        texture = out.spec.storage != "buffer"
        spec = {3: dim_whcn, 4: out.spec.hashed_layout,
                **({5 + i: t.spec.hashed_layout for i, t in enumerate(batch)} if texture else {})}
        name = f"concat_{len(batch)}_{out.spec.storage}_{SUFFIX[out.spec.dtype]}"
        resize = (lambda: graph.virtual_resize(out, get_concat_sizes([t.spec.sizes for t in tensors], dim))
                  ) if start == 0 else None
        graph.dispatch(lambda name=name: name,
                       global_wg=lambda batch=batch: concat_pick_global_wg_size(out, batch, dim),
                       resources=[out, *batch, offset, graph.meta_ubo(out), *(graph.meta_ubo(t) for t in batch)],
                       spec=spec, resize=resize, resize_args=(list(tensors), dim))
        if start + BATCH_SIZE < len(tensors):
            graph.dispatch(f"update_concat_offset_{len(batch)}_int32", global_wg=(1, 1, 1), local_wg=(1, 1, 1),
                           resources=[offset, *(graph.sizes_ubo(t) for t in batch)], spec={3: dim_whcn})


@register_op(OP, output=concat_output, constants=(), ports=PORTS)
def cat(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``cat_tensor``: ``tensors`` joined along ``dim``.

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): ``tensors`` (a list of Tensors), ``dim`` (int), by schema name.
        out (Tensor): the output, allocated at its maximal sizes.

    Example::

        cat(graph, {"tensors": [a, b, c, d], "dim": -1}, out)
    """
    add_concat_node(graph, list(args["tensors"]), int(args.get("dim", 0)), out)
