"""SIGINT and SIGTERM during a run: stop after the cases in flight, keep every result, summarise, exit 128+N."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.testutils import main_tree, requires_tree, requires_vulkan
from vkdiff.cases.kernels import all_cases

pytestmark = [requires_tree, requires_vulkan]

FORTY = (r"^(linear_q4gsw\[M\d+-K(64|256)-N40-g32-fp(32|16)-(buffer|texture3d)\]"
         r"|embedding_q4gsw\[V256-)")


def test_the_selection_is_forty_kernel_cases():
    assert len(all_cases(FORTY)) == 40


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_mid_run_keeps_results_and_summarises(tmp_path, signum, code):
    results = tmp_path / "r.jsonl"
    run = subprocess.Popen([sys.executable, "-m", "vkdiff.entry.cli", "run", "--suite", "kernels", "--cases", FORTY,
                            "--et-src", main_tree()[0], "--results", str(results)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "COLUMNS": "200"})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not results.exists() or results.read_text().count("\n") < 3):
        time.sleep(0.02)
    run.send_signal(signum)
    out, err = run.communicate(timeout=120)
    assert run.returncode == code, err
    lines = results.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert 3 <= len(records) < 40
    assert f"stopped by {signal.Signals(signum).name} after {len(records)} results" in err
    assert f"results: {results}" in err and "vkdiff summary" in err and "Traceback" not in err
    statuses = {r["status"] for r in records}
    assert "PASS" in statuses and statuses <= {"PASS", "NOT_SUPPORTED"}, "no case was cut short by the signal"
