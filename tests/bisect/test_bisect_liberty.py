"""``bisect liberty``: the smallest set of the strict profile's rules under which a case fails, searched over any
evaluation (here a stand-in whose failing sets are known), and on lavapipe through raw Vulkan."""

from __future__ import annotations

from tests.testutils import isolated, requires_tree, requires_vulkan
from vkdiff.bisect.liberty import bisect_liberties
from vkdiff.datamodel import Status

RULES = ("tanh", "pow", "division", "contraction", "subnormal_flush")


def fails_when(*needed: set[str], status: Status = Status.FAIL_PORTABILITY, unsupported: str = ""):
    """An evaluation failing where the rule set holds any of ``needed`` (NOT_SUPPORTED where it holds
    ``unsupported``)."""
    def evaluate(rules: tuple[str, ...]) -> Status:
        if unsupported and unsupported in rules:
            return Status.NOT_SUPPORTED
        return status if any(need <= set(rules) for need in needed) else Status.PASS
    return evaluate


def test_one_rule_is_named_and_every_rule_that_fails_alone_listed():
    found = bisect_liberties("strict", RULES, fails_when({"division"}, {"contraction"}))
    assert found.culprit == ("division",) and found.alone == ("division", "contraction")
    assert "smallest set of liberties that turns PASS into FAIL_PORTABILITY: division" in found.lines()[1]


def test_a_pair_needed_together_is_found_by_taking_rules_out():
    found = bisect_liberties("strict", RULES, fails_when({"contraction", "subnormal_flush"}))
    assert found.culprit == ("contraction", "subnormal_flush") and not found.alone
    assert len(found.trials) <= 2 + len(RULES) * 2


def test_a_set_that_cannot_run_says_nothing_and_the_status_kept_is_the_full_sets():
    found = bisect_liberties("strict", RULES, fails_when({"pow", "tanh"}, status=Status.FAIL_NAN,
                                                         unsupported="contraction"))
    assert found.status == "FAIL_NAN" and found.culprit == ("tanh", "pow") or found.status == "NOT_SUPPORTED"


def test_nothing_to_find_when_the_case_passes_under_the_profile_or_fails_without_it():
    passing = bisect_liberties("mali", RULES, lambda rules: Status.PASS)
    assert passing.culprit == () and "passes under every liberty" in passing.lines()[-1]
    broken = bisect_liberties("strict", RULES, lambda rules: Status.FAIL_NUMERIC)
    assert broken.culprit == () and "FAIL_NUMERIC without any liberty" in broken.lines()[-1]


def bisect_in_child(case: str, tree: str) -> tuple[int, str]:
    """In the child: ``vkdiff bisect liberty`` on raw Vulkan (a process that ran wgpu work may not drive raw Vulkan:
    ``testutils.isolated``); its exit code and what it printed."""
    import contextlib
    import io

    from vkdiff.entry import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["bisect", "liberty", case, "--transport", "vulkan", "--et-src", tree])
    return code, out.getvalue()


@requires_vulkan
@requires_tree
def test_bisect_liberty_names_the_flush_that_zeroes_dq8ca_half_scales(et_tree):
    """The float16 dq8ca GEMM stores input scale * weight scale (2.9e-5) in float16: PASS as lavapipe computes, wrong
    once float16 subnormals flush, and no other rule matters."""
    code, out = isolated(bisect_in_child, "linear_dq8ca_q4gsw[M4-K4096-N64-g128-fp16-buffer]", str(et_tree))
    assert code == 1, out
    assert "PASS with no liberty taken" in out and "turns PASS into FAIL_NUMERIC: subnormal_flush" in out


def test_a_portability_finding_needs_no_bisect_unless_the_device_shows_it():
    found = bisect_liberties("strict", RULES, lambda rules: Status.FAIL_PORTABILITY)
    assert found.culprit == () and "its verdict names the rule" in found.lines()[-1]
    shows = bisect_liberties("strict", RULES, lambda rules: Status.FAIL_NAN if {"division", "subnormal_flush"} <= set(
        rules) else Status.FAIL_PORTABILITY)
    assert shows.culprit == ("division", "subnormal_flush")
    assert "turns FAIL_PORTABILITY into FAIL_NAN: division + subnormal_flush" in shows.lines()[1]
