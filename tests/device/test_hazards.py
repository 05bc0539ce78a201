"""The hazard check of ``--validate``: ET-VK's barriers (the port of ``vTensorStorage::transition``, both versions) over
a recorded stream, and what no barrier orders."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.testutils import first_adapter, isolated, requires_tree, requires_vulkan
from vkdiff.device.runtime import barriers
from vkdiff.device.runtime.barriers import (BEFORE_6EBAA05A27, COMPUTE, MAIN, READ, WRITE, PipelineBarrier, TensorState,
                                    port_for, transition)
from vkdiff.device.runtime.hazards import Access, Dispatch, find_hazards

FIX = re.compile(r"if \(0u == src_stage\) \{\s*if \(cur_written\) \{.*?\} else \{\s*src_stage = "
                 r"VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT;\s*\}\s*\}", re.S)
"""6ebaa05a27's first-write branch in ``vTensorStorage::transition``."""
BEFORE = "if (0u == src_stage) {\n      src_stage = VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT;\n    }"


def record(port, steps, shared=("t1", "t2")):
    """A stream as ``SyncRecorder`` records it: per dispatch, its transitions' barrier, then the dispatch."""
    states = {}
    stream = []
    for label, accesses in steps:
        barrier = PipelineBarrier()
        for name, access in accesses:
            state = states.setdefault(name, TensorState(memory="M" if name in shared else name, label=name,
                                                        image=False))
            transition(port, state, barrier, COMPUTE, access)
        if barrier:
            stream.append(barrier)
        stream.append(Dispatch(label, None, tuple(Access(states[n].memory, n, i, bool(a & WRITE), bool(a & READ))
                                                  for i, (n, a) in enumerate(accesses))))
    return stream


ALIASED = [("a", [("t1", WRITE), ("x", READ)]), ("b", [("y", WRITE), ("t1", READ)]), ("c", [("t2", WRITE), ("y", READ)])]
"""t1 and t2 share one SharedObject; t2's first access is a write after t1 was written and read."""


def test_a_first_write_through_an_aliased_handle_is_a_hazard_before_6ebaa05a27_and_not_since():
    (hazard,) = find_hazards(record(BEFORE_6EBAA05A27, ALIASED))
    assert hazard.kind == "WRITE_AFTER_WRITE" and hazard.first.label == "a" and hazard.second.label == "c"
    assert "c (binding 0, t2) is not ordered after a (binding 0, t1)" in hazard.describe()
    assert find_hazards(record(MAIN, ALIASED)) == []


@pytest.mark.parametrize("dropped", [1, 2, 3])
def test_removing_any_one_barrier_of_a_clean_stream_is_seen(dropped):
    """write x → read x, write y → read y, write z → read z, write x: every barrier after the first dispatch's is
    needed (the first one orders the first write after nothing)."""
    steps = [("p", [("x", WRITE)]), ("q", [("x", READ), ("y", WRITE)]), ("r", [("y", READ), ("z", WRITE)]),
             ("s", [("z", READ), ("x", WRITE)])]
    stream = record(MAIN, steps)
    assert find_hazards(stream) == []
    positions = [i for i, item in enumerate(stream) if isinstance(item, PipelineBarrier)]
    kept = [item for i, item in enumerate(stream) if i != positions[dropped]]
    assert find_hazards(kept), f"dropping barrier {dropped} must leave an unordered pair"


def test_a_write_after_a_read_needs_an_execution_dependency_only():
    stream = [Dispatch("read", None, (Access("M", "t", 0, False, True),)),
              PipelineBarrier(src=barriers.COMPUTE_SHADER, dst=barriers.COMPUTE_SHADER),
              Dispatch("write", None, (Access("M", "t", 0, True, False),))]
    assert find_hazards(stream) == []
    assert [h.kind for h in find_hazards([stream[0], stream[2]])] == ["WRITE_AFTER_READ"]


def test_a_read_after_a_write_needs_the_write_made_visible_not_only_ordered():
    execution_only = PipelineBarrier(src=barriers.COMPUTE_SHADER, dst=barriers.COMPUTE_SHADER)
    stream = [Dispatch("write", None, (Access("M", "t", 0, True, False),)), execution_only,
              Dispatch("read", None, (Access("M", "t", 0, False, True),))]
    assert [h.kind for h in find_hazards(stream)] == ["READ_AFTER_WRITE"]


@requires_tree
def test_the_port_follows_the_trees_own_transition(et_tree, tmp_path):
    assert port_for(et_tree) == MAIN
    copy = tmp_path / "et"
    shutil.copytree(et_tree / "backends", copy / "backends")
    cpp = copy / "backends" / "vulkan" / barriers.TENSOR_CPP
    text, count = FIX.subn(BEFORE, cpp.read_text())
    assert count == 1, "the pinned Tensor.cpp changed: update the fix this test takes out"
    cpp.write_text(text)
    assert port_for(copy) == barriers.BarrierPort(first_write_fix=False, war_widening=True)


@requires_tree
@requires_vulkan
def test_a_q8ta_resnet_is_fail_sync_with_the_barriers_from_before_6ebaa05a27(et_tree, tmp_path):
    """The bug 6ebaa05a27 fixed (q8ta_conv2d nondeterministic in ResNet-50): a first write through a SharedObject
    handle waited on nothing. With the pinned tree's barriers the same delegate is clean."""
    from vkdiff.cases.catalog import all_model_cases
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.runtime.context import DeviceContext
    from vkdiff.datamodel.settings import RunSettings
    from vkdiff.harness.device_models import check_on_device

    validated = RunSettings(validate="sync")
    (case,) = all_model_cases(r"^resnet_q8\[")
    copy = tmp_path / "et"
    shutil.copytree(et_tree / "backends", copy / "backends")
    cpp = copy / "backends" / "vulkan" / barriers.TENSOR_CPP
    cpp.write_text(FIX.sub(BEFORE, cpp.read_text()))
    clean = check_on_device(case, DeviceContext(*first_adapter(), ShaderBuilder(et_tree), settings=validated),
                            tree=et_tree)
    assert clean.status == "PASS", clean.reason
    racy = check_on_device(case, DeviceContext(*first_adapter(), ShaderBuilder(copy), settings=validated), tree=copy)
    assert racy.status == "FAIL_SYNC", racy.reason
    assert re.search(r"WRITE_AFTER_WRITE: node \d+ \S+ \(binding 0, \S+ \[[\d, ]+\] float32 mem_obj \d+\) is not "
                     r"ordered after ", racy.reason), racy.reason


def graph_mode_run(copy) -> tuple[str, str]:
    """In the child: resnet_q8 in whole-graph mode on raw Vulkan (no ``--validate``), 3 replays, the given tree."""
    from vkdiff.cases.catalog import all_model_cases
    from vkdiff.device.transports.adapters import select
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.runtime.context import DeviceContext
    from vkdiff.harness.device_models import check_on_device

    (case,) = all_model_cases(r"^resnet_q8\[")
    result = check_on_device(case, DeviceContext(*select(via="vulkan")[0], ShaderBuilder(copy)), tree=copy, replays=3)
    return result.status, result.reason


@requires_tree
@requires_vulkan
def test_whole_graph_replays_keep_the_hazard_and_report_it_latent_when_the_replays_agree(et_tree, tmp_path):
    """Without ``--validate`` the replays of the 6ebaa05a27^ stream run (on an H100 every one differs:
    ``NONDETERMINISTIC`` naming the hazard); where they agree, as on lavapipe, the hazard is ``FAIL_SYNC``, latent."""
    copy = tmp_path / "et"
    shutil.copytree(et_tree / "backends", copy / "backends")
    cpp = copy / "backends" / "vulkan" / barriers.TENSOR_CPP
    cpp.write_text(FIX.sub(BEFORE, cpp.read_text()))
    status, reason = isolated(graph_mode_run, copy)
    assert status in ("FAIL_SYNC", "NONDETERMINISTIC"), reason
    assert "WRITE_AFTER_WRITE" in reason and "before-6ebaa05a27 barriers" in reason, reason
    if status == "FAIL_SYNC":
        assert "3 whole-graph replays identical on this device: latent here" in reason, reason


LAYER_JSON = Path("/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json")


@requires_tree
@requires_vulkan
@pytest.mark.skipif(not LAYER_JSON.is_file(),
                    reason="NOT_RUN: VK_LAYER_KHRONOS_validation not installed (apt vulkan-validationlayers; "
                           "scripts/setup.sh)")
def test_the_validation_layer_also_sees_a_missing_barrier_on_the_raw_transport(et_tree):
    """ET-VK's barriers recorded exactly (raw Vulkan, whole-graph), every one dropped, vkdiff's own check silenced:
    the Khronos layer's synchronization validation reports the hazard, and it is FAIL_SYNC. In a process of its
    own: the layer stays loaded in the process that created an instance with it."""
    env = {**os.environ, "VKDIFF_VALIDATE": "1", "VKDIFF_TRANSPORT": "vulkan"}
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("layer_probe.py")), str(et_tree)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["layer"], "the layer must be active"
    assert result["status"] == "FAIL_SYNC", result["reason"]
    assert "validation layer SYNC-HAZARD-" in result["reason"]
