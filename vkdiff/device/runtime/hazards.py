"""vkdiff's own hazard check over a recorded command stream: which accesses no barrier orders.

The stream is what one submission records: dispatches, each with the memory it reads and writes (from the
shader's own declarations: ``NonWritable`` / ``NonReadable``, image access), and the pipeline barriers between
them as ET-VK issues them (``vkdiff.device.runtime.barriers``). Memory is what tensors *are backed by*: handles of one
``SharedObject`` are one memory.

A later access is ordered after an earlier one when an execution dependency chain links them: the first barrier
after the earlier access has its stage in its source mask, each next barrier's source mask meets the previous
one's destination mask, and the later access's stage is in the last destination mask. A read after a write, or a
write after a write, also needs the write made available and visible: a barrier of that chain covering the memory
(a global barrier, or a buffer or image barrier on a handle of that memory) whose source access includes the
write and whose destination access includes the later access. A write after a read needs the execution
dependency only. The first unordered pair is the hazard; it works on any transport and needs no layer.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

from vkdiff.device.runtime.barriers import (ALL_COMMANDS, BOTTOM_OF_PIPE, COMPUTE_SHADER, MEMORY_READ, MEMORY_WRITE,
                                    SHADER_READ, SHADER_WRITE, TOP_OF_PIPE, PipelineBarrier)

READS = SHADER_READ | MEMORY_READ
WRITES = SHADER_WRITE | MEMORY_WRITE


@dataclasses.dataclass(frozen=True)
class Access:
    memory: object
    tensor: str
    binding: int
    write: bool
    read: bool


@dataclasses.dataclass(frozen=True)
class Dispatch:
    """One dispatch of the stream."""

    label: str
    """Its shader variant."""
    node: int | None
    """The delegate op that added it (None: staging)."""
    accesses: tuple[Access, ...]


@dataclasses.dataclass(frozen=True)
class Hazard:
    kind: str
    """``READ_AFTER_WRITE``, ``WRITE_AFTER_WRITE`` or ``WRITE_AFTER_READ``."""
    first: Dispatch
    second: Dispatch
    first_access: Access
    second_access: Access

    def describe(self) -> str:
        def where(d: Dispatch, a: Access) -> str:
            node = f"node {d.node} " if d.node is not None else ""
            return f"{node}{d.label} (binding {a.binding}, {a.tensor})"

        return (f"{self.kind}: {where(self.second, self.second_access)} is not ordered after "
                f"{where(self.first, self.first_access)} by any barrier: the two touch one memory")


def _stages(mask: int, source: bool) -> int:
    """A stage mask as the stages it synchronises (ALL_COMMANDS: every stage; TOP_OF_PIPE as a source and
    BOTTOM_OF_PIPE as a destination: none)."""
    if mask & ALL_COMMANDS:
        return ~0
    return mask & ~(TOP_OF_PIPE if source else BOTTOM_OF_PIPE)


def _ordered(barriers: Sequence[PipelineBarrier], memory: object, needs_memory: bool, later_access: int) -> bool:
    """Whether a compute access before ``barriers`` is ordered before a compute access after them (see the module
    docstring); with ``needs_memory``, a barrier of the chain must also cover ``memory`` with a write source access
    and ``later_access`` as destination access."""
    reach = COMPUTE_SHADER
    covered, ordered = not needs_memory, False
    for barrier in barriers:
        if not reach & _stages(barrier.src, True):
            continue
        after = _stages(barrier.dst, False)
        reach |= after
        if after & COMPUTE_SHADER:
            ordered = True
            covered = covered or any((r.memory is None or r.memory == memory) and r.src_access & WRITES
                                     and r.dst_access & later_access for r in barrier.resources)
    return ordered and covered


def find_hazards(stream: Iterable[Dispatch | PipelineBarrier]) -> list[Hazard]:
    """Every unordered pair of conflicting accesses, first the earliest (one per later access and memory)."""
    items = list(stream)
    hazards: list[Hazard] = []
    history: dict[object, list[tuple[int, Dispatch, Access]]] = {}
    for position, item in enumerate(items):
        if not isinstance(item, Dispatch):
            continue
        for access in item.accesses:
            earlier = history.setdefault(access.memory, [])
            last_write = next(((p, d, a) for p, d, a in reversed(earlier) if a.write), None)
            checks = []
            if last_write is not None:
                kind = "WRITE_AFTER_WRITE" if access.write else "READ_AFTER_WRITE"
                checks.append((kind, last_write, True))
            if access.write:
                since = [(p, d, a) for p, d, a in earlier if a.read and not a.write
                         and (last_write is None or p > last_write[0])]
                checks += [("WRITE_AFTER_READ", read, False) for read in since]
            for kind, (p, first, first_access), needs_memory in checks:
                if p == position:
                    continue
                between = [b for b in items[p + 1:position] if isinstance(b, PipelineBarrier)]
                later = (SHADER_WRITE | MEMORY_WRITE) if access.write else (SHADER_READ | MEMORY_READ)
                if not between or not _ordered(between, access.memory, needs_memory, later):
                    hazards.append(Hazard(kind, first, item, first_access, access))
                    break
            earlier.append((position, item, access))
    return hazards
