"""Seeded mutants of a file or a JSON document, as a hostile colleague or a flipped bit would make them."""

from __future__ import annotations

import copy
import random
import struct
from typing import Any, Iterator

BOUNDARY_WORDS = (0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)
ODD_VALUES = (None, True, -1, 0, 2**31, 2**63, -2**63, 1e308, float("nan"), "", "x" * 300, "\x1b[2J", "a\x00b",
              "../../../etc/passwd", [], {}, [[[]]], {"kind": "Tensor"}, "0", 3.5)
"""What a mutated JSON field becomes: wrong types, boundaries, a terminal escape, empty and nested containers."""


def byte_mutants(data: bytes, seed: int, count: int) -> Iterator[tuple[int, bytes]]:
    """``(index, mutant)``: bytes flipped, a 32-bit word set to a boundary value, cut short, a slice repeated or
    zeroed; each mutant seeded by ``(seed, index)`` so one can be remade alone."""
    for index in range(count):
        rng = random.Random(f"{seed}:{index}")
        out = bytearray(data)
        kind = rng.randrange(6)
        if kind <= 1:
            for _ in range(rng.randint(1, 4)):
                out[rng.randrange(len(out))] = rng.randrange(256)
        elif kind == 2 and len(out) > 8:
            at = rng.randrange(len(out) - 4) & ~3
            out[at:at + 4] = struct.pack("<I", rng.choice(BOUNDARY_WORDS))
        elif kind == 3:
            out = out[:rng.randrange(len(out))]
        elif kind == 4:
            at, size = rng.randrange(len(out)), rng.randint(1, 64)
            out[at:at] = out[at:at + size]
        else:
            at, size = rng.randrange(len(out)), rng.randint(1, 64)
            out[at:at + size] = bytes(len(out[at:at + size]))
        yield index, bytes(out)


def _paths(doc: Any, prefix: tuple = ()) -> Iterator[tuple]:
    yield prefix
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from _paths(value, prefix + (i,))


def json_mutant(doc: Any, rng: random.Random, *, within: tuple = ()) -> Any:
    """A copy of ``doc`` with one to three fields (under ``within``) replaced, deleted, duplicated or grown."""
    out = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        paths = [p for p in _paths(out) if p[:len(within)] == within and len(p) > len(within)]
        if not paths:
            break
        path = rng.choice(paths)
        parent = out
        for key in path[:-1]:
            parent = parent[key]
        key, action = path[-1], rng.randrange(5)
        if action == 0 and isinstance(parent, dict):
            del parent[key]
        elif action == 1 and isinstance(parent[key], (int, float)) and not isinstance(parent[key], bool):
            parent[key] = rng.choice((-1, 0, 2**31 - 1, 2**31, -2**31, parent[key] + 1, parent[key] * 1000))
        elif action == 2 and isinstance(parent[key], list):
            parent[key] = parent[key] * rng.randint(2, 3) if rng.random() < 0.5 else parent[key][:-1]
        else:
            parent[key] = copy.deepcopy(rng.choice(ODD_VALUES))
    return out


def npz_bomb(path, shape: tuple[int, ...], dtype: str = "<f4") -> None:
    """An ``.npz`` whose one member declares ``shape`` of zeros: a few MB on disk, the whole array decompressed.

    The deflate stream repeats one fully flushed block of zeros, so it is built without compressing gigabytes;
    the CRC is computed over the zeros it stands for, so the archive is valid.
    """
    import io
    import zlib

    import numpy as np

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": dtype, "fortran_order": False, "shape": shape})
    head = header.getvalue()
    size = len(head) + int(np.prod(shape)) * np.dtype(dtype).itemsize
    chunk = 1 << 24
    blocks, rest = divmod(size - len(head), chunk)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = deflate.compress(head) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(bytes(chunk)) + deflate.flush(zlib.Z_FULL_FLUSH)
    data = first + block * blocks + deflate.compress(bytes(rest)) + deflate.flush()
    crc, zeros = zlib.crc32(head), bytes(chunk)
    for _ in range(blocks):
        crc = zlib.crc32(zeros, crc)
    crc = zlib.crc32(bytes(rest), crc)
    name, extra = b"arr_0.npy", struct.pack("<HHQQ", 1, 16, size, len(data))
    local = struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 45, 0, 8, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF, len(name),
                        len(extra))
    central = struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 45, 45, 0, 8, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                          len(name), len(extra), 0, 0, 0, 0, 0)
    with open(path, "wb") as out:
        out.write(local + name + extra + data)
        start = out.tell()
        out.write(central + name + extra)
        out.write(struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 1, 1, out.tell() - start, start, 0))
