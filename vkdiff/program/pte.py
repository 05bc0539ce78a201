"""A ``.pte`` file as a ``Program``, read without executorch: every method, every Vulkan delegate decoded.

The ``Program`` flatbuffer is read by vkdiff's own reader (``vkdiff.program.flatbuffers``)
with ``schema/program.fbs`` from the user's tree (``schema_files``). Segments are put back
as ExecuTorch's ``deserialize_pte_binary`` does (``_restore_segments``): the extended
header (``eh00``) says where the flatbuffer ends and the segments begin; delegate blobs,
the constant segment's sub-buffers and named data are cut from them. Each execution
plan becomes a ``Method``: its values, its chain's instructions (kernel calls with their
operator name, delegate calls, moves, jumps, frees) with the chain's stack traces, its
constant tensors, and its delegates; Vulkan delegates are decoded into ``VkGraph``
records with the constants of the program's named data.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

import numpy as np

from vkdiff.datamodel.budget import BudgetError
from vkdiff.datamodel.text import one_line
from vkdiff.datamodel.program import (SCALAR_TYPES, VULKAN_BACKEND, DelegateEntry, Instruction, Method, Program,
                                      ProgramFormatError)
from vkdiff.datamodel.wellformed import check_program
from vkdiff.program import schema_files
from vkdiff.program.delegate import DelegateDecodeError, decode
from vkdiff.program.flatbuffers import FlatbufferError, read

MALFORMED = (AttributeError, IndexError, KeyError, TypeError, ValueError, OverflowError, struct.error,
             UnicodeDecodeError)
"""What walking a flatbuffer of crafted bytes raises (a table that is None, an offset or index past the end, a
field of the wrong type): all mean the program is malformed."""
EXTENDED_HEADER = b"eh00"
INLINE, SEGMENT = 0, 1
"""``DataLocation`` of a delegate's processed bytes."""
EXTERNAL = 1
"""``TensorDataLocation.EXTERNAL``: a constant in named data."""


class ProgramLoadError(ValueError):
    """The bytes are not a loadable ExecuTorch program (one line naming the file and the problem)."""


def load_pte(data: bytes, name: str = "program.pte") -> Program:
    """Decode a serialized program and check every field the executors index by (``check_program``).

    Raises:
        ProgramLoadError: not an ExecuTorch program, truncated, no program schema, a Vulkan delegate that cannot
            be read, a field out of range, or tensors over the host memory budget.
    """
    if len(data) < 8 or data[4:6] != b"ET":
        raise ProgramLoadError(f"{name}: not an ExecuTorch program (no ET file identifier in its first 8 bytes)")
    try:
        schema = schema_files.load(schema_files.PROGRAM)
    except schema_files.SchemaMissingError as exc:
        raise ProgramLoadError(f"{name}: {exc}") from None
    try:
        size, base = _extent(data)
        root = read(bytes(data[:size]), schema, check_identifier=False)
        blobs = Blobs(root, bytes(data[base:]) if base else b"")
    except (FlatbufferError, *MALFORMED) as exc:
        raise ProgramLoadError(f"{name}: not a readable ExecuTorch program ({type(exc).__name__}: "
                               f"{one_line(exc, 160)}); is it truncated?") from None
    methods = {}
    for index, plan in enumerate(root["execution_plan"] or []):
        where = f"method {one_line(repr(plan['name']), 60)}" if plan["name"] else f"execution plan {index}"
        try:
            methods[str(plan["name"])] = _method(plan, blobs)
        except DelegateDecodeError as exc:
            raise ProgramLoadError(f"{name}: {where}: {exc}") from None
        except (FlatbufferError, *MALFORMED) as exc:
            raise ProgramLoadError(f"{name}: {where}: malformed ({type(exc).__name__}: "
                                   f"{one_line(exc, 120)})") from None
    program = Program(name=name, sha256=hashlib.sha256(data).hexdigest(), methods=methods)
    try:
        check_program(program)
    except (ProgramFormatError, BudgetError) as exc:
        raise ProgramLoadError(f"{name}: {exc}") from None
    return program


def _extent(data: bytes) -> tuple[int, int]:
    """(flatbuffer size, segment base offset) from the extended header; a program without one is all flatbuffer."""
    if len(data) >= 32 and data[8:12] == EXTENDED_HEADER and struct.unpack_from("<I", data, 12)[0] >= 24:
        size, base = struct.unpack_from("<QQ", data, 16)
        if size > len(data) or base > len(data):
            raise ValueError(f"the extended header promises {max(size, base)} bytes, the file has {len(data)}")
        return size, base
    return len(data), 0


class Blobs:
    """The bytes a program keeps outside its tables: delegate data, constant buffers, named data."""

    def __init__(self, root: dict[str, Any], segment_data: bytes):
        self.root, self.segments = root, []
        for i, seg in enumerate(root["segments"] or []):
            if seg["offset"] + seg["size"] > len(segment_data):
                raise ValueError(f"segment {i} ends at {seg['offset'] + seg['size']}, past the "
                                 f"{len(segment_data)} bytes of segment data")
            self.segments.append(segment_data[seg["offset"]:seg["offset"] + seg["size"]])
        self.named = {entry["key"]: self.segments[entry["segment_index"]] for entry in root["named_data"] or []}
        self.constants = self._constant_buffers()

    def _constant_buffers(self) -> list[bytes]:
        table = self.root["constant_segment"]
        offsets = [int(o) for o in table["offsets"]] if table and table["offsets"] is not None else []
        if not offsets:
            return [bytes(b["storage"]) if b["storage"] is not None else b"" for b in self.root["constant_buffer"] or []]
        segment = self.segments[table["segment_index"]]
        return [segment[start:end] for start, end in zip(offsets, offsets[1:] + [len(segment)])]

    def delegate(self, processed: dict[str, Any]) -> bytes:
        if processed["location"] == SEGMENT:
            return self.segments[processed["index"]]
        return bytes(self.root["backend_delegate_data"][processed["index"]]["data"])


def _method(plan: dict[str, Any], blobs: Blobs) -> Method:
    operators = [f"{op['name']}.{op['overload']}" if op["overload"] else op["name"] for op in plan["operators"] or []]
    values = [_value(v["val_type"], v["val"]) for v in plan["values"] or []]
    constants = {vid: _constant(v["val"], blobs) for vid, v in enumerate(plan["values"] or [])
                 if v["val_type"] == "Tensor" and _is_constant(v["val"])}
    chain = (plan["chains"] or [None])[0]
    instructions = []
    traces = (chain["stacktrace"] or []) if chain else []
    for index, ins in enumerate((chain["instructions"] or []) if chain else []):
        frames = []
        if index < len(traces) and traces[index] is not None:
            frames = [{"filename": f["filename"] or "", "lineno": f["lineno"] or 0, "name": f["name"] or "",
                       "context": f["context"] or ""} for f in traces[index]["items"] or []]
        instructions.append(_instruction(ins["instr_args_type"], ins["instr_args"], operators, frames))
    delegates = [_delegate(i, d, blobs) for i, d in enumerate(plan["delegates"] or [])]
    return Method(name=plan["name"], values=values, inputs=_ints(plan["inputs"]), outputs=_ints(plan["outputs"]),
                  instructions=instructions, delegates=delegates, constants=constants)


def _ints(items: Any) -> list[int]:
    return [] if items is None else [int(i) for i in items]


def _instruction(kind: str, args: dict[str, Any], operators: list[str], frames: list[dict[str, Any]]) -> Instruction:
    if kind == "KernelCall":
        return Instruction(kind="kernel", op=operators[args["op_index"]], args=_ints(args["args"]), frames=frames)
    if kind == "DelegateCall":
        return Instruction(kind="delegate", delegate=int(args["delegate_index"]), args=_ints(args["args"]),
                           frames=frames)
    if kind == "MoveCall":
        return Instruction(kind="move", args=[int(args["move_from"]), int(args["move_to"])])
    if kind == "JumpFalseCall":
        return Instruction(kind="jump_false", args=[int(args["cond_value_index"]),
                                                    int(args["destination_instruction"])])
    if kind == "FreeCall":
        return Instruction(kind="free", args=[int(args["value_index"])])
    raise ValueError(f"instruction of unknown kind {kind!r}")


def _value(kind: str, val: dict[str, Any] | None) -> dict[str, Any]:
    if kind == "Tensor":
        return {"kind": "Tensor", "dtype": SCALAR_TYPES.get(int(val["scalar_type"]),
                                                            f"scalar_type_{int(val['scalar_type'])}"),
                "sizes": _ints(val["sizes"]), "dim_order": _ints(val["dim_order"]),
                "dynamism": int(val["shape_dynamism"]), "constant": _is_constant(val),
                "mutable": val["allocation_info"] is not None and val["data_buffer_idx"] > 0}
    if kind in ("Int", "Bool", "String"):
        raw = val[f"{kind.lower()}_val"]
        return {"kind": kind, "value": bool(raw) if kind == "Bool" else int(raw) if kind == "Int" else raw}
    if kind == "Double":
        return {"kind": kind, "value": float(val["double_val"])}
    if kind in ("IntList", "TensorList", "OptionalTensorList"):
        return {"kind": kind, "items": _ints(val["items"])}
    if kind == "DoubleList":
        return {"kind": kind, "items": [float(i) for i in val["items"]] if val["items"] is not None else []}
    if kind == "BoolList":
        return {"kind": kind, "items": [bool(i) for i in val["items"]] if val["items"] is not None else []}
    return {"kind": "Null"}


def _is_constant(tensor: dict[str, Any]) -> bool:
    info = tensor["extra_tensor_info"]
    external = info is not None and int(info["location"]) == EXTERNAL
    return tensor["allocation_info"] is None and (tensor["data_buffer_idx"] > 0 or external)


def _constant(tensor: dict[str, Any], blobs: Blobs) -> np.ndarray:
    """A constant's bytes as an NCHW-contiguous array (stored in its dim order)."""
    dtype_name = SCALAR_TYPES.get(int(tensor["scalar_type"]))
    if dtype_name is None:
        raise ProgramLoadError(f"constant of ScalarType {int(tensor['scalar_type'])} is not supported")
    info = tensor["extra_tensor_info"]
    if info is not None and int(info["location"]) == EXTERNAL:
        if info["fully_qualified_name"] not in blobs.named:
            raise ProgramLoadError(f"constant {info['fully_qualified_name']!r} lives in an external .ptd file, which "
                                   f"vkdiff does not read")
        raw = blobs.named[info["fully_qualified_name"]]
    else:
        raw = blobs.constants[tensor["data_buffer_idx"]]
    sizes, order = _ints(tensor["sizes"]), _ints(tensor["dim_order"])
    stored = [sizes[d] for d in order] if order else sizes
    count = int(np.prod(stored)) if stored else 1
    if dtype_name == "bfloat16":
        bits = np.frombuffer(raw, np.uint16, count=count).astype(np.uint32) << 16
        array = bits.view(np.float32)
    else:
        array = np.frombuffer(raw, np.dtype(dtype_name), count=count)
    array = array.reshape(stored)
    if order and order != sorted(order):
        array = np.transpose(array, np.argsort(order))
    return np.ascontiguousarray(array)


def _delegate(index: int, delegate: dict[str, Any], blobs: Blobs) -> DelegateEntry:
    blob = blobs.delegate(delegate["processed"])
    specs = {spec["key"]: bytes(spec["value"]).hex() for spec in delegate["compile_specs"] or []}
    graph = decode(blob, blobs.named) if delegate["id"] == VULKAN_BACKEND else None
    return DelegateEntry(index=index, backend=delegate["id"], compile_specs=specs, graph=graph, blob_size=len(blob),
                         sha256=hashlib.sha256(blob).hexdigest())
