"""The strict device profile (#35): SPIR-V rewritten so that any device computes as the Vulkan spec lets the least
accurate conformant one.

Each rule turns one liberty of the spec's "Precision and Operation of SPIR-V Instructions" into
what the module asks for explicitly, so that lavapipe (or any device) takes it:

``division``
    ``a / b`` as ``a * (1 / b)``: two correctly rounded operations, within the 2.5 ULP the spec
    grants, and floor division of an integral quotient may land one below it.
``tanh``
    GLSL.std.450 ``Tanh`` through the formula its precision is inherited from,
    ``(exp(x) - exp(-x)) / (exp(x) + exp(-x))``: infinite over infinite, NaN, past ``|x| = 88.7``.
Contraction is not a rule yet: GLSL.std.450 ``Fma`` is itself only "inherited from OpFMul followed
by OpFAdd", and lavapipe computes it with two roundings (measured through wgpu), so rewriting to
``Fma`` forces nothing; it needs an exact emulation (float64 products, or error-free transforms).

The rewrite works on words and keeps every other instruction as it is; the constants it needs
are added, and the id bound raised.
"""

from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from vkdiff.device.shaders.spirv import OP_CONSTANT, OP_TYPE_FLOAT, OP_TYPE_VECTOR, SpirvError
from vkdiff.device.shaders.spirv import instructions, words_of

__all__ = ["PROFILES", "RULES", "rewrite"]

OP_EXT_INST_IMPORT, OP_EXT_INST, OP_FUNCTION = 11, 12, 54
OP_CONSTANT_COMPOSITE, OP_FNEGATE, OP_FADD, OP_FSUB, OP_FMUL, OP_FDIV = 44, 127, 129, 131, 133, 136
GLSL_TANH, GLSL_EXP = 21, 27
ONE_BITS = {32: 0x3F800000, 16: 0x3C00}
"""Bits of 1.0 by float width."""


def _inst(op: int, *operands: int) -> list[int]:
    return [((len(operands) + 1) << 16) | op, *operands]


class _Module:
    """A module being rewritten: instructions replaced by offset, constants and ids added."""

    def __init__(self, spv: bytes):
        self.words = words_of(spv)
        self.bound = int(self.words[3])
        self.insts = [(at, op, [int(v) for v in ops]) for at, op, ops in instructions(self.words)]
        self.floats = {ops[0]: ops[1] for _, op, ops in self.insts if op == OP_TYPE_FLOAT}
        self.vectors = {ops[0]: (ops[1], ops[2]) for _, op, ops in self.insts if op == OP_TYPE_VECTOR}
        self.glsl = next((ops[0] for _, op, ops in self.insts if op == OP_EXT_INST_IMPORT
                          and np.asarray(ops[1:], "<u4").tobytes().split(b"\0")[0] == b"GLSL.std.450"), None)
        self.replaced: dict[int, list[int]] = {}
        self.added_globals: list[int] = []
        self._ones: dict[int, int] = {}

    def fresh(self) -> int:
        self.bound += 1
        return self.bound - 1

    def one(self, type_id: int) -> int:
        """The id of a constant 1.0 of ``type_id`` (a float scalar or vector), added once."""
        if type_id not in self._ones:
            if type_id in self.floats:
                made = self.fresh()
                self.added_globals += _inst(OP_CONSTANT, type_id, made, ONE_BITS[self.floats[type_id]])
            elif type_id in self.vectors:
                component, count = self.vectors[type_id]
                scalar = self.one(component)
                made = self.fresh()
                self.added_globals += _inst(OP_CONSTANT_COMPOSITE, type_id, made, *([scalar] * count))
            else:
                raise SpirvError(f"strict profile: no float type %{type_id} to make 1.0 of")
            self._ones[type_id] = made
        return self._ones[type_id]

    def build(self) -> bytes:
        out = list(self.words[:5])
        out[3] = self.bound
        for at, op, ops in self.insts:
            if op == OP_FUNCTION and self.added_globals:
                out += self.added_globals
                self.added_globals = []
            count = int(self.words[at]) >> 16
            out += self.replaced.get(at, self.words[at: at + count].tolist())
        return np.asarray(out, "<u4").tobytes()


def _division(m: _Module) -> None:
    for at, op, ops in m.insts:
        if op == OP_FDIV:
            result_type, result, a, b = ops
            reciprocal = m.fresh()
            m.replaced[at] = (_inst(OP_FDIV, result_type, reciprocal, m.one(result_type), b)
                              + _inst(OP_FMUL, result_type, result, a, reciprocal))


def _tanh(m: _Module) -> None:
    for at, op, ops in m.insts:
        if op == OP_EXT_INST and ops[2] == m.glsl and ops[3] == GLSL_TANH:
            result_type, result, glsl, _, x = ops
            up, negated, down, num, den = (m.fresh() for _ in range(5))
            m.replaced[at] = (_inst(OP_EXT_INST, result_type, up, glsl, GLSL_EXP, x)
                              + _inst(OP_FNEGATE, result_type, negated, x)
                              + _inst(OP_EXT_INST, result_type, down, glsl, GLSL_EXP, negated)
                              + _inst(OP_FSUB, result_type, num, up, down)
                              + _inst(OP_FADD, result_type, den, up, down)
                              + _inst(OP_FDIV, result_type, result, num, den))


RULES: dict[str, Callable[[_Module], None]] = {"division": _division, "tanh": _tanh}
"""Each rule of the strict profile, by the liberty it takes (``vkdiff.reference.spec.precision.LIBERTIES``)."""
PROFILES: dict[str, tuple[str, ...]] = {"": (), "strict": tuple(RULES)}
"""``--device-profile``: the rules each profile's raw transport applies to every module it loads."""


def rewrite(spv: bytes, rules: Iterable[str]) -> bytes:
    """``spv`` with each of ``rules`` applied in turn.

    Raises:
        SpirvError: an unknown rule, or a module the rewrite cannot follow.
    """
    for name in rules:
        if name not in RULES:
            raise SpirvError(f"strict profile: unknown rule {name!r}; known: {', '.join(RULES)}")
        module = _Module(spv)
        RULES[name](module)
        if module.replaced:
            spv = module.build()
    return spv
