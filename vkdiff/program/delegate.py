"""The Vulkan delegate as the runtime sees it, decoded with executorch's own serialization module.

The records (``Delegate``, ``VkOp``, ``VkTensorInfo``) live in the data model
(``vkdiff.datamodel.vkgraph``); this module only fills them.

``VulkanBackend.preprocess`` on a copy of a lowered module's ``original_module``
reproduces the delegate byte for byte (30-byte ``VH00`` header + ``VkGraph``
flatbuffer + constant bytes); constants that carry a ``named_key`` live in the
program's named data store. ``Delegate`` keeps the op chain, every value, and every
constant as a numpy array in the dtype and dims the graph declares.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from vkdiff.datamodel import VK_DTYPES, Delegate, VkOp, VkTensorInfo


def _value_dict(vk_value: Any) -> dict[str, Any]:
    payload = vk_value.value
    out = {"kind": type(payload).__name__}
    if dataclasses.is_dataclass(payload):
        for field in dataclasses.fields(payload):
            item = getattr(payload, field.name)
            out[field.name] = int(item) if hasattr(item, "value") and not isinstance(item, (list, str)) else item
    return out


def decode(processed_bytes: bytes, named_data: Any) -> Delegate:
    """Decode a delegate blob; ``named_data`` is the ``NamedDataStoreOutput`` of the same preprocess."""
    from executorch.backends.vulkan.serialization.vulkan_graph_schema import VkMemoryLayout, VkStorageType
    from executorch.backends.vulkan.serialization.vulkan_graph_serialize import (
        VulkanDelegateHeader, extract_vk_flatbuffer, flatbuffer_to_vk_graph)

    header = VulkanDelegateHeader.from_bytes(processed_bytes[: VulkanDelegateHeader.EXPECTED_LENGTH])
    graph = flatbuffer_to_vk_graph(extract_vk_flatbuffer(processed_bytes))
    blob = processed_bytes[header.bytes_offset : header.bytes_offset + header.bytes_size]
    named = _named_buffers(named_data)
    values = [_value_dict(v) for v in graph.values]
    tensors, constants, keys = {}, {}, {}
    for vid, value in enumerate(graph.values):
        if type(value.value).__name__ != "VkTensor":
            continue
        t = value.value
        info = VkTensorInfo(id=vid, dtype=np.dtype(VK_DTYPES[int(t.datatype)]).name, dims=list(t.dims),
                            constant_id=int(t.constant_id), storage=VkStorageType(int(t.storage_type)).name,
                            layout=VkMemoryLayout(int(t.memory_layout)).name)
        tensors[vid] = info
        if info.constant_id >= 0:
            ref = graph.constants[info.constant_id]
            raw = named[ref.named_key] if ref.named_key else blob[ref.offset : ref.offset + ref.length]
            keys[vid] = ref.named_key or f"inline:{ref.offset}"
            constants[vid] = _as_array(raw, info)
    ops = [VkOp(index=i, name=op.name, args=list(op.args)) for i, op in enumerate(graph.chain)]
    return Delegate(ops=ops, values=values, tensors=tensors, constants=constants, constant_keys=keys,
                    input_ids=list(graph.input_ids), output_ids=list(graph.output_ids),
                    blob_size=len(processed_bytes))


def _named_buffers(named_data: Any) -> dict[str, bytes]:
    if named_data is None:
        return {}
    return {key: bytes(named_data.buffers[entry.buffer_index].buffer) if hasattr(
        named_data.buffers[entry.buffer_index], "buffer") else bytes(named_data.buffers[entry.buffer_index])
        for key, entry in named_data.pte_data.items()}


def _as_array(raw: bytes, info: VkTensorInfo) -> np.ndarray:
    dtype = np.dtype(info.dtype)
    count = int(np.prod(info.dims)) if info.dims else 1
    data = np.frombuffer(raw, dtype=dtype, count=min(count, len(raw) // dtype.itemsize))
    return data.reshape(info.dims) if data.size == count else data.copy()
