"""Every outcome the plugin maps a verdict to, pushed through pytest with pytester and asserted.

A conftest replaces execution through ``pytest_vkdiff_run_item`` (the hook users wrap it with)
and returns chosen results, passed through ``annotate`` as the default runner does, so these
tests exercise the plugin's wiring, not the kernels.
"""

from __future__ import annotations

import pytest

from tests.testutils import main_tree, requires_tree, requires_vulkan

pytest_plugins = ["pytester"]
pytestmark = [requires_vulkan, requires_tree]

CASES = r"^linear_dq8ca_q4gsw\[M1-K256-N64-g32-fp32-|^linear_q4gsw\[M1-K64-N40-g32-fp32-"
RESULTS = '''
import pytest
from vkdiff.datamodel import Result
from vkdiff.verdicts.expectations import annotate

COOP = "linear_dq8ca_q4gsw_coop_buffer_texture2d_float_zpint8"
CHOSEN = {{
    "linear_q4gsw[M1-K64-N40-g32-fp32-buffer]": [("FAIL_NUMERIC", "", "Mismatched elements: 3 / 40 (7.5%)", "", 0.1)],
    "linear_dq8ca_q4gsw[M1-K256-N64-g32-fp32-buffer]": [("FAIL_NUMERIC", "", "Mismatched elements: 64 / 64 (100%)",
                                                          COOP, 0.006)],
    "linear_dq8ca_q4gsw[M1-K256-N64-g32-fp32-texture3d]": [("PASS", "", "", COOP, 0.0)],
    "linear_q4gsw[M1-K64-N40-g32-fp32-texture3d]": [("PASS", "numerics", "", "", 0.0),
                                                      ("NOT_RUN", "zero_point_dtype", "binding not checked", "", None)],
}}

@pytest.hookimpl(tryfirst=True)
def pytest_vkdiff_run_item(item, session):
    chosen = CHOSEN.get(item.case.id) if {mode!r} == "mixed" else [("NOT_RUN", "", "no launcher for it", "", None)]
    return [annotate(Result(case=item.case.id, op=item.case.op, device=item.device, status=status, rule=rule,
                            variant=item.case.variant, reason=reason, shader=shader,
                            metrics={{}} if error is None else {{"max_abs": error, "mismatches": 64}}))
            for status, rule, reason, shader, error in chosen]
'''


def _run(pytester, mode: str):
    pytester.makeconftest(RESULTS.format(mode=mode))
    return pytester.runpytest_subprocess("-p", "no:xdist", "--vkdiff", "--vkdiff-suite", "kernels", "--vkdiff-cases",
                                         CASES, f"--et-src={main_tree()[0]}", "-rA")


def test_a_failure_a_known_bug_an_unexpected_pass_and_a_partly_run_item(pytester):
    result = _run(pytester, "mixed")
    result.assert_outcomes(failed=2, xfailed=1, skipped=1)
    result.stdout.fnmatch_lines_random([
        "FAILED linear_q4gsw?M1-K64-N40-g32-fp32-buffer?@* - FAIL_NUMERIC*",
        "XFAIL linear_dq8ca_q4gsw?M1-K256-N64-g32-fp32-buffer?@* - known etvk-dq8ca-gemv-is-weight-only*",
        "FAILED linear_dq8ca_q4gsw?M1-K256-N64-g32-fp32-texture3d?@* - PASS*",
        "*UNEXPECTED PASS: expectation etvk-dq8ca-gemv-is-weight-only may be fixed upstream*",
        "SKIPPED*1 of 2 checks did not run (zero_point_dtype NOT_RUN: binding not checked); the other 1 passed*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_session_where_nothing_ran_fails(pytester):
    result = _run(pytester, "nothing")
    result.assert_outcomes(skipped=4)
    result.stdout.fnmatch_lines(["*warning: no kernel case ran: all 4 kernel results are NOT_RUN or NOT_SUPPORTED*"
                                 "the session fails*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
