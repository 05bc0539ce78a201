"""Results store: append as it happens, load many files, survive a torn line."""

from __future__ import annotations

import json

from vkdiff.harness.status import Status
from vkdiff.harness.store import Result, ResultStore, clip, load


def _result(i: int, status: Status = Status.PASS) -> Result:
    return Result(case=f"op[c{i}]", op="op", variant="fp32", device="llvmpipe", status=status.name,
                  metrics={"sqnr_db": float("inf"), "max_abs": 0.5})


def test_append_is_visible_immediately_and_loads_back(tmp_path):
    store = ResultStore(tmp_path / "sub" / "r.jsonl")
    store.append(_result(0))
    assert len((tmp_path / "sub" / "r.jsonl").read_text().splitlines()) == 1
    store.append(_result(1, Status.FAIL_NUMERIC))
    loaded = list(load([store.path]))
    assert [r.case for r in loaded] == ["op[c0]", "op[c1]"]
    assert loaded[1].verdict is Status.FAIL_NUMERIC
    assert loaded[0].metrics["sqnr_db"] == "inf"
    assert loaded[0].time


def test_torn_last_line_is_skipped_and_files_merge(tmp_path):
    a, b = ResultStore(tmp_path / "a.jsonl"), ResultStore(tmp_path / "b.jsonl")
    a.append(_result(0))
    b.append(_result(1))
    with open(b.path, "a") as handle:
        handle.write(json.dumps({"case": "torn"})[:10])
    assert [r.case for r in load([a.path, b.path])] == ["op[c0]", "op[c1]"]


def test_clip_keeps_both_ends():
    text = "a" * 300 + "MIDDLE" + "z" * 300
    clipped = clip(text)
    assert clipped.startswith("a" * 200) and clipped.endswith("z" * 200) and "MIDDLE" not in clipped


def test_status_predicates():
    assert Status.PASS.is_success()
    assert Status.NOT_RUN.is_skip() and not Status.NOT_RUN.is_failure()
    assert all(s.is_failure() for s in (Status.FAIL_NUMERIC, Status.ERROR, Status.BUILD_FAIL, Status.FAIL_CHECK))
