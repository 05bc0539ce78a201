"""The raw transport's sub-allocator: ranges never overlap, come back merged, and blocks are freed when empty."""

from __future__ import annotations

import random

import pytest

from vkdiff.device.transports.vk_arena import BLOCK, DEDICATED, GRAIN, Arena, Block


class FakeMemory:
    """``new_memory``/``free_memory`` that count what is live."""

    def __init__(self, mapped: bool = True):
        self.live: dict[int, int] = {}
        self.made = 0
        self.mapped = mapped

    def new(self, kind: int, size: int, what: str):
        self.made += 1
        self.live[self.made] = size
        return self.made, bytearray(size) if self.mapped else None

    def free(self, memory: int) -> None:
        del self.live[memory]


def test_ranges_are_aligned_disjoint_and_merge_back_whole():
    rng = random.Random("vk_arena")
    fake = FakeMemory()
    arena = Arena(fake.new, fake.free)
    taken = []
    for _ in range(400):
        alignment = rng.choice([4, 64, 256, 1024, 65536])
        where = arena.allocate(1, True, rng.randint(1, 200_000), alignment, "a buffer")
        assert where.offset % max(alignment, GRAIN) == 0
        taken.append(where)
    spans = sorted((w.memory, w.offset, w.offset + w.size) for w in taken)
    for (m1, _, end), (m2, start, _) in zip(spans, spans[1:]):
        assert m1 != m2 or end <= start
    rng.shuffle(taken)
    for where in taken:
        arena.release(where)
    arena.allocate(1, True, 16, 4, "a buffer")
    blocks = arena.blocks[(1, True)]
    assert len(blocks) == 1, "of the empty blocks one stays"
    assert len(fake.live) == 1


def test_mapped_ranges_are_views_of_their_block():
    fake = FakeMemory()
    arena = Arena(fake.new, fake.free)
    first = arena.allocate(0, True, 100, 4, "a")
    second = arena.allocate(0, True, 100, 4, "b")
    first.mapped[:3] = b"abc"
    second.mapped[:3] = b"xyz"
    assert bytes(first.block.mapped[first.offset:first.offset + 3]) == b"abc"
    assert bytes(second.block.mapped[second.offset:second.offset + 3]) == b"xyz"
    assert len(first.mapped) == first.size >= 100


def test_large_resources_get_memory_of_their_own_and_free_it_at_once():
    fake = FakeMemory(mapped=False)
    arena = Arena(fake.new, fake.free)
    where = arena.allocate(2, False, DEDICATED + 1, 4, "a large image")
    assert where.block is None and where.mapped is None and fake.live == {where.memory: where.size}
    arena.release(where)
    assert fake.live == {}


def test_linear_and_optimal_resources_never_share_a_block():
    fake = FakeMemory()
    arena = Arena(fake.new, fake.free)
    buffer = arena.allocate(3, True, 64, 4, "a buffer")
    image = arena.allocate(3, False, 64, 4, "an image")
    assert buffer.memory != image.memory


def test_a_release_waits_for_the_next_allocation_and_close_frees_every_block():
    fake = FakeMemory()
    arena = Arena(fake.new, fake.free)
    first, *_ = [arena.allocate(0, True, DEDICATED, 4, "a") for _ in range(BLOCK // DEDICATED)]
    arena.release(first)
    assert first.block.free == [], "a finalizer only queues its range"
    again = arena.allocate(0, True, DEDICATED, 4, "b")
    assert again.memory == first.memory and again.offset == first.offset
    arena.close()
    assert fake.live == {}


@pytest.mark.parametrize("free, give, merged", [
    ([(0, 256)], (512, 256), [(0, 256), (512, 256)]),
    ([(0, 256)], (256, 256), [(0, 512)]),
    ([(512, 256)], (256, 256), [(256, 512)]),
    ([(0, 256), (512, 256)], (256, 256), [(0, 768)]),
])
def test_a_given_range_merges_with_its_neighbours(free, give, merged):
    block = Block(memory=0, mapped=None, free=list(free))
    block.give(*give)
    assert block.free == merged
