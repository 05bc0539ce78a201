"""The raw transport's shared descriptor pools: never asked for more than they hold, reset once every set is gone."""

from __future__ import annotations

import random

from vkdiff.device.transports.vk_descriptors import PER_SET, SETS, DescriptorPools

STORAGE, UNIFORM, IMAGE = 7, 6, 3


class FakeVulkan:
    """Pools that hold what they were made with and fail, as a driver may, when asked for more."""

    def __init__(self):
        self.pools: dict[int, dict] = {}
        self.resets = 0

    def make(self, sizes: dict[int, int], sets: int) -> int:
        handle = len(self.pools) + 1
        self.pools[handle] = {"sizes": dict(sizes), "left": dict(sizes), "sets": sets, "max": sets}
        return handle

    def reset(self, handle: int) -> None:
        pool = self.pools[handle]
        pool["left"], pool["sets"] = dict(pool["sizes"]), pool["max"]
        self.resets += 1

    def destroy(self, handle: int) -> None:
        del self.pools[handle]

    def allocate(self, handle: int, layout: dict[int, int]) -> tuple[int, int]:
        pool = self.pools[handle]
        assert pool["sets"] > 0, "VK_ERROR_OUT_OF_POOL_MEMORY (sets)"
        for kind, n in layout.items():
            assert pool["left"].get(kind, 0) >= n, "VK_ERROR_OUT_OF_POOL_MEMORY (descriptors)"
            pool["left"][kind] -= n
        pool["sets"] -= 1
        return handle, pool["sets"]


def pools_for(fake: FakeVulkan) -> DescriptorPools:
    return DescriptorPools(fake.make, fake.reset, fake.destroy, fake.allocate, (STORAGE, UNIFORM, IMAGE))


def test_many_sets_come_from_few_pools_reset_when_their_sets_are_gone():
    rng = random.Random("vk_descriptors")
    fake = FakeVulkan()
    pools = pools_for(fake)
    live: list = []
    for _ in range(20 * SETS):
        layout = {STORAGE: rng.randint(1, 12), UNIFORM: rng.randint(0, 6)}
        live.append(pools.allocate(layout, layout)[0])
        while len(live) > 40:
            pools.release(live.pop(rng.randrange(len(live))))
    assert len(fake.pools) <= 3
    assert fake.resets >= 10


def test_a_set_larger_than_a_pool_holds_gets_a_pool_sized_for_it():
    fake = FakeVulkan()
    pools = pools_for(fake)
    large = {IMAGE: SETS * PER_SET + 5}
    pool, _ = pools.allocate(large, large)
    assert pool.sizes[IMAGE] == SETS * PER_SET + 5


def test_a_release_is_queued_and_close_destroys_every_pool():
    fake = FakeVulkan()
    pools = pools_for(fake)
    first, _ = pools.allocate({STORAGE: 1}, {STORAGE: 1})
    pools.release(first)
    assert first.live == 1, "a finalizer only queues its set"
    pools.allocate({STORAGE: 1}, {STORAGE: 1})
    assert first.live == 1
    pools.close()
    assert fake.pools == {}
