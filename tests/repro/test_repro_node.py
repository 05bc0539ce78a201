"""Repro folders of one node of a model case replay the node's verdict with numpy and wgpu only."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.harness.tampering import add_half_at_3, nudge
from tests.repro.amber_subset import execute, parse
from tests.testutils import first_adapter, requires_tree, requires_vulkan
from vkdiff.cases.catalog import all_model_cases
from vkdiff.device.transports.adapters import create_device
from vkdiff.entry import cli
from vkdiff.harness.device_models import identity, prepare_or_status
from vkdiff.repro.amber import write_amber
from vkdiff.repro.node import NodeReproError, repro_node

pytestmark = [requires_vulkan, requires_tree]
KNOWN = "embedding_large_vocab[fp32-vulkan]"
"""``etvk-embedding-large-vocab-texture-rows``: node 0 wrong on every device vkdiff has run."""
GENERATION = "tiny_llama[llm-4w-vulkan]"
SDPA = 17
"""``sdpa_with_kv_cache`` of layer 0: reads both KV caches and writes them (states), takes SymInt start_pos."""


def _prepared(case_id: str):
    """(model inputs, identity) of a model case, as ``repro_node`` takes them."""
    case, = all_model_cases("^" + case_id.replace("[", r"\[").replace("]", r"\]") + "$")
    return prepare_or_status(case), identity(case)


def _replay(folder) -> dict:
    done = subprocess.run([sys.executable, str(folder / "run_repro.py"), str(folder)], capture_output=True, text=True)
    assert done.stdout.strip(), done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_node_a_test_corrupts_replays_with_exactly_that_element_wrong(et_ctx, et_tree, tmp_path):
    made = repro_node(et_ctx, *_prepared("llama_proj[4w-vulkan]"), tmp_path, tree=et_tree,
                      tamper=nudge(9, add_half_at_3))
    assert made.index == 9 and made.in_model["status"] == "FAIL_NUMERIC"
    assert made.alone["status"] == "FAIL_NUMERIC" and made.alone["outputs"][0]["mismatches"] == 1
    replayed = _replay(tmp_path)
    assert replayed["status"] == "FAIL_NUMERIC" and replayed["same_verdict"]
    assert [o["mismatches"] for o in replayed["outputs"]] == [1]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["case"] == "llama_proj[4w-vulkan] node 9"
    assert any(s.startswith("q4gsw_linear") or "linear" in s for s in manifest["shaders"])


def test_the_known_large_vocab_embedding_fault_replays_from_its_node_folder(et_tree, tmp_path):
    assert cli.main(["repro", KNOWN, "-o", str(tmp_path), "--et-src", str(et_tree)]) == 0
    recorded = json.loads((tmp_path / "manifest.json").read_text())
    assert recorded["in_model"]["status"] == "FAIL_NUMERIC"
    replayed = _replay(tmp_path)
    assert replayed["status"] == "FAIL_NUMERIC" and replayed["same_verdict"]
    assert replayed["outputs"][0]["mismatches"] == recorded["verdict"]["mismatches"] > 0


@pytest.fixture(scope="module")
def sdpa_folder(tmp_path_factory, et_tree):
    out = tmp_path_factory.mktemp("sdpa")
    assert cli.main(["repro", GENERATION, "--node", str(SDPA), "-o", str(out), "--et-src", str(et_tree)]) == 0
    return out


def test_a_node_that_writes_kv_caches_replays_its_output_and_both_states(sdpa_folder):
    manifest = json.loads((sdpa_folder / "manifest.json").read_text())
    assert manifest["op"] == "sdpa_with_kv_cache.default" and manifest["verdict"]["status"] == "PASS"
    assert [o["name"].rstrip("0123456789") for o in manifest["outputs"]] == ["v", "state", "state"]
    expected = np.load(sdpa_folder / "expected.npz")
    written = {o["name"]: int(np.isfinite(expected[f"{o['name']}.expected"]).sum()) for o in manifest["outputs"]}
    assert all(n == expected[f"{name}.expected"].size for name, n in written.items() if name.startswith("v"))
    assert min(n for name, n in written.items() if name.startswith("state")) > 2 * 16, (
        "only the slot the node writes is compared, not the ones seeded from the model run")
    replayed = _replay(sdpa_folder)
    assert replayed["status"] == "PASS" and replayed["same_verdict"]


def test_a_wrong_cache_slot_fails_the_replay(sdpa_folder, tmp_path):
    """The state checks can fail: one expected cache element moved by far more than its bound."""
    import shutil

    folder = tmp_path / "edited"
    shutil.copytree(sdpa_folder, folder)
    arrays = dict(np.load(folder / "expected.npz"))
    state = next(o["name"] for o in json.loads((folder / "manifest.json").read_text())["outputs"]
                 if o["name"].startswith("state"))
    arrays[f"{state}.expected"].reshape(-1)[0] += 1.0
    np.savez_compressed(folder / "expected.npz", **arrays)
    replayed = _replay(folder)
    assert replayed["status"] == "FAIL_NUMERIC" and not replayed["same_verdict"]
    assert {o["output"]: o["mismatches"] for o in replayed["outputs"]}[state] == 1


def test_a_buffer_node_exports_to_amber_and_passes_there(et_tree, tmp_path):
    assert cli.main(["repro", "llama_proj[4w-vulkan-buffer]", "--node", "0", "-o", str(tmp_path),
                     "--et-src", str(et_tree)]) == 0
    script = parse(write_amber(tmp_path).read_text())
    assert not execute(script, create_device(*first_adapter()))


def test_host_work_and_missing_nodes_are_refused_in_one_line(et_ctx, et_tree, tmp_path, capsys):
    case = _prepared("llama_proj[4w-vulkan]")
    with pytest.raises(NodeReproError, match=r"--node 99: .* has nodes 0 to \d+"):
        repro_node(et_ctx, *case, tmp_path, node=99, tree=et_tree)
    with pytest.raises(NodeReproError, match="every node is within tolerance .* --node N"):
        repro_node(et_ctx, *case, tmp_path, tree=et_tree)
    assert cli.main(["repro", GENERATION, "--node", "5", "-o", str(tmp_path), "--et-src", str(et_tree)]) == 1
    assert "produces no tensor (host work on SymInts)" in capsys.readouterr().out
    with pytest.raises(NodeReproError, match=r"--step 9: .* makes 5 calls \(steps 0 to 4\)"):
        repro_node(et_ctx, *_prepared(GENERATION), tmp_path, node=SDPA, step=9, tree=et_tree)


def test_node_is_for_model_cases(et_tree, tmp_path, capsys):
    code = cli.main(["repro", "linear_q4gsw[M13-K256-N40-g32-fp32-buffer]", "--node", "1", "-o", str(tmp_path),
                     "--et-src", str(et_tree)])
    assert code == 2 and "--node and --step are for model cases" in capsys.readouterr().err


def test_a_cache_slot_written_past_the_update_is_counted_not_judged():
    """ET-VK's kv cache update zero-fills past the update up to its dispatch's rounding (by design)."""
    from vkdiff.datamodel import Tolerance
    from vkdiff.verdicts.nodes import state_entry

    before = np.array([1.0, 2.0, np.nan, np.nan], np.float32)
    expected = np.array([1.0, 2.0, 3.0, np.nan])
    entry = state_entry(5, before, expected, np.array([1.0, 2.0, 3.0, 0.0], np.float32), Tolerance.for_dtype("float32"))
    assert (entry["status"], entry["stray"], entry["slots_compared"]) == ("PASS", 1, 3)
    entry = state_entry(5, before, expected, np.array([1.0, 2.5, 3.0, 0.0], np.float32), Tolerance.for_dtype("float32"))
    assert (entry["status"], entry["mismatches"]) == ("FAIL_NUMERIC", 1)
