"""Launcher for ``et_vk.prepack.default``: a constant copied into a pre-allocated device tensor.

Ported from ``runtime/graph/ops/impl/Staging.cpp`` (``prepack_op``) and ``Int8x4Staging.cpp``
(``add_prepack_int8x4_buffer_node``):

* no storage choice: the output was allocated by the graph with its serialized storage and
  layout (the tiny Llama's RoPE tables: ``[32, 8]`` width-packed texture3d) and the constant is
  written into it;
* any dtype but int8x4: ``add_prepack_standard_node`` (``staging.write_nchw(..., prepack=True)``):
  ``nchw_to_image_<storage>_<dtype>_<staging dtype>`` / ``nchw_to_buffer_<dtype>_<staging dtype>`` (or
  ``nchw_to_bitw8_image_nobitw8buffer_*`` for 8-bit textures without 8-bit storage buffers), meta UBO,
  spec constants ``hashed_layout``, ``transpose_hw = 0``; buffers push sizes, strides, numel;
* int8x4 output: ``add_prepack_int8x4_buffer_node``: ``nchw_to_int8x4_buffer`` (bindings out, the int8
  staging data read as int32 words, ``buffer_meta_ubo(out)``), spec constant ``hashed_layout``, global
  size ``(padded_numel / 4, 1, 1)``, local ``create_local_wg_size``; at most 4 dims.

Prepack nodes run once, at build; there is no execute node and nothing to resize.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.runtime import resources
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.compute import create_local_wg_size
from vkdiff.device.graph.staging import write_nchw
from vkdiff.device.graph.vtensor import INT8X4
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.prepack.default"

TREE = "executorch main cff6f4dd32"

PORTS = (Port(file="runtime/graph/ops/impl/Staging.cpp", functions=("prepack_op", "add_prepack_standard_node"),
              sha256="8e1ae8d3ebff29ea7805c6d8417ead0c94fdb0dd8d7f7efa98256fd86fbf365f", tree=TREE),
         Port(file="runtime/graph/ops/impl/Int8x4Staging.cpp", functions=("add_prepack_int8x4_buffer_node",),
              sha256="677d98e0ecd514b46dcba145e0b15a7fe2327c54ae3bbe4e0aacbf6a4489e928", tree=TREE))


def int8_staging_words(graph: ComputeGraph, data: np.ndarray) -> Tensor:
    """The int8 staging buffer of a constant, its bytes as the int32 words ``nchw_to_int8x4_buffer`` reads."""
    raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    padded = np.concatenate([raw, np.zeros(-raw.size % 4, np.uint8)])
    return resources.buffer_tensor(graph.device, padded.view(np.int32), "staging_int8x4")


def add_prepack_int8x4_buffer_node(graph: ComputeGraph, ref: TensorRef, tensor: Tensor) -> None:
    """``add_prepack_int8x4_buffer_node``: one thread per int32 (four int8) of the packed buffer."""
    spec = tensor.spec
    if spec.dtype != INT8X4:
        raise EtVkRefusal(f"nchw_to_int8x4_buffer: output dtype must be {INT8X4}, got {spec.dtype}")
    if len(spec.sizes) > 4:
        raise EtVkRefusal(f"nchw_to_int8x4_buffer: at most 4 dims, got sizes {list(spec.sizes)}")
    if spec.storage != "buffer":
        raise EtVkRefusal(f"nchw_to_int8x4_buffer writes a buffer (buffer_meta_ubo); the output is {spec.storage}")
    global_wg = (spec.padded_numel // 4, 1, 1)
    graph.dispatch("nchw_to_int8x4_buffer", global_wg=global_wg, local_wg=create_local_wg_size(global_wg),
                   resources=[tensor, int8_staging_words(graph, np.asarray(ref.data)), graph.meta_ubo(tensor)],
                   spec={3: spec.hashed_layout}, prepack=True)


def prepack_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """The constant's sizes and dtype."""
    x = np.asarray(args["x"])
    return x.shape, x.dtype


@register_op(OP, output=prepack_output, constants=("x",), ports=PORTS)
def prepack(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``prepack_op``: the constant ``x`` into ``out`` (its storage, layout and dtype).

    Args:
        graph (ComputeGraph): where the prepack node goes (it runs at once).
        args (Mapping): ``x`` (TensorRef), by schema name.
        out (Tensor): the pre-allocated output; int8x4 outputs take the ``nchw_to_int8x4_buffer`` path.

    Example::

        prepack(graph, {"x": TensorRef(id=55, data=freqs_cos)}, freqs_texture)
    """
    ref: TensorRef = args["x"]
    if out.spec.dtype == INT8X4:
        add_prepack_int8x4_buffer_node(graph, ref, out)
        return
    write_nchw(graph, out, np.asarray(ref.data), prepack=True)
