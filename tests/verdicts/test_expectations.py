"""Known upstream bugs: shown as known, never skipped; a fixed bug is an unexpected pass."""

from __future__ import annotations

from vkdiff.verdicts import expectations
from vkdiff.datamodel import Result

EXP = expectations.Expectation(id="bug-1", case=r"^model\[", rule=("rule",), status=("FAIL_CHECK",),
                               signature="packed 2 times", reason="upstream bug")


def _result(status: str, reason: str = "", rule: str = "rule") -> Result:
    return Result(case="model[a]", op="model", variant="x", rule=rule, device="cpu", status=status, reason=reason)


def test_matching_failure_is_known_and_not_a_failure():
    result = expectations.annotate(_result("FAIL_CHECK", "weight packed 2 times"), [EXP])
    assert result.expectation["outcome"] == "known"
    assert not expectations.counts_as_failure(result)


def test_fixed_bug_is_an_unexpected_pass():
    result = expectations.annotate(_result("PASS"), [EXP])
    assert result.expectation["outcome"] == "unexpected-pass"
    assert expectations.counts_as_failure(result)


def test_other_failure_is_not_explained():
    result = expectations.annotate(_result("FAIL_CHECK", "something else"), [EXP])
    assert not result.expectation and expectations.counts_as_failure(result)
    assert not expectations.annotate(_result("PASS", rule="other"), [EXP]).expectation


def test_data_file_loads():
    loaded = expectations.load()
    assert loaded and all(e.id and e.case and e.status for e in loaded)
    assert all(isinstance(e.rule, tuple) for e in loaded)
