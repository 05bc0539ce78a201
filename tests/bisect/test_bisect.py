"""``vkdiff bisect node`` and ``bisect knob`` find faults a test plants, and only those."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.harness.tampering import add_half_at_3, nudge
from tests.testutils import requires_tree, requires_vulkan
from vkdiff.bisect import bisect_node
from vkdiff.cases.catalog import all_model_cases
from vkdiff.entry import cli
from vkdiff.executors import kernel as executor

pytestmark = [requires_vulkan, requires_tree]


def test_bisect_node_names_the_node_a_test_corrupts_and_saves_its_inputs(et_ctx, et_tree, tmp_path):
    target = 9
    case, = all_model_cases(r"^llama_proj\[4w-vulkan\]$")
    found = bisect_node(case, et_ctx, tree=et_tree, out_dir=tmp_path, tamper=nudge(target, add_half_at_3))
    assert found.first_bad["index"] == target and found.first_bad["mismatches"] == 1
    assert found.first_global["index"] == target
    assert f"first bad node: {target} et_vk.linear_q4gsw.default" in "\n".join(found.lines())
    saved = np.load(tmp_path / f"node-{target}.npz")
    assert {"arg.self", "arg.weights", "arg.weight_scales", "device.0", "expected.0"} <= set(saved.files)
    wrong = np.flatnonzero(~np.isclose(saved["device.0"].reshape(-1), saved["expected.0"].reshape(-1), atol=1e-4))
    assert wrong.tolist() == [3]
    meta = json.loads((tmp_path / f"node-{target}.json").read_text())
    assert meta["op"] == "et_vk.linear_q4gsw.default" and meta["dispatches"]


def test_bisect_node_of_a_passing_case_names_no_node(et_ctx, et_tree, tmp_path):
    case, = all_model_cases(r"^llama_proj\[4w-vulkan\]$")
    found = bisect_node(case, et_ctx, tree=et_tree, out_dir=tmp_path)
    assert found.result.status == "PASS" and found.first_bad is None and not found.saved


PLANTED = {
    "add[B2-H5-W13-fp16-texture3d]": (lambda case: case.dtype == "fp16" and case.storage == "texture3d",
                                      "dtype=fp16, storage=texture3d"),
    "add[B2-H5-W13-fp32-buffer-channels]": (lambda case: case.storage == "buffer" and case.layout == "channels",
                                            "storage=buffer, layout=channels"),
}
"""A kernel fault behind two knobs per case (outputs off by one there, nothing else is), and those knobs."""


@pytest.mark.parametrize("case_id", PLANTED)
def test_bisect_knob_reduces_a_failure_behind_two_knobs_to_exactly_those(case_id, et_tree, capsys, monkeypatch):
    real, faulty = executor.build, PLANTED[case_id][0]

    def build(ctx, case, prepared):
        graph = real(ctx, case, prepared)
        launch = graph.launch

        def faulty_launch():
            launched = launch()
            if faulty(case):
                launched.output = launched.output + launched.output.dtype.type(1)
            return launched

        graph.launch = faulty_launch
        return graph

    monkeypatch.setattr(executor, "build", build)
    code = cli.main(["bisect", "knob", case_id, "--et-src", str(et_tree)])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL_NUMERIC at " in out and ", shape.B=2, shape.H=5, shape.W=13, limits=native" in out
    assert f"smallest set of knob values that turns PASS into FAIL_NUMERIC: {PLANTED[case_id][1]}\n" in out


def test_bisect_knob_of_a_passing_case_says_there_is_nothing_to_bisect(et_tree, capsys):
    assert cli.main(["bisect", "knob", "add[B2-H5-W13-fp32-buffer]", "--et-src", str(et_tree)]) == 0
    assert "the case does not fail here: nothing to bisect" in capsys.readouterr().out


def test_bisect_of_an_unknown_case_is_one_line(capsys):
    assert cli.main(["bisect", "knob", "add[nope]"]) == cli.EXIT_USAGE
    assert capsys.readouterr().err == "vkdiff: error: no case 'add[nope]'; 'vkdiff run --list' prints every case id\n"


def test_bisect_device_sets_apart_the_routing_profile_that_changes_the_result(et_tree, capsys):
    """Without int8 dot products ET-VK takes dq8ca's weight-only fallback: only that route differs. The local
    workgroup sweep (8 sizes at the native route and limits) shows choose_qparams_per_row's reduction breaking under
    any size with more than one invocation along y, as ``vkdiff lint`` predicts for it."""
    from tests.testutils import first_adapter

    assert cli.main(["bisect", "device", "llama_proj[8da4w-vulkan]", "--et-src", str(et_tree),
                     "--device", first_adapter()[0].slug]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "llama_proj[8da4w-vulkan]: 23 configurations, 5 distinct results"
    assert lines[1] == "PASS: everywhere else (12 configurations)"
    (route,) = [line for line in lines if line.startswith("FAIL_NUMERIC at node 1 (linear_q4gsw_tiled_")]
    assert route.endswith(": only where route = no-dot-product (3 configurations)")
    sized = [line for line in lines[2:] if "local_wg" in line]
    assert len(sized) == 3, "the local-size sweep (native route and limits) sets apart the sizes a shader breaks under"
    assert any(line.startswith("FAIL_NAN at node 0 (choose_qparams_per_row_") and "'8x8x1'" in line for line in sized)
