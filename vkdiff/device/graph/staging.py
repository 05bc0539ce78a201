"""Data in and out of graph tensors through the tree's own staging shaders (``Staging.cpp``, ``StagingUtils.cpp``).

A graph input is written as ``add_staging_to_tensor_node`` does: NCHW-contiguous data in
a staging buffer of the staging dtype, then ``nchw_to_image_*`` / ``nchw_to_buffer_*``
(or, for 8-bit textures on devices without 8-bit storage buffers,
``nchw_to_bitw8_image_nobitw8buffer_*``). Outputs (and every probed intermediate) come
back through ``image_to_nchw[_coalesced]_*`` / ``buffer_to_nchw_*`` /
``bitw8_image_to_nchw_nobitw8buffer_*``. Constants go through ``add_prepack_standard_node``.

One exception, recorded in the dispatch log as ``copy:<shader>``: 8-bit buffer
tensors (``nchw_to_buffer_uint8_uint8``) are written as bytes, because naga cannot load
8-bit storage buffers; for a contiguous width-packed buffer that shader is an identity
copy, so the bytes are the same.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from vkdiff.device import resources
from vkdiff.device.graph.compute import ComputeGraph, TensorRef, create_local_wg_size
from vkdiff.device.graph.vtensor import TensorSpec
from vkdiff.device.ports import Port
from vkdiff.device.resources import Tensor

RUNTIME_PORTS = (
    Port(file="runtime/graph/ops/impl/Staging.cpp",
         functions=("add_staging_to_tensor_node", "add_tensor_to_staging_node", "add_prepack_standard_node",
                    "prepack_standard"),
         sha256="8e1ae8d3ebff29ea7805c6d8417ead0c94fdb0dd8d7f7efa98256fd86fbf365f", tree="executorch main cff6f4dd32"),
    Port(file="runtime/graph/ops/utils/StagingUtils.cpp",
         functions=("get_nchw_to_tensor_shader", "get_tensor_to_nchw_shader"),
         sha256="350eae9444d02e7bcee1c03b9c7f41ad42806f4ea45206bb5abb1963a242f6b0", tree="executorch main cff6f4dd32"),
    Port(file="runtime/api/containers/Tensor.cpp",
         functions=("calculate_packed_dim_info", "calculate_padded_sizes", "calculate_dim_order", "calculate_strides",
                    "calculate_image_extents", "create_hashed_layout", "BufferMetadata::update",
                    "TextureMetadata::update"),
         sha256="7de18dd3f7c7332575bf76f2f1a7d62fbfcdd47fc54b23589b88c406910bff31", tree="executorch main cff6f4dd32"),
)
"""The runtime C++ the graph package re-hosts (staging and ``vTensor`` metadata)."""

SUFFIX = {"float32": "float", "float16": "half", "int32": "int32", "int8": "int8", "uint8": "uint8",
          "bool": "uint8", "float64": "double", "int8x4": "int32", "int64": "int64"}
"""``add_dtype_suffix`` by dtype name."""


def staging_dtype(graph: ComputeGraph, dtype: str) -> str:
    """``get_staging_dtype``: half stages as float without full float16 buffer support."""
    return "float32" if dtype == "float16" and not graph.route.float16_buffers else dtype


def _is_bitw8(dtype: str) -> bool:
    return dtype in ("int8", "uint8", "bool")


def nchw_to_tensor_shader(graph: ComputeGraph, spec: TensorSpec, staging: str) -> str:
    """``get_nchw_to_tensor_shader``."""
    if _is_bitw8(spec.dtype) and spec.storage != "buffer" and not graph.route.int8_buffers:
        return f"nchw_to_bitw8_image_nobitw8buffer_{spec.storage}_{SUFFIX[spec.dtype]}"
    if spec.storage == "buffer":
        return f"nchw_to_buffer_{SUFFIX[spec.dtype]}_{SUFFIX[staging]}"
    return f"nchw_to_image_{spec.storage}_{SUFFIX[spec.dtype]}_{SUFFIX[staging]}"


def tensor_to_nchw_shader(graph: ComputeGraph, spec: TensorSpec, staging: str) -> str:
    """``get_tensor_to_nchw_shader``: ``_coalesced`` writes unless the device is integrated.

    Trees before the coalesced variants existed always used ``image_to_nchw``.
    """
    if _is_bitw8(spec.dtype) and spec.storage != "buffer" and not graph.route.int8_buffers:
        return f"bitw8_image_to_nchw_nobitw8buffer_{spec.storage}_{SUFFIX[spec.dtype]}"
    if spec.storage == "buffer":
        return f"buffer_to_nchw_{SUFFIX[spec.dtype]}_{SUFFIX[staging]}"
    plain = f"image_to_nchw_{spec.storage}_{SUFFIX[spec.dtype]}_{SUFFIX[staging]}"
    coalesced = f"image_to_nchw_coalesced_{spec.storage}_{SUFFIX[spec.dtype]}_{SUFFIX[staging]}"
    return plain if graph.route.integrated or not graph.ctx.has(coalesced) else coalesced


def global_wg(spec: TensorSpec) -> tuple[int, int, int]:
    """``create_global_wg_size``: numel for buffers, logical limits for textures."""
    return (spec.numel, 1, 1) if spec.storage == "buffer" else spec.logical_limits


def staging_buffer(graph: ComputeGraph, data: np.ndarray, label: str) -> Tensor:
    """A staging buffer (``StagingBuffer``): 8-bit data padded to whole words."""
    flat = np.ascontiguousarray(data).reshape(-1)
    if flat.dtype.itemsize == 1 and flat.size % 4:
        flat = np.concatenate([flat, np.zeros(4 - flat.size % 4, flat.dtype)])
    return resources.buffer_tensor(graph.device, flat, label)


def write_nchw(graph: ComputeGraph, tensor: Tensor, array: np.ndarray, *, prepack: bool = False,
               transpose_hw: bool = False) -> None:
    """``add_staging_to_tensor_node`` (inputs) or ``add_prepack_standard_node`` (constants, ``prepack``).

    The staging dtype is the data's (a constant's own dtype, half as float without
    float16 buffers), so float32 scales prepacked into a half tensor use ``*_half_float``.
    """
    spec = tensor.spec
    staging = staging_dtype(graph, np.asarray(array).dtype.name)
    shader = nchw_to_tensor_shader(graph, spec, staging)
    data = np.asarray(array).astype(staging, copy=False)
    if spec.storage == "buffer" and _is_bitw8(spec.dtype) and not graph.route.int8_buffers and not transpose_hw:
        graph.device.queue.write_buffer(tensor.handle, 0, np.ascontiguousarray(data).view(np.uint8).reshape(-1))
        graph.log_copy(shader, prepack)
        return
    src = staging_buffer(graph, data, "staging_in")
    bitw8 = shader.startswith("nchw_to_bitw8")
    ubos = [] if bitw8 else [graph.meta_ubo(tensor)]
    pcs = spec.sizes_block() if bitw8 else b""
    if prepack and spec.storage == "buffer":
        pcs = spec.sizes_block() + spec.strides_block() + spec.numel_block()
    spec_constants = {3: spec.hashed_layout, 4: int(transpose_hw)} if (prepack or bitw8) else {3: spec.hashed_layout}
    wg = global_wg(spec)
    graph.dispatch(shader, global_wg=wg, local_wg=create_local_wg_size(wg), resources=[tensor, src, *ubos],
                   spec=spec_constants, immediates=pcs, prepack=prepack)


@dataclasses.dataclass
class Readback:
    """A tensor's contents copied to a staging buffer by a ``*_to_nchw`` dispatch; ``get`` maps it."""

    graph: ComputeGraph
    buffer: Tensor
    spec: TensorSpec
    dtype: str

    def get(self) -> np.ndarray:
        """The tensor in NCHW order, its declared sizes, in the staging dtype (8-bit as their own dtype)."""
        raw = resources.read(self.graph.device, self.buffer).view(np.uint8)
        dtype = np.dtype(self.dtype)
        count = self.spec.numel
        return np.frombuffer(raw[: count * dtype.itemsize].tobytes(), dtype).reshape(self.spec.sizes).copy()


def read_nchw(graph: ComputeGraph, tensor: Tensor) -> Readback:
    """``add_tensor_to_staging_node``: dispatch the copy now, map it later (``Readback.get``)."""
    spec = tensor.spec
    staging = staging_dtype(graph, spec.dtype)
    shader = tensor_to_nchw_shader(graph, spec, staging)
    words = -(-spec.numel * np.dtype(staging).itemsize // 4)
    out = resources.buffer_tensor(graph.device, np.full(max(words, 4), 0x7FA5A5A5, np.uint32), "staging_out")
    if shader.startswith("bitw8_image"):
        wg, ubos, pcs = (-(-spec.numel // 4), 1, 1), [], spec.sizes_block() + spec.numel_block()
    else:
        wg = (spec.numel, 1, 1) if "_coalesced" in shader else global_wg(spec)
        ubos, pcs = [graph.meta_ubo(tensor)], b""
    graph.dispatch(shader, global_wg=wg, local_wg=create_local_wg_size(wg), resources=[out, tensor, *ubos],
                   spec={3: spec.hashed_layout}, immediates=pcs)
    return Readback(graph=graph, buffer=out, spec=spec, dtype=staging)


def prepack_standard(graph: ComputeGraph, ref: TensorRef, storage: str = "buffer", layout: str = "width",
                     dtype: str | None = None) -> Tensor:
    """``prepack_standard``: a new tensor (no prepack cache) written from the constant by a prepack node."""
    data = np.asarray(ref.data)
    tensor = graph.add_tensor(data.shape, dtype or data.dtype.name, storage, layout, label=f"prepacked_{ref.id}")
    write_nchw(graph, tensor, data, prepack=True)
    return tensor


def graph_input(graph: ComputeGraph, array: np.ndarray, storage: str, layout: str, label: str = "input") -> Tensor:
    """A graph input tensor written through the staging shaders."""
    array = np.asarray(array)
    tensor = graph.add_tensor(array.shape, array.dtype.name, storage, layout, label)
    write_nchw(graph, tensor, array)
    return tensor

