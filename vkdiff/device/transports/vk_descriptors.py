"""Descriptor sets from a few shared pools, each reset once every set it gave out is unreferenced.

A pool of its own per set cost 0.5 ms of ``vkCreateDescriptorPool`` and ``vkDestroyDescriptorPool`` on an NVIDIA H200.
Pools are never asked for more than they have left (sets and descriptors of each type are counted here), so neither
``VK_ERROR_OUT_OF_POOL_MEMORY`` nor fragmentation can occur. As with the arena, a finalizer only queues its set; the
next allocation drains the queue under the lock.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from typing import Any, Callable

SETS = 256
"""Sets one pool holds."""

PER_SET = 16
"""Descriptors of each type per set, on average, that one pool holds (a larger set gets a pool of its own size)."""


@dataclasses.dataclass(eq=False)
class Pool:
    """One ``VkDescriptorPool`` and what it has left to give."""

    handle: Any
    sizes: dict[int, int]
    """``VkDescriptorType`` → descriptors the pool holds."""
    sets: int = SETS
    """Sets left to give."""
    left: dict[int, int] = dataclasses.field(default_factory=dict)
    """``VkDescriptorType`` → descriptors left to give."""
    live: int = 0
    """Sets given and not yet returned."""

    def fits(self, counts: dict[int, int]) -> bool:
        return self.sets > 0 and all(self.left.get(kind, 0) >= n for kind, n in counts.items())


class DescriptorPools:
    """The pools of one device: ``make_pool(sizes, sets) -> handle``, ``reset_pool(handle)``,
    ``destroy_pool(handle)``, ``allocate_set(pool, layout) -> set`` (in whatever form the transport binds it)."""

    def __init__(self, make_pool: Callable, reset_pool: Callable, destroy_pool: Callable, allocate_set: Callable,
                 types: tuple[int, ...]):
        self._make, self._reset, self._destroy, self._allocate = make_pool, reset_pool, destroy_pool, allocate_set
        self._types = types
        """Every descriptor type a pool holds."""
        self.pools: list[Pool] = []
        self._current: Pool | None = None
        self._returned: collections.deque = collections.deque()
        self._lock = threading.Lock()

    def allocate(self, layout: Any, counts: dict[int, int]) -> tuple[Pool, Any]:
        """A set of ``layout`` (whose descriptors of each type ``counts`` gives) and the pool it came from."""
        with self._lock:
            self._drain()
            pool = self._current
            if pool is None or not pool.fits(counts):
                if pool is not None and pool.live == 0:
                    self._renew(pool)
                pool = next((p for p in self.pools if p.live == 0 and p.fits(counts)), None) or self._new(counts)
                self._current = pool
            handle = self._allocate(pool.handle, layout)
            pool.sets -= 1
            pool.live += 1
            for kind, n in counts.items():
                pool.left[kind] -= n
            return pool, handle

    def release(self, pool: Pool) -> None:
        """A set of ``pool`` is unreferenced (any thread)."""
        self._returned.append(pool)

    def _drain(self) -> None:
        """Sets returned since the last allocation; a pool none of whose sets is live is reset, full again."""
        while self._returned:
            pool = self._returned.popleft()
            pool.live -= 1
            if pool.live == 0 and pool is not self._current:
                self._renew(pool)

    def _new(self, counts: dict[int, int]) -> Pool:
        sizes = {kind: max(SETS * PER_SET, counts.get(kind, 0)) for kind in self._types}
        pool = Pool(self._make(sizes, SETS), sizes, left=dict(sizes))
        self.pools.append(pool)
        return pool

    def _renew(self, pool: Pool) -> None:
        """Reset a pool none of whose sets is live: all its sets and descriptors are free again."""
        self._reset(pool.handle)
        pool.sets, pool.left = SETS, dict(pool.sizes)

    def close(self) -> None:
        with self._lock:
            for pool in self.pools:
                self._destroy(pool.handle)
            self.pools.clear()
            self._current = None
