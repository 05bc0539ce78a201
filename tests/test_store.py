"""Results store: append as it happens, load many files, survive a torn line."""

from __future__ import annotations

import json

from vkdiff.datamodel import Result, Status
from vkdiff.store import ResultStore, load


def _result(i: int, status: Status = Status.PASS) -> Result:
    return Result(case=f"op[c{i}]", op="op", variant="fp32", knobs={"dtype": "fp32"}, device="llvmpipe",
                  status=status.name,
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


def test_records_round_trip_with_structured_fields(tmp_path):
    store = ResultStore(tmp_path / "r.jsonl")
    store.append(Result(case="m[x]", op="m", device="cpu", status="PASS", rule="numerics",
                        knobs={"recipe": "4w", "partitioner": "vulkan"}, node={"index": 3, "op": "aten.add.Tensor"}))
    (back,) = load([store.path])
    assert (back.rule, back.knobs["recipe"], back.node["index"]) == ("numerics", "4w", 3)
