"""Sub-allocation of the raw Vulkan transport's memory: buffers and images take ranges of a few large
``VkDeviceMemory`` blocks per memory type, as VMA gives ET-VK's resources theirs.

One ``vkAllocateMemory`` plus ``vkFreeMemory`` per resource cost 0.6 ms on an NVIDIA H200 (a fifth of a kernel case's
host time), and the driver serialises them across processes, so ``--jobs`` stopped scaling. A resource larger than
``DEDICATED`` still gets memory of its own. Ranges come back through ``release``, which only queues them: a finalizer
may run on any thread, in the middle of an allocation, so the queue is drained under the lock by the next ``allocate``.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import threading
from typing import Any

BLOCK = 32 << 20
"""Bytes of one block."""

DEDICATED = 4 << 20
"""Resources larger than this get memory of their own."""

GRAIN = 256
"""Ranges start and end on this many bytes (at least; more where the resource's alignment asks)."""


@dataclasses.dataclass(eq=False)
class Block:
    """One ``VkDeviceMemory`` and its free ranges ``(offset, size)``, sorted and never adjacent."""

    memory: Any
    mapped: memoryview | None
    free: list[tuple[int, int]]

    def take(self, size: int, alignment: int) -> int | None:
        """The offset of a range of ``size`` bytes aligned to ``alignment`` (first fit), or None."""
        for i, (offset, length) in enumerate(self.free):
            start = -(-offset // alignment) * alignment
            if start + size > offset + length:
                continue
            rest = [(offset, start - offset)] if start > offset else []
            if start + size < offset + length:
                rest.append((start + size, offset + length - start - size))
            self.free[i:i + 1] = rest
            return start
        return None

    def give(self, offset: int, size: int) -> None:
        """Return a range, merged with its free neighbours."""
        i = bisect.bisect(self.free, (offset, size))
        if i < len(self.free) and offset + size == self.free[i][0]:
            size += self.free.pop(i)[1]
        if i > 0 and self.free[i - 1][0] + self.free[i - 1][1] == offset:
            offset, size = self.free[i - 1][0], self.free[i - 1][1] + size
            i -= 1
            self.free.pop(i)
        self.free.insert(i, (offset, size))

    @property
    def empty(self) -> bool:
        return self.free == [(0, BLOCK)]


@dataclasses.dataclass(frozen=True)
class Range:
    """Where a resource's memory lies: its block's memory, the offset there, the mapped bytes (None: not mapped)."""

    memory: Any
    offset: int
    mapped: memoryview | None
    block: Block | None
    """None: dedicated memory, freed with the resource."""
    size: int


class Arena:
    """Blocks per (memory type, linear or optimal tiling: they never share a block, so ``bufferImageGranularity``
    never applies) for one device."""

    def __init__(self, new_memory: Any, free_memory: Any):
        self._new, self._free = new_memory, free_memory
        """``new_memory(type_index, size, what) -> (VkDeviceMemory, mapped buffer or None)``; ``free_memory(memory)``."""
        self.blocks: dict[tuple[int, bool], list[Block]] = collections.defaultdict(list)
        self._returned: collections.deque = collections.deque()
        self._lock = threading.Lock()

    def allocate(self, kind: int, linear: bool, size: int, alignment: int, what: str) -> Range:
        """A range of ``size`` bytes of memory type ``kind``, aligned to ``alignment``, for ``what``."""
        size = -(-max(int(size), 1) // GRAIN) * GRAIN
        if size > DEDICATED:
            return self.dedicated(kind, size, what)
        with self._lock:
            self._drain()
            blocks = self.blocks[(kind, linear)]
            for block in blocks:
                offset = block.take(size, max(int(alignment), GRAIN))
                if offset is not None:
                    return Range(block.memory, offset, _slice(block.mapped, offset, size), block, size)
            memory, mapped = self._new(kind, BLOCK, what)
            block = Block(memory, _view(mapped), [(0, BLOCK)])
            blocks.append(block)
            offset = block.take(size, max(int(alignment), GRAIN))
            return Range(memory, offset, _slice(block.mapped, offset, size), block, size)

    def dedicated(self, kind: int, size: int, what: str) -> Range:
        """Memory of its own (an aliased shared object's, bound at offset 0 as ET-VK binds it)."""
        memory, mapped = self._new(kind, int(size), what)
        return Range(memory, 0, _view(mapped), None, int(size))

    def release(self, where: Range) -> None:
        """Give a range back (any thread; dedicated memory is freed now)."""
        if where.block is None:
            self._free(where.memory)
        else:
            self._returned.append(where)

    def _drain(self) -> None:
        """Ranges released since the last allocation back into their blocks; of the empty blocks of a kind, one
        stays."""
        if not self._returned:
            return
        while self._returned:
            where = self._returned.popleft()
            where.block.give(where.offset, where.size)
        for blocks in self.blocks.values():
            empty = [b for b in blocks if b.empty]
            for block in empty[1:]:
                blocks.remove(block)
                self._free(block.memory)

    def close(self) -> None:
        """Free every block (the device's resources are gone)."""
        with self._lock:
            self._returned.clear()
            for blocks in self.blocks.values():
                for block in blocks:
                    self._free(block.memory)
            self.blocks.clear()


def _view(mapped: Any) -> memoryview | None:
    return None if mapped is None else memoryview(mapped).cast("B")


def _slice(mapped: memoryview | None, offset: int, size: int) -> memoryview | None:
    return None if mapped is None else mapped[offset:offset + size]
