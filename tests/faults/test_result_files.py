"""Result files in bad states: torn last lines, junk lines, missing fields, non-UTF-8 bytes."""

from __future__ import annotations

import json

from vkdiff.datamodel import Result
from vkdiff.entry import cli
from vkdiff.store import ResultStore, load, read


def _result(case: str = "op[c]") -> Result:
    return Result(case=case, op="op", device="llvmpipe", status="PASS", knobs={"dtype": "fp32"})


def test_append_after_a_torn_line_keeps_both(tmp_path):
    """A crash mid-write left half a line: the next append starts on a fresh line and the torn one is reported."""
    path = tmp_path / "r.jsonl"
    ResultStore(path).append(_result("op[a]"))
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"case": "op[torn]", "sta')
    store = ResultStore(path)
    store.append(_result("op[b]"))
    problems: list = []
    assert [r.case for r in load([path], problems)] == ["op[a]", "op[b]"]
    assert [(p.line, p.why) for p in problems] == [(2, "not JSON (a torn line?)")]
    assert store.torn_lines == [2]
    assert path.read_text(encoding="utf-8").splitlines()[1] == '{"case": "op[torn]", "sta'


def test_every_bad_line_is_counted_with_why(tmp_path):
    path = tmp_path / "r.jsonl"
    good = _result().to_json()
    path.write_bytes(b"\n".join([good.encode(), b"[1, 2]", b"not json", b"\xff\xfe{}", good.encode(), b""]))
    report = read([path])
    assert len(report.results) == 2
    assert sorted(p.why for p in report.problems) == ["not JSON (a torn line?)", "not UTF-8", "not an object"]
    assert report.summary() == f"3 lines of {path} could not be read: 1 not JSON (a torn line?), 1 not UTF-8, " \
                               f"1 not an object"


def test_record_missing_fields_is_kept_and_marked(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"case": "op[x]", "device": "mali", "metrics": "garbage"}) + "\n")
    (result,) = read([path]).results
    assert result.case == "op[x]" and result.status == "MISSING" and "incomplete-record" in result.flags
    assert "missing fields: op, status" in result.reason


def test_report_survives_bad_records_and_says_how_many_lines_it_dropped(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    path.write_bytes(_result().to_json().encode() + b"\n" + json.dumps({"status": "PASS"}).encode() + b"\n"
                     + b"\x80junk\n" + b"42\n")
    assert cli.main(["report", str(path), "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert f"2 lines of {path} could not be read: 1 not UTF-8, 1 not an object" in err
    page = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert "2 lines could not be read" in page
    assert "incomplete-record" in (tmp_path / "out" / "unknown-device.html").read_text(encoding="utf-8")
