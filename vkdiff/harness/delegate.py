"""The Vulkan delegate as the runtime sees it, decoded with executorch's own serialization module.

``VulkanBackend.preprocess`` on a copy of a lowered module's ``original_module``
reproduces the delegate byte for byte (30-byte ``VH00`` header + ``VkGraph``
flatbuffer + constant bytes); constants that carry a ``named_key`` live in the
program's named data store. ``Delegate`` keeps the op chain, every value, and every
constant as a numpy array in the dtype and dims the graph declares.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from typing import Any

import numpy as np

VK_DTYPES = {0: np.bool_, 1: np.uint8, 2: np.int8, 3: np.int32, 4: np.float16, 5: np.float32, 6: np.float64,
             7: np.int64}
"""``VkDataType`` → numpy dtype."""


@dataclasses.dataclass(kw_only=True)
class VkTensorInfo:
    """One tensor value of the graph."""

    id: int
    """Value id."""
    dtype: str
    """numpy dtype name."""
    dims: list[int]
    """Sizes in PyTorch (NCHW) order."""
    constant_id: int
    """Index into the graph's constants, -1 for activations."""
    storage: str
    """``VkStorageType`` name (``DEFAULT_STORAGE`` when the pass left it to the runtime)."""
    layout: str
    """``VkMemoryLayout`` name."""


@dataclasses.dataclass(kw_only=True)
class VkOp:
    """One operator call of the chain."""

    index: int
    """Position in the chain."""
    name: str
    """Operator, e.g. ``et_vk.linear_q4gsw.default``."""
    args: list[int]
    """Value ids in schema order (outputs last)."""


@dataclasses.dataclass(kw_only=True)
class Delegate:
    """A decoded Vulkan delegate: op chain, values, constants."""

    ops: list[VkOp]
    values: list[dict[str, Any]]
    """Every value as ``{"kind": "Tensor"|"Int"|..., ...fields}``."""
    tensors: dict[int, VkTensorInfo]
    constants: dict[int, np.ndarray]
    """Constant tensors by value id, in their declared dtype and dims."""
    constant_keys: dict[int, str]
    """Named-data key (sha256 of the bytes) or ``"inline:<offset>"`` by value id."""
    input_ids: list[int]
    output_ids: list[int]
    blob_size: int
    """Bytes of the delegate blob (constants in the named data store not included)."""

    def ops_named(self, name: str) -> list[VkOp]:
        """Ops whose name starts with ``name`` (``et_vk.linear_q4gsw`` matches ``.default``)."""
        return [op for op in self.ops if op.name == name or op.name.startswith(name + ".")]

    def op_counts(self) -> Counter:
        return Counter(op.name for op in self.ops)

    def value(self, vid: int) -> Any:
        """Scalar payload of a non-tensor value (Int, Double, Bool, String, lists), None for Null."""
        value = self.values[vid]
        for field in ("int_val", "double_val", "bool_val", "string_val", "items", "value"):
            if field in value:
                return value[field]
        return None


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


def content_hash(array: np.ndarray) -> str:
    """Identity of a constant's bytes (two repacks of one tied weight hash equal)."""
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()[:16]
