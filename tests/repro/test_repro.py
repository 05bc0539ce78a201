"""Repro folders replay a kernel case's verdict with numpy and wgpu only; their Amber scripts parse and run."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest

from tests.repro.amber_subset import execute, parse
from tests.testutils import first_adapter, requires_tree, requires_vulkan
from vkdiff.device.transports.adapters import create_device
from vkdiff.entry import cli
from vkdiff.repro.amber import AmberExportError, _float, amber_script, write_amber

pytestmark = [requires_vulkan, requires_tree]
PASSING = "linear_q4gsw[M13-K256-N40-g32-fp32-buffer]"
FAILING = "apply_rotary_emb[T5-Hq4-Hkv2-D6-fp32-buffer]"
"""``etvk-rope-buffer-head-dim-off-texel-boundary``: FAIL_NUMERIC on every device."""
TEXTURE_PASSING = "linear_dq8ca_q4gsw[M13-K256-N64-g32-fp32-texture3d]"
CHANNELS = "mul[B2-H5-W13-fp32-buffer-channels-bcast_w]"
"""A channels-packed buffer output: read raw through its element index."""
TEXTURE = "apply_rotary_emb[T5-Hq4-Hkv2-D12-fp32-texture3d]"
"""``etvk-rope-head-dim-4-mod-8-unwritten``: FAIL_CHECK, features never written."""


@pytest.fixture(scope="module")
def folders(tmp_path_factory, et_tree):
    made = {}
    for case in (PASSING, FAILING, TEXTURE, CHANNELS, TEXTURE_PASSING):
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
    """vkdiff itself only for folders recorded through raw Vulkan (imported there, and nowhere else)."""
    tree = ast.parse((folders[PASSING] / "run_repro.py").read_text())

    def imports(node) -> set[str]:
        found = {alias.name.split(".")[0] for n in ast.walk(node) if isinstance(n, ast.Import) for alias in n.names}
        return found | {n.module.split(".")[0] for n in ast.walk(node) if isinstance(n, ast.ImportFrom)}

    raw = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "open_raw_device")
    assert imports(raw) == {"vkdiff"}
    tree.body.remove(raw)
    assert imports(tree) <= {"__future__", "argparse", "json", "sys", "pathlib", "numpy", "wgpu"}


AMBER_CASES = [(PASSING, True), (FAILING, False), (CHANNELS, True), (TEXTURE_PASSING, True), (TEXTURE, False)]


@pytest.mark.parametrize("case,passes", AMBER_CASES)
def test_the_amber_export_parses_and_runs_to_the_same_verdict(folders, case, passes):
    script = parse(write_amber(folders[case]).read_text())
    assert script.shaders and any(c[0] == "RUN" for c in script.commands)
    failed = execute(script, create_device(*first_adapter()))
    assert (not failed) == passes, failed[:3]


def test_texture_outputs_are_checked_a_texel_at_a_time(folders):
    """Amber compares an image a whole texel at a time: one EXPECT per texel, its elements' leading components."""
    script = amber_script(folders[TEXTURE])
    assert "IMAGE r" in script and "AS sampled_image" in script and "AS storage_image" in script
    texel_expects = [ln for ln in script.splitlines() if ln.startswith("EXPECT") and len(ln.split("EQ ")[1].split()) > 1]
    assert texel_expects


@pytest.mark.parametrize("value,literal", [(1.0, "1.0"), (1e-05, "1.0e-05"), (-2.5e-07, "-2.5e-07"),
                                           (float("nan"), "nan"), (3.0e20, "3.0e+20")])
def test_float_literals_are_what_amber_tokenizes_as_floats(value, literal):
    assert _float(value) == literal


def test_an_infinity_cannot_be_stated_in_amber():
    with pytest.raises(AmberExportError, match="infinity"):
        _float(float("inf"))


AMBER = os.environ.get("VKDIFF_AMBER", "")
requires_amber = pytest.mark.skipif(not (AMBER and os.access(AMBER, os.X_OK)),
                                    reason="NOT_RUN: no Amber binary ($VKDIFF_AMBER names one; google/amber builds "
                                           "without SPIRV-Tools or shaderc for these SPIRV-HEX scripts)")


@requires_amber
@pytest.mark.parametrize("case,passes", AMBER_CASES)
def test_amber_itself_runs_the_export_to_the_same_verdict(folders, case, passes):
    done = subprocess.run([AMBER, "-d", str(write_amber(folders[case]))], capture_output=True, text=True, timeout=600)
    assert ("Summary: 1 pass, 0 fail" in done.stdout) == passes, done.stdout[-2000:]
