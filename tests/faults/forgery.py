"""Forged cache entries, as someone who can write the cache makes them: edit, then hash again with ``write_entry``."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from vkdiff.datamodel import read_entry, write_entry

OP_EXT_INST_IMPORT, OP_EXT_INST, OP_TYPE_FLOAT, OP_CONSTANT = 11, 12, 22, 43
FABS, FSIGN = 4, 6
"""GLSL.std.450 instruction numbers."""


def _instructions(words: list[int]):
    """(word offset, opcode, word count) of each instruction after the 5-word header."""
    at = 5
    while at < len(words):
        count, opcode = words[at] >> 16, words[at] & 0xFFFF
        yield at, opcode, count
        at += max(count, 1)


PATCHES = ("FAbs -> FSign", "a float constant negated", "an integer constant's low bit flipped")
"""What ``patch_module`` can change, in order of preference."""


def patch_module(spv: bytes, how: str = PATCHES[0]) -> bytes:
    """A module that computes something else: a ``FAbs`` call made ``FSign``, the first non-zero 32-bit float
    constant negated, or the first non-zero integer constant's low bit flipped (``how``, one of ``PATCHES``).

    Raises:
        ValueError: the module has nothing of that kind.
    """
    words = list(struct.unpack(f"<{len(spv) // 4}I", spv))
    glsl_std = {words[at + 1] for at, op, _ in _instructions(words) if op == OP_EXT_INST_IMPORT}
    floats = {words[at + 1] for at, op, _ in _instructions(words) if op == OP_TYPE_FLOAT and words[at + 2] == 32}
    for at, op, count in _instructions(words):
        if how == PATCHES[0] and op == OP_EXT_INST and words[at + 3] in glsl_std and words[at + 4] == FABS:
            words[at + 4] = FSIGN
        elif op == OP_CONSTANT and count == 4 and words[at + 3] & 0x7FFFFFFF and how != PATCHES[0] and \
                (words[at + 1] in floats) == (how == PATCHES[1]):
            words[at + 3] ^= 0x80000000 if how == PATCHES[1] else 1
        else:
            continue
        return struct.pack(f"<{len(words)}I", *words)
    raise ValueError(f"nothing to patch: {how}")


def forge_one(modules: list[Path]) -> tuple[Path, str]:
    """Forge the first of ``modules`` that calls ``FAbs``, else the first with a float constant, else with an integer
    constant; returns it and what was changed."""
    for how in PATCHES:
        for path in modules:
            try:
                forge_module(path, how)
                return path, how
            except ValueError:
                continue
    raise ValueError(f"none of {len(modules)} modules can be patched")


def forge_module(path: Path, how: str = PATCHES[1]) -> None:
    """Patch the SPIR-V of cache entry ``path`` (flags line kept) and hash it again as vkdiff writes it."""
    head, _, spv = read_entry(path).partition(b"\n")
    write_entry(path, head + b"\n" + patch_module(spv, how))


def repoint_index(index: Path, key: str) -> None:
    """Point index entry ``index`` at module ``key`` and hash it again as vkdiff writes it."""
    entry = json.loads(read_entry(index))
    write_entry(index, json.dumps({**entry, "key": key}).encode())
