"""The Vulkan delegate as records: values, tensors, constants and the operator chain of a ``VkGraph``.

``vkdiff.program.delegate.decode`` fills these from a delegate blob with executorch's own
serialization module; everything that reads a delegate (the reference interpreter,
fusion rules, the graph runtime) reads these records, and operator arguments by name
through ``Delegate.bind``.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from typing import Any

import numpy as np

from vkdiff.datamodel.schemas import OpSchema, schema_of

VK_DTYPES = {0: np.bool_, 1: np.uint8, 2: np.int8, 3: np.int32, 4: np.float16, 5: np.float32, 6: np.float64,
             7: np.int64}
"""``VkDataType`` → numpy dtype."""

STORAGE_TYPES = {0: "BUFFER", 1: "TEXTURE_3D", 2: "TEXTURE_2D", 255: "DEFAULT_STORAGE"}
MEMORY_LAYOUTS = {0: "TENSOR_WIDTH_PACKED", 1: "TENSOR_HEIGHT_PACKED", 2: "TENSOR_CHANNELS_PACKED",
                  3: "PACKED_INT8_4W4C", 4: "PACKED_INT8_4H4W", 5: "PACKED_INT8_4W", 6: "PACKED_INT8_4C",
                  8: "PACKED_INT8_4C1W", 9: "PACKED_INT8_CONV2D", 255: "DEFAULT_LAYOUT"}
"""``VkStorageType`` / ``VkMemoryLayout`` members of ``schema.fbs`` (names as the graph runtime port reads them)."""


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
    mem_obj_id: int = -1
    """Shared memory object the tensor aliases (``add_tensor``'s ``shared_object_idx``), -1 for its own memory."""
    staging_dtype: str | None = None
    """numpy dtype name of the staging buffer when it differs from ``dtype`` (``force_fp16``); None: unset."""


@dataclasses.dataclass(kw_only=True)
class VkOp:
    """One operator call of the chain."""

    index: int
    """Position in the chain."""
    name: str
    """Operator, e.g. ``et_vk.linear_q4gsw.default``."""
    args: list[int]
    """Value ids in schema order (outputs last)."""
    node_id: int = 0
    """``OperatorCall.node_id``: the delegate debug identifier its debug-handle map resolves."""


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

    def bind(self, op: VkOp) -> "Call":
        """``op``'s arguments by schema name (see ``vkdiff.datamodel.schemas``).

        Raises:
            UnknownOpError: the op has no schema.
            SchemaError: the call does not carry one value per schema argument plus one output.
        """
        schema = schema_of(op.name)
        args = schema.bind(op.args[:-1])
        out = op.args[-1]
        items = self.values[out].get("items") if self.values[out].get("kind") == "ValueList" else None
        return Call(op=op, schema=schema, args=args, out=out, outputs=tuple(items) if items is not None else (out,))

    def value(self, vid: int) -> Any:
        """Scalar payload of a non-tensor value (Int, Double, Bool, String, lists), None for Null."""
        value = self.values[vid]
        for field in ("int_val", "double_val", "bool_val", "string_val", "items", "value"):
            if field in value:
                return value[field]
        return None


@dataclasses.dataclass(kw_only=True, frozen=True)
class Call:
    """One operator call bound to its schema: argument value ids by name, and the outputs."""

    op: VkOp
    """The call as serialized."""
    schema: OpSchema
    """Its operator's schema."""
    args: dict[str, int]
    """Value id of every schema argument, by name."""
    out: int
    """The serialized output value (a ``ValueList`` for tuple returns)."""
    outputs: tuple[int, ...]
    """Output value ids, the ``ValueList`` expanded."""


def content_hash(array: np.ndarray) -> str:
    """Identity of a constant's bytes (two repacks of one tied weight hash equal)."""
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()[:16]
