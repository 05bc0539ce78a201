"""Read a flatbuffer directly, driven by its ``.fbs`` schema: every scalar as stored, non-finite doubles included.

ExecuTorch's ``flatbuffer_to_vk_graph`` goes through ``flatc --json``, which writes a
``-inf`` attention-mask scalar as the bare token ``-inf`` that Python's ``json`` cannot
read. This reader walks the binary instead (tables through their vtables, unions as the
``<name>_type`` byte plus the member table, vectors of scalars as numpy arrays), using
the schema text the program was written with, so a field added in a newer tree is read
by name, and a field a blob lacks takes its schema default.

"""

from __future__ import annotations

import dataclasses
import re
import struct
from typing import Any

import numpy as np

SCALARS: dict[str, str] = {
    "bool": "?", "byte": "b", "ubyte": "B", "short": "h", "ushort": "H", "int": "i", "uint": "I", "long": "q",
    "ulong": "Q", "float": "f", "double": "d", "int8": "b", "uint8": "B", "int16": "h", "uint16": "H",
    "int32": "i", "uint32": "I", "int64": "q", "uint64": "Q", "float32": "f", "float64": "d",
}
"""flatbuffers scalar type → ``struct`` format (little endian)."""


class FlatbufferError(ValueError):
    """The bytes are not a flatbuffer of the schema (truncated, offsets out of range, wrong identifier)."""


@dataclasses.dataclass(frozen=True)
class Field:
    name: str
    type: str
    """Scalar, enum, table, union or ``string``; vectors as ``[T]``."""
    default: Any
    slot: int
    """vtable slot (a union takes two: its ``_type`` byte at ``slot - 1``)."""


@dataclasses.dataclass
class Schema:
    """The parts of a ``.fbs`` file a reader needs."""

    tables: dict[str, list[Field]]
    enums: dict[str, tuple[str, dict[int, str]]]
    """Enum name → (underlying scalar type, value → member name)."""
    unions: dict[str, list[str]]
    """Union name → member tables (index 0 is ``NONE``)."""
    root: str
    identifier: str | None


_COMMENT = re.compile(r"//[^\n]*")
_BLOCK = re.compile(r"\b(table|struct|enum|union)\s+(\w+)\s*(?::\s*(\w+))?\s*(\([^)]*\))?\s*\{([^}]*)\}", re.S)


def parse_schema(text: str) -> Schema:
    """Tables, enums, unions, ``root_type`` and ``file_identifier`` of a ``.fbs`` text (attributes ignored).

    Raises:
        FlatbufferError: the schema declares a struct (not used by the schemas vkdiff reads) or has no root type.
    """
    text = _COMMENT.sub("", text)
    tables, enums, unions = {}, {}, {}
    for kind, name, base, _, body in _BLOCK.findall(text):
        if kind == "struct":
            raise FlatbufferError(f"struct {name}: structs are not supported by vkdiff's flatbuffer reader")
        if kind == "enum":
            enums[name] = (base or "int", _enum_members(body))
        elif kind == "union":
            unions[name] = ["NONE"] + [m.strip().split(":")[0].strip() for m in body.split(",") if m.strip()]
        else:
            tables[name] = []
    for kind, name, base, _, body in _BLOCK.findall(text):
        if kind == "table":
            tables[name] = _table_fields(body, enums, unions)
    root = re.search(r"root_type\s+(\w+)\s*;", text)
    if root is None:
        raise FlatbufferError("schema has no root_type")
    ident = re.search(r'file_identifier\s+"([^"]*)"\s*;', text)
    return Schema(tables=tables, enums=enums, unions=unions, root=root.group(1), identifier=ident and ident.group(1))


def _enum_members(body: str) -> dict[int, str]:
    members, value = {}, 0
    for item in (m.strip() for m in body.split(",")):
        if not item:
            continue
        name, _, given = item.partition("=")
        value = int(given.strip(), 0) if given.strip() else value
        members[value] = name.strip()
        value += 1
    return members


def _table_fields(body: str, enums: dict, unions: dict) -> list[Field]:
    fields, slot = [], 0
    for decl in (d.strip() for d in body.split(";")):
        if not decl:
            continue
        decl = re.sub(r"\([^)]*\)", "", decl)
        name, _, rest = decl.partition(":")
        ftype, _, default = rest.partition("=")
        ftype, default = ftype.strip(), default.strip()
        if ftype in unions:
            slot += 1
        fields.append(Field(name=name.strip(), type=ftype, default=_default(ftype, default, enums), slot=slot))
        slot += 1
    return fields


def _default(ftype: str, text: str, enums: dict) -> Any:
    if ftype in enums:
        members = {v: k for k, v in enums[ftype][1].items()}
        return (members[text] if text in members else int(text, 0)) if text else 0
    if ftype in SCALARS:
        if not text:
            return False if ftype == "bool" else 0
        if ftype == "bool":
            return text == "true"
        return float(text) if SCALARS[ftype] in "fd" else int(text, 0)
    return None


class _Reader:
    def __init__(self, buf: bytes, schema: Schema):
        self.buf, self.schema = memoryview(buf), schema

    def _unpack(self, fmt: str, pos: int) -> Any:
        if pos < 0 or pos + struct.calcsize(fmt) > len(self.buf):
            raise FlatbufferError(f"offset {pos} is outside the {len(self.buf)}-byte buffer (truncated?)")
        return struct.unpack_from("<" + fmt, self.buf, pos)[0]

    def table(self, name: str, pos: int) -> dict[str, Any]:
        vtable = pos - self._unpack("i", pos)
        vsize = self._unpack("H", vtable)
        out: dict[str, Any] = {}
        for field in self.schema.tables[name]:
            entry = 4 + 2 * field.slot
            offset = self._unpack("H", vtable + entry) if entry < vsize else 0
            if field.type in self.schema.unions:
                kind_entry = entry - 2
                kind_offset = self._unpack("H", vtable + kind_entry) if kind_entry < vsize else 0
                kind = self._unpack("B", pos + kind_offset) if kind_offset else 0
                member = self.schema.unions[field.type][kind]
                out[field.name + "_type"] = member
                out[field.name] = self.table(member, self._deref(pos + offset)) if offset and kind else None
            else:
                out[field.name] = self.value(field.type, pos + offset) if offset else field.default
        return out

    def _deref(self, pos: int) -> int:
        return pos + self._unpack("I", pos)

    def value(self, ftype: str, pos: int) -> Any:
        if ftype in SCALARS:
            return self._unpack(SCALARS[ftype], pos)
        if ftype in self.schema.enums:
            return self._unpack(SCALARS[self.schema.enums[ftype][0]], pos)
        target = self._deref(pos)
        if ftype == "string":
            size = self._unpack("I", target)
            return bytes(self.buf[target + 4: target + 4 + size]).decode("utf-8", errors="replace")
        if ftype.startswith("["):
            return self.vector(ftype[1:-1].strip(), target)
        if ftype in self.schema.tables:
            return self.table(ftype, target)
        raise FlatbufferError(f"unknown type {ftype!r} in schema")

    def vector(self, item: str, pos: int) -> Any:
        size = self._unpack("I", pos)
        start = pos + 4
        scalar = SCALARS.get(item) or (SCALARS[self.schema.enums[item][0]] if item in self.schema.enums else None)
        if scalar is not None:
            width = struct.calcsize(scalar)
            if start + size * width > len(self.buf):
                raise FlatbufferError(f"vector of {size} {item} at {pos} runs past the buffer (truncated?)")
            return np.frombuffer(self.buf, dtype=np.dtype(scalar).newbyteorder("<"), count=size, offset=start).copy()
        return [self.value(item, start + 4 * i) for i in range(size)]


def read(buf: bytes, schema: Schema, *, check_identifier: bool = True) -> dict[str, Any]:
    """The root table of ``buf`` as nested dicts (vectors of scalars as numpy arrays, unions with ``_type``).

    Raises:
        FlatbufferError: wrong file identifier, or an offset outside the buffer.
    """
    if check_identifier and schema.identifier and bytes(buf[4:8]) != schema.identifier.encode():
        raise FlatbufferError(f"file identifier {bytes(buf[4:8])!r} is not {schema.identifier!r}")
    reader = _Reader(buf, schema)
    return reader.table(schema.root, reader._deref(0))
