"""A Vulkan delegate blob as the runtime sees it: the ``VkGraph`` flatbuffer read by its schema, constants resolved.

The records (``Delegate``, ``VkOp``, ``VkTensorInfo``) live in the data model
(``vkdiff.datamodel.vkgraph``); this module only fills them.

A blob is the 30-byte ``VH00`` header (``VulkanDelegateHeader``: flatbuffer and constant
offsets), the ``VkGraph`` flatbuffer, then the constant bytes. Constants whose ``VkBytes``
carry a ``named_key`` live in the program's named data store (keyed by sha256). The
flatbuffer is read directly (``vkdiff.program.flatbuffers``) with ``schema.fbs`` as
executorch ships it, never through flatc's JSON, which cannot carry a ``-inf`` scalar.
"""

from __future__ import annotations

import struct
from typing import Any, Mapping

import numpy as np

from vkdiff.datamodel import MEMORY_LAYOUTS, STORAGE_TYPES, VK_DTYPES, Delegate, VkOp, VkTensorInfo
from vkdiff.program import schema_files
from vkdiff.program.flatbuffers import FlatbufferError, Schema, read

HEADER_MAGIC = b"VH00"
HEADER_LENGTH = 30
"""``VulkanDelegateHeader``: 4 bytes padding, ``VH00``, u16 header size, u32 flatbuffer offset and size, u32
constant bytes offset, u64 constant bytes size (little endian)."""

UNSET_DTYPE = 127


class DelegateDecodeError(ValueError):
    """A delegate blob cannot be read (not ``VH00``, truncated, or a flatbuffer the schema does not describe)."""


def vk_schema() -> Schema:
    """The ``VkGraph`` schema: ``schema.fbs`` of the user's tree, of saved artifacts, or of executorch.

    Raises:
        DelegateDecodeError: no schema root holds it.
    """
    try:
        return schema_files.load(schema_files.VK_GRAPH)
    except schema_files.SchemaMissingError as exc:
        raise DelegateDecodeError(str(exc)) from None


def split_blob(blob: bytes) -> tuple[bytes, bytes]:
    """(flatbuffer, constant bytes) of a delegate blob.

    Raises:
        DelegateDecodeError: no ``VH00`` header, or offsets past the end of the blob.
    """
    if len(blob) < HEADER_LENGTH or blob[4:8] != HEADER_MAGIC:
        raise DelegateDecodeError(f"not a Vulkan delegate: no {HEADER_MAGIC.decode()} header in its first "
                                  f"{HEADER_LENGTH} bytes")
    size, fb_offset, fb_size, bytes_offset, bytes_size = struct.unpack_from("<HIIIQ", blob, 8)
    if size != HEADER_LENGTH:
        raise DelegateDecodeError(f"Vulkan delegate header says {size} bytes, expected {HEADER_LENGTH}")
    if fb_offset + fb_size > len(blob) or bytes_offset + bytes_size > len(blob):
        raise DelegateDecodeError(f"Vulkan delegate truncated: header promises {bytes_offset + bytes_size} bytes, "
                                  f"the blob has {len(blob)}")
    return blob[fb_offset:fb_offset + fb_size], blob[bytes_offset:bytes_offset + bytes_size]


def decode(processed_bytes: bytes, named_data: Mapping[str, bytes] | Any = None) -> Delegate:
    """Decode a delegate blob; ``named_data`` maps named-data keys to bytes (or is a ``NamedDataStoreOutput``).

    Raises:
        DelegateDecodeError: the blob or its flatbuffer cannot be read, or a constant is missing.
    """
    flatbuffer, blob = split_blob(bytes(processed_bytes))
    try:
        graph = read(flatbuffer, vk_schema())
    except (FlatbufferError, IndexError, KeyError) as exc:
        raise DelegateDecodeError(f"VkGraph flatbuffer: {exc}") from None
    named = named_buffers(named_data)
    values = [_value_dict(v) for v in graph["values"]]
    tensors, constants, keys = {}, {}, {}
    for vid, value in enumerate(values):
        if value["kind"] != "VkTensor":
            continue
        info = _tensor_info(vid, value)
        tensors[vid] = info
        if info.constant_id >= 0:
            constants[vid], keys[vid] = _constant(graph["constants"], info, blob, named)
    ops = [VkOp(index=i, name=op["name"], args=[int(a) for a in op["args"]], node_id=int(op["node_id"]))
           for i, op in enumerate(graph["chain"])]
    return Delegate(ops=ops, values=values, tensors=tensors, constants=constants, constant_keys=keys,
                    input_ids=[int(i) for i in graph["input_ids"]], output_ids=[int(i) for i in graph["output_ids"]],
                    blob_size=len(processed_bytes))


def _value_dict(value: dict[str, Any]) -> dict[str, Any]:
    """A ``VkValue`` as ``{"kind": <union member>, ...its fields}`` (lists as Python lists)."""
    payload = value.get("value") or {}
    out: dict[str, Any] = {"kind": value.get("value_type") or "Null"}
    for name, item in payload.items():
        out[name] = item.tolist() if isinstance(item, np.ndarray) else item
    return out


def _tensor_info(vid: int, value: dict[str, Any]) -> VkTensorInfo:
    datatype = int(value["datatype"])
    staging = int(value.get("staging_datatype", UNSET_DTYPE))
    if datatype not in VK_DTYPES:
        raise DelegateDecodeError(f"value %{vid}: unknown VkDataType {datatype}")
    return VkTensorInfo(id=vid, dtype=np.dtype(VK_DTYPES[datatype]).name, dims=[int(d) for d in value["dims"]],
                        constant_id=int(value["constant_id"]),
                        storage=STORAGE_TYPES.get(int(value["storage_type"]), "DEFAULT_STORAGE"),
                        layout=MEMORY_LAYOUTS.get(int(value["memory_layout"]), "DEFAULT_LAYOUT"),
                        mem_obj_id=int(value.get("mem_obj_id", -1)),
                        staging_dtype=np.dtype(VK_DTYPES[staging]).name if staging in VK_DTYPES else None)


def _constant(refs: list[dict[str, Any]], info: VkTensorInfo, blob: bytes,
              named: Mapping[str, bytes]) -> tuple[np.ndarray, str]:
    if info.constant_id >= len(refs):
        raise DelegateDecodeError(f"value %{info.id}: constant {info.constant_id} of {len(refs)}")
    ref = refs[info.constant_id]
    key = ref.get("named_key") or ""
    if key:
        if key not in named:
            raise DelegateDecodeError(f"value %{info.id}: named data {key[:16]}… is not in the program")
        raw = named[key]
    else:
        raw = blob[int(ref["offset"]): int(ref["offset"]) + int(ref["length"])]
    return _as_array(raw, info), key or f"inline:{int(ref['offset'])}"


def named_buffers(named_data: Mapping[str, bytes] | Any) -> Mapping[str, bytes]:
    """Named data as ``key → bytes``, from a mapping or executorch's ``NamedDataStoreOutput``."""
    if named_data is None:
        return {}
    if isinstance(named_data, Mapping):
        return named_data
    out = {}
    for key, entry in named_data.pte_data.items():
        buffer = named_data.buffers[entry.buffer_index]
        out[key] = bytes(getattr(buffer, "buffer", buffer))
    return out


def _as_array(raw: bytes, info: VkTensorInfo) -> np.ndarray:
    dtype = np.dtype(info.dtype)
    count = int(np.prod(info.dims)) if info.dims else 1
    data = np.frombuffer(raw, dtype=dtype, count=min(count, len(raw) // dtype.itemsize))
    return data.reshape(info.dims) if data.size == count else data.copy()
