"""A GPU runner or a phone: programs judged in a venv without torch, executorch or torchao, and without glslc.

The lowering machine (this interpreter) saves artifacts with ``vkdiff check SUBJECT
--save-artifacts``; the runner (``tests.runner_venv``: only vkdiff's own dependencies,
``PATH`` holding no compiler, an empty cache) checks them through each transport.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.datamodel import Status
from vkdiff.store import read

pytestmark = [requires_vulkan, requires_tree]
PROGRAMS = Path(__file__).parents[1] / "programs"
TRANSPORTS = ("wgpu", "vulkan")


@pytest.fixture(scope="module")
def runner_python(tmp_path_factory) -> Path:
    from tests.runner_venv import build

    return build(tmp_path_factory.mktemp("runner") / "venv")


def _vkdiff(python: Path | str, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "vkdiff.entry.cli", *argv], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=900)


def _saved(two_partitions, et_tree, folder: Path, subject: str) -> Path:
    """``vkdiff check SUBJECT --save-artifacts`` where the full stack is installed."""
    pte, etrecord = two_partitions
    argv = {"pte": [str(pte), "--etrecord", str(etrecord)],
            "module": [f"{PROGRAMS / 'factories.py'}:two_partitions", "--recipe", "4w"],
            "llama": ["--llama", str(PROGRAMS / "tiny_params.json"), "--qmode", "4w", "--decode-steps", "3"]}[subject]
    done = _vkdiff(sys.executable, "check", *argv, "--et-src", str(et_tree), "--results", str(folder / "save.jsonl"),
                   "--save-artifacts", str(folder / "artifacts"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "artifacts: vulkan: " in done.stderr and "artifacts: wgpu: " in done.stderr, done.stderr[-2000:]
    return folder / "artifacts"


def _runner_env(python: Path, cache: Path, transport: str) -> dict[str, str]:
    """No compiler on PATH (only the venv's python), an empty cache, one transport."""
    return {"PATH": str(python.parent), "VKDIFF_CACHE_DIR": str(cache), "VKDIFF_TRANSPORT": transport,
            "PYTHONPATH": "", "VKDIFF_SCHEMA_PATH": ""}


@pytest.mark.parametrize("subject", ["pte", "module", "llama"])
def test_saved_artifacts_pass_on_a_runner_without_torch_executorch_or_glslc(subject, runner_python, two_partitions,
                                                                           et_tree, tmp_path):
    """Each transport is a runner of the matrix; their results merge into one report and one device bisection."""
    folder = _saved(two_partitions, et_tree, tmp_path, subject)
    manifest = json.loads((folder / "artifacts.json").read_text())
    assert any(name.startswith("cache/spv/") for name in manifest["shaders"])
    for transport in TRANSPORTS:
        out = tmp_path / f"{transport}.jsonl"
        done = _vkdiff(runner_python, "check", str(folder), "--et-src", str(et_tree), "--results", str(out),
                       env=_runner_env(runner_python, tmp_path / f"cache-{transport}", transport))
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        [result] = read([out]).results
        assert result.status == Status.PASS.name, (transport, result.reason)
        assert result.device_info["transport"] == transport
        if subject != "llama":
            assert all(node.get("source") for node in result.metrics["nodes"]), "sources (the ETRecord's) not carried"
        failed = {k: v for k, v in result.device_info["traits"].items() if isinstance(v, dict) and "error" in v}
        assert not failed, f"{transport}: trait probes needed a compiler: {failed}"
    runs = [str(tmp_path / f"{t}.jsonl") for t in TRANSPORTS]
    done = _vkdiff(runner_python, "report", *runs, "-o", str(tmp_path / "report"), env={"PYTHONPATH": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    page = (tmp_path / "report" / "cross-device.html").read_text()
    assert all(slug in page for slug in ("llvmpipe", "llvmpipe-vulkan")) and result.case in page
    done = _vkdiff(runner_python, "bisect", "device", result.case, "--results", *runs, env={"PYTHONPATH": ""})
    assert done.returncode == 0 and "PASS: everywhere (2 configurations)" in done.stdout, done.stdout + done.stderr


def test_the_runner_venv_cannot_import_lowering(runner_python):
    done = subprocess.run([str(runner_python), "-c", "import torch"], capture_output=True, text=True)
    assert done.returncode != 0 and "No module named 'torch'" in done.stderr
    done = subprocess.run([str(runner_python), "-c", "import executorch"], capture_output=True, text=True)
    assert done.returncode != 0 and "No module named 'executorch'" in done.stderr


def test_a_users_pte_with_a_host_op_between_two_partitions_passes_without_torch(runner_python, two_partitions,
                                                                              et_tree, tmp_path):
    pte, _ = two_partitions
    for transport in TRANSPORTS:
        out = tmp_path / f"{transport}.jsonl"
        done = _vkdiff(runner_python, "check", str(pte), "--et-src", str(et_tree), "--results", str(out),
                       env={"VKDIFF_TRANSPORT": transport, "PYTHONPATH": "", "VKDIFF_SCHEMA_PATH": ""})
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        [result] = read([out]).results
        assert result.status == Status.PASS.name, (transport, result.reason)
        kinds = [n.get("delegate") for n in result.metrics["nodes"]]
        assert sorted(set(kinds)) == [0, 1], kinds


def test_a_pte_with_a_tree_that_lacks_the_program_schema_is_one_line(runner_python, two_partitions, et_tree,
                                                                    tmp_path):
    pte, _ = two_partitions
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "backends").symlink_to(et_tree / "backends")
    done = _vkdiff(runner_python, "check", str(pte), "--et-src", str(tree), "--results", str(tmp_path / "r.jsonl"),
                   env={"PYTHONPATH": "", "VKDIFF_SCHEMA_PATH": ""})
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith(f"vkdiff: error: {pte.name}: reading this program needs "
                                                           f"schema/program.fbs")
