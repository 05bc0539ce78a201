"""Project-wide fixtures: seeded RNG per test, one device context per session."""

from __future__ import annotations

import pytest

from tests.testutils import first_adapter, seeded_rng


@pytest.fixture
def rng(request):
    """numpy Generator seeded from the test's node id."""
    return seeded_rng(request.node.nodeid)


@pytest.fixture(scope="session")
def gpu():
    """A wgpu device on the first Vulkan adapter (lavapipe in CI)."""
    from vkdiff.device.adapters import create_device

    found = first_adapter()
    if found is None:
        pytest.skip("NOT_RUN: no Vulkan adapter (install mesa-vulkan-drivers; select with $VKDIFF_DEVICE)")
    info, adapter = found
    return create_device(info, adapter)


@pytest.fixture(scope="session")
def pipelines(gpu):
    from vkdiff.device.dispatch import PipelineCache

    return PipelineCache(gpu)
