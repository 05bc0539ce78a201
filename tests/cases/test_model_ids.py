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
