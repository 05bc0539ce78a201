"""Project-wide fixtures: seeded RNG per test, one device context per session."""

from __future__ import annotations

import pytest

from tests.testutils import (
    HOW_TO_GIVE_TREE,
    NO_PINNED_TREE,
    NO_TREE,
    UNUSABLE,
    first_adapter,
    main_tree,
    pinned_tarball,
    seeded_rng,
)


def pytest_configure(config):
    """A promised device that is missing fails the session in one line; the project's own default cases run on
    the pinned ExecuTorch main tree when no tree is given."""
    if UNUSABLE:
        raise pytest.UsageError(f"vkdiff: {UNUSABLE[0]}")
    main, _ = main_tree()
    if hasattr(config.option, "et_src") and config.option.et_src is None and main is not None:
        config.option.et_src = main


def pytest_terminal_summary(terminalreporter):
    """A newcomer's run says what it did not do: the items skipped for lack of an ExecuTorch tree, in one line."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if NO_TREE in str(r.longrepr)]
    if skipped:
        terminalreporter.write_line(f"vkdiff: {len(skipped)} tests and items were skipped for lack of an ExecuTorch "
                                    f"tree; {HOW_TO_GIVE_TREE}", yellow=True)


@pytest.fixture(scope="session", autouse=True)
def programs_read_as_executorch_reads_them():
    """Every program a test decodes is also read by executorch's ``deserialize_pte_binary`` (where executorch is
    installed), and the two readings must agree field by field: vkdiff's own reader is tested on every program the
    tests make."""
    import importlib.util

    from vkdiff.program import pte

    if importlib.util.find_spec("executorch") is None:
        yield
        return
    from tests.program.oracle import differences, executorch_program

    original = pte.load_pte

    def checked(data: bytes, name: str = "program.pte"):
        program = original(data, name)
        try:
            theirs = executorch_program(data, name)
        except Exception:  # crafted bytes executorch's Python reader cannot walk (bad UTF-8, absent vectors): no oracle
            return program
        found = differences(program, theirs)
        assert not found, f"{name}: vkdiff's reader and executorch's disagree: {found[:3]}"
        return program

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pte, "load_pte", checked)
        yield


@pytest.fixture
def rng(request):
    """numpy Generator seeded from the test's node id."""
    return seeded_rng(request.node.nodeid)


@pytest.fixture(scope="session")
def gpu():
    """A wgpu device on the first Vulkan adapter (lavapipe in CI)."""
    from vkdiff.device.transports.adapters import create_device

    found = first_adapter()
    if found is None:
        pytest.skip("NOT_RUN: no Vulkan adapter (install mesa-vulkan-drivers; select with $VKDIFF_DEVICE)")
    info, adapter = found
    return create_device(info, adapter)


@pytest.fixture(scope="session")
def pipelines(gpu):
    from vkdiff.device.shaders.dispatch import PipelineCache

    return PipelineCache(gpu)


def _pinned_tree(name: str):
    from vkdiff.device.shaders.trees import resolve_et_src

    tarball = pinned_tarball(name)
    if tarball is None:
        pytest.skip(NO_PINNED_TREE)
    return resolve_et_src(tarball)


@pytest.fixture(scope="session")
def et_tree():
    """The ExecuTorch main tree (the pinned one, else what ``vkdiff run`` would use), extracted once into the cache."""
    from vkdiff.device.shaders.trees import resolve_et_src

    source, why = main_tree()
    if source is None:
        pytest.skip(f"NOT_RUN: {NO_TREE} ({why}); {HOW_TO_GIVE_TREE}")
    return resolve_et_src(source)


@pytest.fixture(scope="session")
def et_tree_v131():
    """The pinned v1.3.1 tree (``linear_q4gsw`` through ``QuantizedLinear.cpp``, int8-only dq8ca zero points)."""
    return _pinned_tree("v1.3.1")


@pytest.fixture(scope="session")
def et_ctx(et_tree):
    """A DeviceContext on the first adapter with the pinned main tree's shaders."""
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.runtime.context import DeviceContext

    found = first_adapter()
    if found is None:
        pytest.skip("NOT_RUN: no Vulkan adapter (install mesa-vulkan-drivers; select with $VKDIFF_DEVICE)")
    return DeviceContext(*found, ShaderBuilder(et_tree))
