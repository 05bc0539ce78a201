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


@pytest.fixture(scope="session")
def et_ctx():
    """A DeviceContext on the first adapter with the ExecuTorch tree of $VKDIFF_ET_SRC."""
    from vkdiff.device.build import ShaderBuilder, resolve_et_src
    from vkdiff.device.context import DeviceContext

    et_src = resolve_et_src(None)
    found = first_adapter()
    if et_src is None or found is None:
        pytest.skip("NOT_RUN: needs $VKDIFF_ET_SRC (an ExecuTorch checkout) and a Vulkan adapter")
    return DeviceContext(*found, ShaderBuilder(et_src))
