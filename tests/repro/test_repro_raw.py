"""Repro through the raw Vulkan transport: the folder holds glslc's SPIR-V with its spec constants and workgroup size
per dispatch, replays through the raw transport, and its Amber script specialises each pipeline. Recording runs in
a process of its own (``testutils.isolated``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.testutils import isolated, requires_tree, requires_vulkan

ROOT = Path(__file__).resolve().parents[2]
CASES = ("linear_q4gsw[M13-K256-N40-g32-fp32-buffer]", "linear_dq8ca_q4gsw[M13-K256-N64-g32-fp32-texture3d]")


def record_raw(tree: Path, case: str, out: Path) -> int:
    """In the child: ``vkdiff repro CASE --amber`` with ``$VKDIFF_TRANSPORT=vulkan`` (read once, at the top)."""
    from vkdiff.datamodel.settings import ENVIRONMENT
    from vkdiff.entry import cli

    os.environ[ENVIRONMENT["transport"]] = "vulkan"
    return cli.main(["repro", case, "-o", str(out), "--et-src", str(tree), "--amber"])


@requires_tree
@requires_vulkan
def test_a_raw_vulkan_repro_replays_its_verdict_exactly(et_tree, tmp_path):
    for index, case in enumerate(CASES):
        out = tmp_path / f"r{index}"
        assert isolated(record_raw, et_tree, case, out) == 0
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["transport"] == "vulkan"
        dispatches = [op for op in manifest["ops"] if op["op"] == "dispatch"]
        assert dispatches and all("spec" in op and len(op["local_size"]) == 3 for op in dispatches)
        done = subprocess.run([sys.executable, str(out / "run_repro.py"), str(out)], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
        replayed = json.loads(done.stdout.strip().splitlines()[-1])
        assert replayed["status"] == "PASS" and replayed["same_verdict"], replayed
        assert replayed["driver"].startswith("raw Vulkan")
        script = (out / "case.amber").read_text()
        assert script.count("SPECIALIZE 0 AS uint32") == len(dispatches)
        if "texture3d" in case:
            assert "AS combined_image_sampler SAMPLER etvk_sampler" in script
