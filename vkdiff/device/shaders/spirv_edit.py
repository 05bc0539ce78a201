"""A SPIR-V module opened for word-level edits: instructions replaced or followed by others, results renamed, and the
types, constants and capabilities the new instructions need added once each (the strict profile's rules use it)."""

from __future__ import annotations

import struct

import numpy as np

from vkdiff.device.shaders.spirv import OP_CAPABILITY, OP_CONSTANT, OP_DECORATE, OP_TYPE_BOOL, OP_TYPE_FLOAT
from vkdiff.device.shaders.spirv import OP_TYPE_VECTOR
from vkdiff.device.shaders.spirv import SpirvError, instructions, words_of

__all__ = ["Edit", "inst"]

OP_EXT_INST_IMPORT, OP_EXT_INST, OP_MEMORY_MODEL, OP_FUNCTION, OP_FUNCTION_END = 11, 12, 14, 54, 56
OP_CONSTANT_COMPOSITE = 44
CAPABILITY = {16: 9, 64: 10}
"""``OpCapability`` Float16 and Float64, by the width of the float type that needs it."""
INT_CAPABILITY = {16: 22, 64: 11}
"""``OpCapability`` Int16 and Int64, by the width of the integer type that needs it."""
OP_TYPE_INT = 21
OP_TYPE_FIRST, OP_TYPE_LAST = 19, 39
"""``OpTypeVoid`` … ``OpTypeForwardPointer``: instructions that declare a type."""


def inst(op: int, *operands: int) -> list[int]:
    """The words of one instruction."""
    return [((len(operands) + 1) << 16) | op, *operands]


SMALLEST_NORMAL = {32: 2.0 ** -126, 16: 2.0 ** -14}


def float_value(bits: int, width: int) -> float:
    if width == 16:
        return float(np.uint16(bits).view(np.float16))
    return float(np.uint32(bits).view(np.float32)) if width == 32 else 0.0


def float_bits(value: float, width: int) -> int:
    """The bits of ``value`` as a float of ``width`` (16 or 32)."""
    if width == 16:
        return int(np.float16(value).view(np.uint16))
    return struct.unpack("<I", struct.pack("<f", value))[0]


class Edit:
    """One module being edited. ``insts`` holds ``(offset, opcode, operands)``; rules fill ``replaced`` (offset →
    words in place of that instruction) and ``after`` (offset → words following it); ``build`` writes the module."""

    def __init__(self, spv: bytes):
        self.words = words_of(spv)
        self.bound = int(self.words[3])
        self.insts = [(at, op, [int(v) for v in ops]) for at, op, ops in instructions(self.words)]
        self.floats = {ops[0]: ops[1] for _, op, ops in self.insts if op == OP_TYPE_FLOAT}
        self.vectors = {ops[0]: (ops[1], ops[2]) for _, op, ops in self.insts if op == OP_TYPE_VECTOR}
        self.bool = next((ops[0] for _, op, ops in self.insts if op == OP_TYPE_BOOL), None)
        self.uints = {ops[1]: ops[0] for _, op, ops in self.insts if op == OP_TYPE_INT and ops[2] == 0}
        self.glsl = next((ops[0] for _, op, ops in self.insts if op == OP_EXT_INST_IMPORT
                          and np.asarray(ops[1:], "<u4").tobytes().split(b"\0")[0] == b"GLSL.std.450"), None)
        self.capabilities = {ops[0] for _, op, ops in self.insts if op == OP_CAPABILITY}
        self.replaced: dict[int, list[int]] = {}
        self.after: dict[int, list[int]] = {}
        self.added_capabilities: list[int] = []
        self.added_imports: list[int] = []
        self.added_globals: list[int] = []
        self._constants: dict[tuple[int, float], int] = {}

    def fresh(self) -> int:
        self.bound += 1
        return self.bound - 1

    def body(self):
        """``(offset, opcode, operands)`` of every instruction inside a function, ``OpFunction`` excluded."""
        inside = False
        for at, op, ops in self.insts:
            if op == OP_FUNCTION:
                inside = True
            elif op == OP_FUNCTION_END:
                inside = False
            elif inside:
                yield at, op, ops

    def decorated(self, decoration: int) -> set[int]:
        return {ops[0] for _, op, ops in self.insts if op == OP_DECORATE and ops[1] == decoration}

    def definitions(self) -> dict[int, tuple[int, int, int]]:
        """Result id → (offset, opcode, type id) of every instruction in a function that has a result."""
        declared = {ops[0] for _, op, ops in self.insts if OP_TYPE_FIRST <= op <= OP_TYPE_LAST and ops}
        return {ops[1]: (at, op, ops[0]) for at, op, ops in self.body() if len(ops) > 1 and ops[0] in declared}

    def result_types(self) -> dict[int, int]:
        """Result id → type id of every instruction in a function and every float constant."""
        found = {result: type_id for result, (_, _, type_id) in self.definitions().items()}
        return {**found, **self.float_constants()}

    def float_constants(self, normal_only: bool = False) -> dict[int, int]:
        """Float scalar and vector constants, id → type (with ``normal_only``, those holding no subnormal)."""
        found: dict[int, int] = {}
        for _, op, ops in self.insts:
            shape = self.float_shape(ops[0]) if op in (OP_CONSTANT, OP_CONSTANT_COMPOSITE) and len(ops) > 2 else None
            if shape is None:
                continue
            if op == OP_CONSTANT:
                value = abs(float_value(ops[2], shape[0]))
                if not normal_only or not 0 < value < SMALLEST_NORMAL.get(shape[0], 0):
                    found[ops[1]] = ops[0]
            elif not normal_only or all(part in found for part in ops[2:]):
                found[ops[1]] = ops[0]
        return found

    def float_shape(self, type_id: int) -> tuple[int, int] | None:
        """``(width, components)`` of a float scalar or vector type; None for any other type."""
        if type_id in self.floats:
            return self.floats[type_id], 1
        component, count = self.vectors.get(type_id, (None, 0))
        return (self.floats[component], count) if component in self.floats else None

    def float_type(self, width: int, components: int = 1) -> int:
        """The id of a float type of ``width`` bits (a vector where ``components`` > 1), declared if missing."""
        scalar = next((tid for tid, w in self.floats.items() if w == width), None)
        if scalar is None:
            if width in CAPABILITY and CAPABILITY[width] not in self.capabilities:
                self.capabilities.add(CAPABILITY[width])
                self.added_capabilities += inst(OP_CAPABILITY, CAPABILITY[width])
            scalar = self.fresh()
            self.floats[scalar] = width
            self.added_globals += inst(OP_TYPE_FLOAT, scalar, width)
        return self._vector_of(scalar, components)

    def uint_type(self, width: int, components: int = 1) -> int:
        """The id of an unsigned integer type of ``width`` bits (a vector where ``components`` > 1), declared if
        missing."""
        if width not in self.uints:
            if width in INT_CAPABILITY and INT_CAPABILITY[width] not in self.capabilities:
                self.capabilities.add(INT_CAPABILITY[width])
                self.added_capabilities += inst(OP_CAPABILITY, INT_CAPABILITY[width])
            self.uints[width] = self.fresh()
            self.added_globals += inst(OP_TYPE_INT, self.uints[width], width, 0)
        return self._vector_of(self.uints[width], components)

    def uint_constant(self, width: int, components: int, value: int) -> int:
        """The id of ``value`` as an unsigned constant (splatted to a vector where ``components`` > 1), added once."""
        key = (("uint", width, components), value)
        if key not in self._constants:
            made = self.fresh()
            if components == 1:
                self.added_globals += inst(OP_CONSTANT, self.uint_type(width), made, value)
            else:
                scalar = self.uint_constant(width, 1, value)
                self.added_globals += inst(OP_CONSTANT_COMPOSITE, self.uint_type(width, components), made,
                                           *([scalar] * components))
            self._constants[key] = made
        return self._constants[key]

    def _vector_of(self, component: int, components: int) -> int:
        if components == 1:
            return component
        vector = next((tid for tid, shape in self.vectors.items() if shape == (component, components)), None)
        if vector is None:
            vector = self.fresh()
            self.vectors[vector] = (component, components)
            self.added_globals += inst(OP_TYPE_VECTOR, vector, component, components)
        return vector

    def bool_type(self, components: int = 1) -> int:
        """The id of bool (a bool vector where ``components`` > 1), declared if missing."""
        if self.bool is None:
            self.bool = self.fresh()
            self.added_globals += inst(OP_TYPE_BOOL, self.bool)
        return self._vector_of(self.bool, components)

    def constant(self, type_id: int, value: float) -> int:
        """The id of ``value`` as a constant of float scalar or vector ``type_id``, added once."""
        key = (type_id, value)
        if key not in self._constants:
            shape = self.float_shape(type_id)
            if shape is None:
                raise SpirvError(f"SPIR-V edit: %{type_id} is no float type to make {value} of")
            width, components = shape
            made = self.fresh()
            if components == 1:
                self.added_globals += inst(OP_CONSTANT, type_id, made, float_bits(value, width))
            else:
                scalar = self.constant(self.float_type(width), value)
                self.added_globals += inst(OP_CONSTANT_COMPOSITE, type_id, made, *([scalar] * components))
            self._constants[key] = made
        return self._constants[key]

    def glsl_call(self, result_type: int, result: int, number: int, *args: int) -> list[int]:
        if self.glsl is None:
            self.glsl = self.fresh()
            self.added_imports += inst(OP_EXT_INST_IMPORT, self.glsl, *_string_words("GLSL.std.450"))
        return inst(OP_EXT_INST, result_type, result, self.glsl, number, *args)

    def renamed(self, at: int, op: int, ops: list[int]) -> tuple[list[int], int]:
        """The instruction at ``at`` writing a fresh id instead of its result, and that fresh id; rules then define
        the original result from it (``after``)."""
        fresh = self.fresh()
        return inst(op, ops[0], fresh, *ops[2:]), fresh

    def build(self) -> bytes:
        out = list(self.words[:5])
        out[3] = self.bound
        out += self.added_capabilities
        for at, op, ops in self.insts:
            if op == OP_MEMORY_MODEL:
                out += self.added_imports
            if op == OP_FUNCTION and self.added_globals:
                out += self.added_globals
                self.added_globals = []
            count = int(self.words[at]) >> 16
            out += self.replaced.get(at, self.words[at: at + count].tolist())
            out += self.after.get(at, [])
        return np.asarray(out, "<u4").tobytes()


def _string_words(text: str) -> list[int]:
    raw = text.encode() + b"\0"
    raw += b"\0" * (-len(raw) % 4)
    return np.frombuffer(raw, "<u4").tolist()
