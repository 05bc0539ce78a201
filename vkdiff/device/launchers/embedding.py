"""Launcher for ``aten.embedding.default`` through ET-VK's ``embedding_*`` shaders.

Ported from ``runtime/graph/ops/impl/Embedding.cpp`` (``embedding`` → ``add_embedding_node`` or
``add_embedding_legacy_node``).

How the C++ chooses the weight's storage: from the *indices'* placement alone, never from the
table's size or a device limit. ``embedding`` asks ``is_standard_channels_packed_texture_tensor
(indices)`` (a texture, default axis map, channels packed):

* yes (legacy path, for old models): the table is prepacked as a **texture2d, height packed**
  (``prepack_standard(weight, kTexture2D, kHeightPacked)``, image extents ``(D, ceil(V / 4))``),
  ``check_embedding_args`` requires weight height packed and indices and output channels packed,
  and ``embedding_legacy_<dtype>`` runs (bindings out, indices, weight, ``sizes_ubo(out)``; spec
  constants out then indices hashed layout; **no resize function**);
* no (every model exported today; the tiny Llama's ``[1, T]`` width-packed texture3d tokens): the
  table is prepacked as a **buffer, width packed** (``prepack_standard(weight, kBuffer,
  kWidthPacked)``) and ``embedding_<out storage>_<dtype>`` runs (``embedding_buffer_*`` or
  ``embedding_texture3d_*``, the latter reading the table from that buffer); bindings out, indices,
  weight, then ``meta_ubo`` of out, indices, weight; spec constants from id 3: out and indices
  hashed layouts; global size ``create_global_wg_size(out)``, local ``create_local_wg_size``
  (``DynamicDispatchNode``: both re-picked after a resize); output ``indices.shape + [D]``
  (``resize_embedding_node``).

Neither path reads a device limit: ``Embedding.cpp`` never calls ``max_texture2d_dim`` nor checks
the storage-buffer binding size, so this port reads nothing from ``graph.device.limits`` (a legacy
table texture larger than the device allows fails in vkdiff's allocator with ``DeviceLimitError``;
the C++ does not check it). ExecuTorch issue #22333 (vocabulary > 16384 silently wrong on the
texture path, at a phone's ``maxImageDimension2D``) is not a storage choice of this file: the
table is a buffer there. It comes from the output: the AOT memory-layout pass (``op_registry.py``:
``ANY_STORAGE``, weight numel ≤ ``DEFAULT_BUFFER_LIMIT``; ``make_op_repsets`` filters layouts by
``DEFAULT_TEXTURE_LIMITS``) gives the texture output a height-packed layout once the table has
more than 16384 rows (as the fix, PR #22827, describes); ``add_embedding_node`` does not check the
output's packed dim, and ``embedding_texture3d`` assumes width packing (one index per texel, four
consecutive table elements), so each texel of a height-packed output holds one row shifted by
0..3 elements. This port reproduces that, as the C++ does.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.staging import SUFFIX, prepack_standard
from vkdiff.device.graph.vtensor import DEFAULT_AXIS_MAP
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "aten.embedding.default"

PORTS = (Port(file="runtime/graph/ops/impl/Embedding.cpp",
              functions=("embedding", "add_embedding_node", "add_embedding_legacy_node", "check_embedding_args",
                         "resize_embedding_node"),
              sha256="24f1824ca9a8538f2039d9cd119a972a2622077e275652bde9b7303b27e4aecc",
              tree="executorch main cff6f4dd32"),)

WHCN_HEIGHT, WHCN_CHANNELS = 1, 2
"""``WHCN::kHeightDim``, ``WHCN::kChannelsDim``."""


def is_standard_channels_packed_texture_tensor(tensor: Tensor) -> bool:
    """``ComputeGraph::is_standard_channels_packed_texture_tensor``: a texture, default axis map, channels packed."""
    spec = tensor.spec
    return spec.storage != "buffer" and spec.axis_map == DEFAULT_AXIS_MAP and spec.info.packed_dim == WHCN_CHANNELS


def check_embedding_args(weight: Tensor, indices: Tensor, out: Tensor) -> None:
    """``check_embedding_args`` (legacy path): weight height packed, indices and output channels packed."""
    packed = (weight.spec.info.packed_dim, indices.spec.info.packed_dim, out.spec.info.packed_dim)
    if packed != (WHCN_HEIGHT, WHCN_CHANNELS, WHCN_CHANNELS):
        raise EtVkRefusal(f"embedding_legacy: packed dims (weight, indices, out) must be (height, channels, channels) "
                         f"(WHCN {WHCN_HEIGHT}, {WHCN_CHANNELS}, {WHCN_CHANNELS}), got WHCN {packed}")


def resize_embedding_node(graph: ComputeGraph, out: Tensor, indices: Tensor, weight: Tensor) -> None:
    """``resize_embedding_node``: ``indices.sizes + [weight.sizes[-1]]``."""
    graph.virtual_resize(out, (*indices.spec.sizes, weight.spec.sizes[-1]))


def add_embedding_node(graph: ComputeGraph, indices: Tensor, weight: Tensor, out: Tensor) -> None:
    """``add_embedding_node``: ``embedding_<out storage>_<dtype>`` on a buffer table."""
    name = f"embedding_{out.spec.storage}_{SUFFIX[out.spec.dtype]}"
    graph.dispatch(name, global_wg=lambda: default_global_wg(out),
                   resources=[out, indices, weight, graph.meta_ubo(out), graph.meta_ubo(indices),
                              graph.meta_ubo(weight)],
                   spec={3: out.spec.hashed_layout, 4: indices.spec.hashed_layout},
                   resize=lambda: resize_embedding_node(graph, out, indices, weight))


def add_embedding_legacy_node(graph: ComputeGraph, weight: Tensor, indices: Tensor, out: Tensor) -> None:
    """``add_embedding_legacy_node``: ``embedding_legacy_<dtype>`` on a height-packed texture2d table, no resize."""
    check_embedding_args(weight, indices, out)
    name = f"embedding_legacy_{SUFFIX[out.spec.dtype]}"
    graph.dispatch(name, global_wg=lambda: default_global_wg(out),
                   resources=[out, indices, weight, graph.sizes_ubo(out)],
                   spec={3: out.spec.hashed_layout, 4: indices.spec.hashed_layout})


def embedding_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """Output ``indices.shape + [D]`` (``resize_embedding_node``) in ``dtype``, else the table's dtype."""
    weight = np.asarray(args["weight"])
    return (*np.shape(args["indices"]), weight.shape[-1]), np.dtype(dtype or weight.dtype)


@register_op(OP, output=embedding_output, constants=("weight",), ports=PORTS)
def embedding(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``embedding``: the legacy path for channels-packed texture indices, else a buffer table.

    Args:
        graph (ComputeGraph): where the prepack and execute nodes go.
        args (Mapping): ``weight`` (TensorRef ``[V, D]``), ``indices`` (Tensor, int32), ``padding_idx``,
            ``scale_grad_by_freq``, ``sparse`` (ignored, as the C++ ignores them), by schema name.
        out (Tensor): the output ``indices.shape + [D]``, allocated at its maximal sizes.

    Example::

        embedding(graph, {"weight": TensorRef(id=15, data=table), "indices": tokens}, out)
    """
    weight_data: TensorRef = args["weight"]
    indices: Tensor = args["indices"]
    if is_standard_channels_packed_texture_tensor(indices):
        weight = prepack_standard(graph, weight_data, "texture2d", "height")
        add_embedding_legacy_node(graph, weight, indices, out)
        return
    weight = prepack_standard(graph, weight_data, "buffer", "width")
    add_embedding_node(graph, indices, weight, out)
