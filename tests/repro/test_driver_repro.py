"""A FAIL_DRIVER kernel result comes with its repro folder and Amber script, written as the run goes (#34)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

from tests.repro.amber_subset import execute, parse
from tests.testutils import first_adapter, requires_tree, requires_vulkan
from vkdiff.cases.kernels import all_cases
from vkdiff.device.shaders.trees import TreeChoice
from vkdiff.device.transports.adapters import create_device
from vkdiff.entry import cli
from vkdiff.harness import kernels as harness_kernels
from vkdiff.harness.runner import Runner
from vkdiff.repro.driver import write_driver_repro

LOG10_SUBNORMAL = "log10[C3-H5-W6-fp32-buffer-subnormal]"
"""Holds infinities (log10 of inf and of 0) that an Amber script cannot state."""
SIN = "sin[C3-H5-W6-fp32-buffer]"


@requires_tree
@requires_vulkan
def test_a_driver_failure_writes_its_repro_as_the_run_goes(et_tree, tmp_path, monkeypatch):
    """(The device's own verdict is made FAIL_DRIVER here, so that the test holds on every device.)"""
    real = harness_kernels.run_case

    def judged_a_driver_bug(ctx, case, **kwargs):
        result = real(ctx, case, **kwargs)
        result.status = "FAIL_DRIVER"
        return result

    monkeypatch.setattr(harness_kernels, "run_case", judged_a_driver_bug)
    (case,) = all_cases("^" + SIN.replace("[", r"\[").replace("]", r"\]") + "$")
    runner = Runner(tree=TreeChoice(path=et_tree, note="pinned"), adapters=[first_adapter()],
                    on_driver_bug=functools.partial(write_driver_repro, root=str(tmp_path / "run.repro"),
                                                    session_seed=0))
    (result,) = runner.run(case, runner.slugs[0])
    made = result.metrics["driver_repro"]
    folder = tmp_path / "run.repro" / f"sin_C3-H5-W6-fp32-buffer_@{runner.slugs[0]}"
    assert made["folder"] == str(folder) and (folder / "run_repro.py").exists() and made["amber"]
    replayed = subprocess.run([sys.executable, str(folder / "run_repro.py"), str(folder)], capture_output=True,
                              text=True)
    assert json.loads(replayed.stdout.strip().splitlines()[-1])["status"] == "PASS"
    assert not execute(parse((folder / "case.amber").read_text()), create_device(*first_adapter()))


@requires_tree
@requires_vulkan
def test_infinite_data_is_declared_as_words_and_infinite_expectations_left_to_the_replay(et_tree, tmp_path):
    assert cli.main(["repro", LOG10_SUBNORMAL, "-o", str(tmp_path), "--et-src", str(et_tree), "--amber"]) == 0
    script = (tmp_path / "case.amber").read_text()
    assert "DATA_TYPE uint32 DATA" in script and "inf expected, which Amber cannot state" in script
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    failed = execute(parse(script), create_device(*first_adapter()))
    assert bool(failed) == (manifest["verdict"]["tolerance_status"] != "PASS"), failed[:3]
