"""Repro folders replay a kernel case's verdict with numpy and wgpu only; their Amber scripts parse and run."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from tests.harness.amber_subset import execute, parse
from tests.testutils import first_adapter, requires_pinned_tree, requires_vulkan
from vkdiff.device.adapters import create_device
from vkdiff.harness import cli
from vkdiff.harness.amber import AmberExportError, amber_script, write_amber

pytestmark = [requires_vulkan, requires_pinned_tree]
PASSING = "linear_q4gsw[M13-K256-N40-g32-fp32-buffer]"
FAILING = "apply_rotary_emb[T5-Hq4-Hkv2-D6-fp32-buffer]"
"""``etvk-rope-buffer-head-dim-off-texel-boundary``: FAIL_NUMERIC on every device."""
CHANNELS = "mul[B2-H5-W13-fp32-buffer-channels-bcast_w]"
"""A channels-packed buffer output: read raw through its element index."""
TEXTURE = "apply_rotary_emb[T5-Hq4-Hkv2-D12-fp32-texture3d]"
"""``etvk-rope-head-dim-4-mod-8-unwritten``: FAIL_CHECK, features never written."""


@pytest.fixture(scope="module")
def folders(tmp_path_factory, et_tree):
    made = {}
    for case in (PASSING, FAILING, TEXTURE, CHANNELS):
        out = tmp_path_factory.mktemp("repro")
        assert cli.main(["repro", case, "-o", str(out), "--et-src", str(et_tree)]) == 0
        made[case] = out
    return made


def _replay(folder) -> dict:
    done = subprocess.run([sys.executable, str(folder / "run_repro.py"), str(folder)], capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case,status", [(PASSING, "PASS"), (FAILING, "FAIL_NUMERIC"), (TEXTURE, "FAIL_CHECK"),
                                         (CHANNELS, "PASS")])
def test_the_folder_replays_the_recorded_verdict(folders, case, status):
    replayed = _replay(folders[case])
    assert replayed["recorded"]["status"] == status
    assert replayed["status"] == status and replayed["same_verdict"]


def test_the_runner_needs_only_numpy_and_wgpu(folders):
    tree = ast.parse((folders[PASSING] / "run_repro.py").read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= {"__future__", "argparse", "json", "sys", "pathlib", "numpy", "wgpu"}


@pytest.mark.parametrize("case,passes", [(PASSING, True), (FAILING, False), (CHANNELS, True)])
def test_the_amber_export_parses_and_runs_to_the_same_verdict(folders, case, passes):
    script = parse(write_amber(folders[case]).read_text())
    assert script.shaders and any(c[0] == "RUN" for c in script.commands)
    failed = execute(script, create_device(*first_adapter()))
    assert (not failed) == passes, failed[:3]


def test_texture_traces_are_not_exported_to_amber(folders):
    with pytest.raises(AmberExportError, match="uses .* textures; the Amber export covers buffer traces"):
        amber_script(folders[TEXTURE])
