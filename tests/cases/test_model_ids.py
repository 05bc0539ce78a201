"""The model case ids kept as data (``vkdiff/cases/model_ids.txt``) are the catalogue's, in its order."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.cases.catalog import all_model_cases
from vkdiff.cases.model_ids import matches_a_model_case, model_ids
from vkdiff.store import read

REGENERATE = ("python -c \"from vkdiff.cases.catalog import all_model_cases; "
              "print('\\n'.join(c.id for c in all_model_cases()))\" > vkdiff/cases/model_ids.txt")


def test_the_ids_file_is_the_catalogue():
    assert model_ids() == tuple(c.id for c in all_model_cases()), f"regenerate it: {REGENERATE}"


def test_a_kernel_pattern_selects_no_model_case_and_a_model_pattern_does():
    assert not matches_a_model_case(r"^add\[B1-H7-W64-fp32-buffer\]$")
    assert matches_a_model_case(r"^tiny_llama\[")
    assert matches_a_model_case(None)


@requires_vulkan
@requires_tree
def test_a_kernel_only_run_imports_neither_torch_nor_executorch(et_tree, tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import sys\nfor name in ('torch', 'executorch', 'torchao'):\n"
                                               "    sys.modules[name] = None\n")
    out = tmp_path / "r.jsonl"
    done = subprocess.run([sys.executable, "-m", "vkdiff.entry.cli", "run", "--cases", r"^add\[B1-H7-W64-fp32-buffer\]$",
                           "--et-src", str(et_tree), "--results", str(out)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()])}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    [result] = read([out]).results
    assert result.status == "PASS", result.reason


@requires_vulkan
@requires_tree
def test_a_runner_without_the_lowering_extra_runs_its_kernel_cases_and_lists_its_model_cases_not_run(et_tree, tmp_path):
    """executorch made unimportable (a GPU runner with torch but without ``vkdiff[lower]``): the model case selected
    is a ``NOT_RUN`` host result naming what is missing, the kernel case still runs, and nothing raises."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['executorch'] = None\n")
    out = tmp_path / "r.jsonl"
    done = subprocess.run([sys.executable, "-m", "vkdiff.entry.cli", "run", "--results", str(out), "--et-src",
                           str(et_tree), "--cases", r"^add\[B1-H7-W64-fp32-buffer\]$|^llama_proj\[4w-vulkan\]$"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()])})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    by_case = {r.case: r for r in read([out]).results}
    assert by_case["add[B1-H7-W64-fp32-buffer]"].status == "PASS"
    model = by_case["llama_proj[4w-vulkan]"]
    assert (model.status, model.device) == ("NOT_RUN", "cpu")
    assert "not installed here: executorch (" in model.reason and "--from-artifacts" in model.reason
