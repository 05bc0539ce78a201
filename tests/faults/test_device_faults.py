"""Faults on the device: a dispatch that never finishes, a lost device, a dying driver, a kernel that differs
on a repeat. Each ends one case with its status; the next case runs on a fresh device."""

from __future__ import annotations

import re

import time
from pathlib import Path

import pytest

from tests.faults import fault_ops
from tests.testutils import first_adapter, isolated, requires_glslc, requires_vulkan
from vkdiff.datamodel import DEVICE_LOST_FLAG, HANG_FLAG
from vkdiff.device.shaders.build import ShaderBuilder
from vkdiff.device.runtime.context import DeviceContext
from vkdiff.device.shaders.trees import TreeChoice
from vkdiff.harness.kernels import run_case
from vkdiff.harness.runner import Runner

pytestmark = [requires_glslc, requires_vulkan]
TIMEOUT_S = 3.0


@pytest.fixture
def tree(tmp_path, et_tree):
    """The pinned main tree (staging shaders) with the fault shaders; the fault ops registered here."""
    fault_ops.register()
    yield fault_ops.make_tree(tmp_path / "et", et_tree)
    fault_ops.unregister()


def _runner(tree, **settings) -> Runner:
    from vkdiff.datamodel.settings import RunSettings

    return Runner(tree=TreeChoice(path=tree, note="fault tree"), adapters=[first_adapter()],
                  settings=RunSettings(**settings), setup=fault_ops.register)


def test_a_dispatch_that_never_finishes_is_error_hang_and_the_run_goes_on(tree):
    runner = _runner(tree, timeout=TIMEOUT_S)
    slug = runner.slugs[0]
    try:
        start = time.monotonic()
        hung, = runner.run(fault_ops.case(fault_ops.SPIN), slug)
        waited = time.monotonic() - start
        after, = runner.run(fault_ops.case(fault_ops.TICKET), slug)
    finally:
        runner.close()
    assert hung.status == "ERROR" and HANG_FLAG in hung.flags
    assert ("did not finish within --timeout 3 s while reading back 1 output with the guard bands of 2 buffers after "
            "dispatching ") in hung.reason
    assert hung.reason.split("after dispatching ")[1].split(";")[0].endswith("vk_spin (65535, 65535, 1)")
    assert "--timeout 3" in hung.repro
    assert waited < TIMEOUT_S + 30, "the hang must end the case soon after the timeout (child start included)"
    assert after.status == "PASS", after.reason


def test_a_dying_driver_is_error_device_lost_and_the_run_goes_on(tree):
    runner = _runner(tree, timeout=TIMEOUT_S)
    slug = runner.slugs[0]
    try:
        died, = runner.run(fault_ops.case(fault_ops.ABORT), slug)
        after, = runner.run(fault_ops.case(fault_ops.TICKET), slug)
    finally:
        runner.close()
    assert died.status == "ERROR" and DEVICE_LOST_FLAG in died.flags
    assert f"exit code {fault_ops.ABORT_CODE}" in died.reason
    assert after.status == "PASS", after.reason


@pytest.mark.parametrize("timeout", [None, TIMEOUT_S], ids=["in-process", "isolated"])
def test_a_lost_device_is_error_device_lost_and_the_next_case_gets_a_fresh_one(tree, timeout):
    runner = _runner(tree, timeout=timeout)
    slug = runner.slugs[0]
    try:
        lost, = runner.run(fault_ops.case(fault_ops.LOSE), slug)
        after, = runner.run(fault_ops.case(fault_ops.TICKET), slug)
    finally:
        runner.close()
    assert lost.status == "ERROR" and DEVICE_LOST_FLAG in lost.flags
    assert "device lost" in lost.reason and "Parent device is lost" in lost.reason
    assert after.status == "PASS", after.reason


def test_a_kernel_that_differs_on_a_repeat_is_nondeterministic_with_the_count(tree):
    once = run_case(DeviceContext(*first_adapter(), ShaderBuilder(tree)), fault_ops.case(fault_ops.TICKET))
    assert once.status == "PASS", "one run alone cannot see it"
    repeated = run_case(DeviceContext(*first_adapter(), ShaderBuilder(tree)), fault_ops.case(fault_ops.TICKET),
                        repeat=3)
    assert repeated.status == "NONDETERMINISTIC"
    assert repeated.reason == (f"run 2 of 3 differs bitwise from run 1 in {fault_ops.N} of {fault_ops.N} output "
                               f"elements (run 1 alone: PASS)")
    assert repeated.metrics["nondeterministic"]["differing"] == fault_ops.N


def overrun_run(tree, transport: str) -> tuple[str, str]:
    """One run of the overrun fault op through ``transport`` (in a process of its own for raw Vulkan)."""
    from vkdiff.device.transports.adapters import select

    fault_ops.register()
    result = run_case(DeviceContext(*select(via=transport)[0], ShaderBuilder(tree)), fault_ops.case(fault_ops.OVERRUN))
    return result.status, result.reason


@pytest.mark.parametrize("transport", ["wgpu", "vulkan"])
def test_a_write_past_the_tensor_is_fail_oob_through_the_canaries_naming_the_dispatch(tree, transport):
    """The output is right; one invocation also writes 8 bytes past the tensor's storage. The guard band after every
    buffer the graph allocates sees it, through either transport, and names the shader and binding."""
    status, reason = overrun_run(tree, transport) if transport == "wgpu" else isolated(overrun_run, tree, transport)
    assert status == "FAIL_OOB", reason
    assert reason.startswith(f"4 of 64 canary bytes after buffer tensor [{fault_ops.N}] float32 changed "
                             f"(first at byte 8 past its storage): written out of bounds by one of: "
                             f"vk_overrun binding 0")


def overrun_far_validated(tree) -> tuple[str, str, bool]:
    """In a process of its own: the far overrun through raw Vulkan with ``--validate gpu`` (the layer loads with the
    process's first instance)."""
    from vkdiff.datamodel.settings import RunSettings
    from vkdiff.device.transports.adapters import select

    settings = RunSettings(transport="vulkan", validate="gpu")
    fault_ops.register()
    found = select(via=settings.transport, validate=settings.validate)
    result = run_case(DeviceContext(*found[0], ShaderBuilder(tree), settings=settings),
                      fault_ops.case(fault_ops.OVERRUN_FAR))
    return result.status, result.reason, any(f.startswith("layer:") for f in found[0][0].features)


@pytest.mark.skipif(not Path("/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json").is_file(),
                    reason="NOT_RUN: VK_LAYER_KHRONOS_validation not installed (apt vulkan-validationlayers)")
def test_a_write_far_past_the_buffer_is_fail_oob_through_the_validation_layer(tree):
    """Past the guard band and the whole bound range, no canary sees it (robustBufferAccess drops it); GPU-assisted
    validation does; its report is named by shader, binding (the instruction it points at) and access."""
    status, reason, layer = isolated(overrun_far_validated, tree)
    assert layer, "the layer must be active"
    assert status == "FAIL_OOB", reason
    assert re.match(r"vk_overrun binding 0 (\(\w+\) )?\(write\): submission: ", reason), reason
    assert "validation layer VUID-vkCmdDispatch-None-02706" in reason and "access out of bounds" in reason
