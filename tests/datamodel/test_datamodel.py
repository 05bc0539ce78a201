"""The data model: statuses, the merge rule, clipping, and that it is a leaf."""

from __future__ import annotations

from vkdiff.datamodel import CRASH_FLAG, Result, Status, clip, merge


def _r(status: str, time: str, **fields) -> Result:
    return Result(**{"case": "op[c]", "op": "op", "device": "llvmpipe", "status": status, "time": time, **fields})


def test_status_predicates():
    assert Status.PASS.is_success()
    assert Status.NOT_RUN.is_skip() and not Status.NOT_RUN.is_failure()
    assert all(s.is_failure() for s in (Status.FAIL_NUMERIC, Status.ERROR, Status.BUILD_FAIL, Status.FAIL_CHECK))


def test_clip_keeps_both_ends():
    text = "a" * 300 + "MIDDLE" + "z" * 300
    clipped = clip(text)
    assert clipped.startswith("a" * 200) and clipped.endswith("z" * 200) and "MIDDLE" not in clipped
    assert clip(None) == "" and clip(12) == "12"


def test_merge_keeps_the_latest_per_key_by_time_then_reading_order():
    old, new = _r("FAIL_NUMERIC", "2026-01-01T00:00:00+00:00"), _r("PASS", "2026-01-02T00:00:00+00:00")
    tie_a, tie_b = _r("ERROR", "2026-01-02T00:00:00+00:00"), _r("NOT_RUN", "2026-01-02T00:00:00+00:00")
    assert [r.status for r in merge([new, old])[0]] == ["FAIL_NUMERIC", "PASS"]
    assert merge([tie_a, tie_b])[0][-1].status == "NOT_RUN"


def test_merge_keys_on_rule_node_and_device():
    results = [_r("PASS", "t", rule="numerics"), _r("PASS", "t", rule="expected_fusions"),
               _r("PASS", "t", node={"index": 2}), _r("PASS", "t", device="nvidia-h200"), _r("PASS", "t")]
    assert len(merge(results)) == 5


def test_crash_supersedes_what_the_dead_worker_left_of_that_item():
    partial = _r("PASS", "2026-01-01T00:00:00+00:00", rule="numerics")
    other_device = _r("PASS", "2026-01-01T00:00:00+00:00", device="cpu")
    crash = _r("ERROR", "2026-01-01T00:00:00+00:00", flags=[CRASH_FLAG])
    rerun = _r("PASS", "2026-01-03T00:00:00+00:00", rule="expected_fusions")
    kept = {(g[-1].rule, g[-1].device, g[-1].status) for g in merge([crash, partial, other_device, rerun])}
    assert kept == {("", "llvmpipe", "ERROR"), ("", "cpu", "PASS"), ("expected_fusions", "llvmpipe", "PASS")}
