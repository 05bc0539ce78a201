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
from typing import Sequence

import numpy as np

from vkdiff.device.runtime import resources
from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph.compute import ComputeGraph, TensorRef
from vkdiff.device.graph.vtensor import INT8X4, TensorSpec
from vkdiff.device.shaders.ports import Port
from vkdiff.device.runtime.resources import Tensor

RUNTIME_PORTS = (
    Port(file="runtime/graph/ops/impl/Staging.cpp",
         functions=("add_staging_to_tensor_node", "add_tensor_to_staging_node", "add_prepack_standard_node",
                    "prepack_standard"),
         sha256="8e1ae8d3ebff29ea7805c6d8417ead0c94fdb0dd8d7f7efa98256fd86fbf365f", tree="executorch main cff6f4dd32"),
    Port(file="runtime/graph/ops/impl/Int8x4Staging.cpp",
         functions=("add_staging_to_int8x4_buffer_node", "add_int8x4_buffer_to_staging_node"),
         sha256="677d98e0ecd514b46dcba145e0b15a7fe2327c54ae3bbe4e0aacbf6a4489e928", tree="executorch main cff6f4dd32"),
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


@dataclasses.dataclass(eq=False)
class InputStaging:
    """A graph input's staging buffer, sized for the serialized sizes; the host fills it before each execute."""

    graph: ComputeGraph
    tensor: Tensor
    buffer: Tensor
    dtype: str
    """Staging dtype."""
    data: np.ndarray | None = None
    """The host copy of the latest input (``select_as_symint`` reads it, as ET-VK reads the staging buffer)."""

    def copy_in(self, array: np.ndarray) -> None:
        """``copy_into_staging``: NCHW data of the tensor's current sizes."""
        data = np.ascontiguousarray(np.asarray(array).astype(self.dtype, copy=False)).reshape(-1)
        if data.nbytes > self.buffer.handle.size:
            raise ValueError(f"input of {data.size} elements exceeds its staging buffer "
                             f"({self.buffer.handle.size} bytes): larger than the serialized sizes")
        raw = data.view(np.uint8)
        if raw.size % 4:
            raw = np.concatenate([raw, np.zeros(4 - raw.size % 4, np.uint8)])
        self.graph.device.queue.write_buffer(self.buffer.handle, 0, raw)
        self.data = np.asarray(array).astype(self.dtype, copy=False)


def add_input_staging(graph: ComputeGraph, tensor: Tensor, dtype: str | None = None) -> InputStaging:
    """``add_staging_to_tensor_node`` for a graph input: its staging buffer and the copy node."""
    spec = tensor.spec
    if spec.dtype == INT8X4:
        return _add_staging_to_int8x4_buffer_node(graph, tensor)
    staging = staging_dtype(graph, dtype or spec.dtype)
    count = max(tensor.allocated.numel, 1)
    buffer = staging_buffer(graph, np.zeros(count, staging), "staging_in")
    entry = InputStaging(graph=graph, tensor=tensor, buffer=buffer, dtype=staging)
    graph.input_stagings[id(tensor)] = entry
    shader = nchw_to_tensor_shader(graph, spec, staging)
    if spec.storage == "buffer" and _is_bitw8(spec.dtype) and not graph.route.int8_buffers:
        def copy() -> None:
            raw = np.ascontiguousarray(entry.data).view(np.uint8).reshape(-1)
            if raw.size % 4:  # writes must be whole words (COPY_BUFFER_ALIGNMENT); the buffer is padded to 16
                raw = np.concatenate([raw, np.zeros(4 - raw.size % 4, np.uint8)])
            graph.device.queue.write_buffer(tensor.handle, 0, raw)
            graph.log_copy(shader, prepack=False)
        graph.host_node(args=(tensor,), run=copy)
        return entry
    bitw8 = shader.startswith("nchw_to_bitw8")
    graph.dispatch(shader, global_wg=lambda: global_wg(tensor.spec), resources=[tensor, buffer,
                   *([] if bitw8 else [graph.meta_ubo(tensor)])],
                   spec={3: spec.hashed_layout, 4: 0} if bitw8 else {3: spec.hashed_layout},
                   immediates=[graph.pc(tensor, "sizes")] if bitw8 else b"")
    return entry


def _int8x4_checks(spec: TensorSpec, shader: str) -> None:
    """``Int8x4Staging.cpp``'s ``VK_CHECK_COND`` (at most 4 dims); its shaders bind buffers only."""
    if len(spec.sizes) > 4:
        raise EtVkRefusal(f"{shader}: int8x4 tensors of at most 4 dims (dim_of <= 4), got {list(spec.sizes)}")
    if spec.storage != "buffer":
        raise ValueError(f"{shader}: int8x4 staging binds a buffer; the tensor is {spec.storage}")


def _add_staging_to_int8x4_buffer_node(graph: ComputeGraph, tensor: Tensor) -> InputStaging:
    """``add_staging_to_int8x4_buffer_node``: int8 NCHW bytes (read as int32 words) packed by
    ``nchw_to_int8x4_buffer``, one thread per word of the padded tensor, re-picked after a resize."""
    spec = tensor.spec
    _int8x4_checks(spec, "nchw_to_int8x4_buffer")
    buffer = staging_buffer(graph, np.zeros(max(tensor.allocated.numel, 4), np.int8), "staging_in")
    entry = InputStaging(graph=graph, tensor=tensor, buffer=buffer, dtype="int8")
    graph.input_stagings[id(tensor)] = entry
    graph.dispatch("nchw_to_int8x4_buffer", global_wg=lambda: (tensor.spec.padded_numel // 4, 1, 1),
                   resources=[tensor, buffer, graph.meta_ubo(tensor)], spec={3: spec.hashed_layout})
    return entry


def _add_int8x4_buffer_to_staging_node(graph: ComputeGraph, tensor: Tensor) -> Readback:
    """``add_int8x4_buffer_to_staging_node``: ``int8x4_buffer_to_nchw``, one thread per word of NCHW bytes."""
    spec = tensor.spec
    _int8x4_checks(spec, "int8x4_buffer_to_nchw")
    words = -(-tensor.allocated.numel // 4)
    out = resources.buffer_tensor(graph.device, np.full(max(words, 4), 0x7FA5A5A5, np.uint32), "staging_out")
    graph.dispatch("int8x4_buffer_to_nchw", global_wg=lambda: (-(-tensor.spec.numel // 4), 1, 1),
                   resources=[out, tensor, graph.meta_ubo(tensor)], spec={3: spec.hashed_layout})
    readback = Readback(graph=graph, buffer=out, tensor=tensor, dtype="int8")
    graph.readbacks[id(tensor)] = readback
    return readback


def write_nchw(graph: ComputeGraph, tensor: Tensor, array: np.ndarray, *, prepack: bool = False,
               transpose_hw: bool = False) -> None:
    """``add_prepack_standard_node`` (constants, ``prepack``: runs now) or an input written at each execute.

    The staging dtype is the data's (a constant's own dtype, half as float without
    float16 buffers), so float32 scales prepacked into a half tensor use ``*_half_float``.
    Called while the graph executes host work (a test's fault injection) it writes at once.
    """
    if not prepack and not graph.executing:
        add_input_staging(graph, tensor, np.asarray(array).dtype.name).copy_in(array)
        return
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
    if spec.storage == "buffer":
        pcs = spec.sizes_block() + spec.strides_block() + spec.numel_block()
    graph.dispatch(shader, global_wg=global_wg(spec), resources=[tensor, src, *ubos],
                   spec={3: spec.hashed_layout, 4: int(transpose_hw)}, immediates=pcs, prepack=prepack)


@dataclasses.dataclass
class Readback:
    """A staging buffer a ``*_to_nchw`` node fills at each execute; ``get`` maps it."""

    graph: ComputeGraph
    buffer: Tensor
    tensor: Tensor
    dtype: str

    def get(self) -> np.ndarray:
        """The tensor in NCHW order at its current sizes, in the staging dtype (8-bit as their own dtype)."""
        return self.decode(resources.read(self.graph.device, self.buffer).view(np.uint8).reshape(-1))

    def decode(self, raw: np.ndarray) -> np.ndarray:
        dtype = np.dtype(self.dtype)
        spec = self.tensor.spec
        return np.frombuffer(raw[: spec.numel * dtype.itemsize].tobytes(), dtype).reshape(spec.sizes).copy()

    @staticmethod
    def get_all(readbacks: Sequence["Readback"]) -> list[np.ndarray]:
        """``get`` of each, read back together (one by one on a tracing device, whose replay judges each read)."""
        if not readbacks:
            return []
        device = readbacks[0].graph.device
        if hasattr(device, "record_dispatch"):
            return [r.get() for r in readbacks]
        raws = resources.read_buffers(device, [r.buffer for r in readbacks])
        return [r.decode(raw) for r, raw in zip(readbacks, raws)]


def read_nchw(graph: ComputeGraph, tensor: Tensor) -> Readback:
    """``add_tensor_to_staging_node``: a node copying the tensor out at each execute (at once during one)."""
    spec = tensor.spec
    if spec.dtype == INT8X4:
        return _add_int8x4_buffer_to_staging_node(graph, tensor)
    staging = staging_dtype(graph, spec.dtype)
    shader = tensor_to_nchw_shader(graph, spec, staging)
    count = tensor.allocated.numel
    words = -(-count * np.dtype(staging).itemsize // 4)
    out = resources.buffer_tensor(graph.device, np.full(max(words, 4), 0x7FA5A5A5, np.uint32), "staging_out")
    if shader.startswith("bitw8_image"):
        wg, ubos, pcs = (-(-count // 4), 1, 1), [], [graph.pc(tensor, "sizes"), graph.pc(tensor, "numel")]
    elif "_coalesced" in shader:
        wg, ubos, pcs = (count, 1, 1), [graph.meta_ubo(tensor)], b""
    else:
        wg, ubos, pcs = (lambda: global_wg(tensor.spec)), [graph.meta_ubo(tensor)], b""
    graph.dispatch(shader, global_wg=wg, resources=[out, tensor, *ubos], spec={3: spec.hashed_layout},
                   immediates=pcs)
    return Readback(graph=graph, buffer=out, tensor=tensor, dtype=staging)


def prepack_standard(graph: ComputeGraph, ref: TensorRef, storage: str = "buffer", layout: str = "width",
                     dtype: str | None = None) -> Tensor:
    """``prepack_standard``: a new tensor (no prepack cache) written from the constant by a prepack node."""
    data = np.asarray(ref.data)
    tensor = graph.add_tensor(data.shape, dtype or data.dtype.name, storage, layout, label=f"prepacked_{ref.id}")
    write_nchw(graph, tensor, data, prepack=True)
    return tensor


def element_index(graph: ComputeGraph, tensor: Tensor) -> np.ndarray:
    """Where each logical element of ``tensor`` sits in its raw storage (``resources.read_raw``), in its shape.

    ET-VK's own staging shader writes 1..numel into an int32 tensor of the same sizes,
    storage and layout; where each value lands is where that element lives (0 is padding).
    Reading a tensor raw through this map keeps vkdiff's poison where the kernel wrote nothing.
    The probe is allocated as the tensor was and resized as it has been (``virtual_resize``):
    below the allocation an element's texel depends on both. Each map is kept by the device's context.
    """
    spec = tensor.spec
    allocated = tensor.allocated or spec
    key = (graph.route, spec.storage, spec.layout, tuple(allocated.sizes), tuple(spec.sizes))
    maps = graph.ctx.layout_maps
    if key not in maps:
        maps[key] = _probe_layout(graph, spec, allocated)
    return maps[key]


def _probe_layout(graph: ComputeGraph, spec: TensorSpec, allocated: TensorSpec) -> np.ndarray:
    """``element_index`` measured: one staging dispatch per (route, placement, sizes) and device."""
    probe = graph.add_tensor(allocated.sizes, "int32", spec.storage, spec.layout, label="layout_probe")
    graph.virtual_resize(probe, spec.sizes)
    write_nchw(graph, probe, np.arange(1, spec.numel + 1, dtype=np.int32).reshape(spec.sizes), prepack=True)
    raw = resources.read_raw(graph.device, probe)
    found = np.full(spec.numel + 1, -1, np.int64)
    valid = (raw >= 1) & (raw <= spec.numel)
    found[raw[valid]] = np.flatnonzero(valid)
    if (found[1:] < 0).any():
        raise ValueError(f"{spec.layout}-packed {spec.storage} {list(spec.sizes)}: the staging shader placed "
                         f"{int((found[1:] >= 0).sum())} of {spec.numel} elements")
    return found[1:].reshape(spec.sizes)


def graph_input(graph: ComputeGraph, array: np.ndarray, storage: str, layout: str, label: str = "input") -> Tensor:
    """A graph input tensor written through the staging shaders."""
    array = np.asarray(array)
    tensor = graph.add_tensor(array.shape, array.dtype.name, storage, layout, label)
    write_nchw(graph, tensor, array)
    return tensor

