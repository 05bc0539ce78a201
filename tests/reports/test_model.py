"""Report data model: case ids, clipping, merging, expectations."""

from __future__ import annotations

import math

import pytest

from tests.reports.helpers import result
from vkdiff.harness.store import Result
from vkdiff.reports.model import Expectation, Merged, clip, dtype_of, fmt_num, natural_key, split_case

SPLITS = (
    ("linear_q4gsw[M13-K256-N40-g32-fp16-buffer]", "fp16-buffer", ("linear_q4gsw", "M13-K256-N40-g32", "fp16-buffer")),
    ("linear_q4gsw[M1-K256-N40-g32-fp16-buffer-wbuffer]", "fp16-buffer-wbuffer",
     ("linear_q4gsw", "M1-K256-N40-g32", "fp16-buffer-wbuffer")),
    ("op[c1-wbuffer]", "buffer", ("op", "c1-wbuffer", "buffer")),
    ("vit_tiny[8da4w]", "8da4w", ("vit_tiny", "", "8da4w")),
    ("plain-fp32", "fp32", ("plain", "", "fp32")),
    ("plain", "", ("plain", "", "—")),
)


@pytest.mark.parametrize("case, variant, expected", SPLITS)
def test_split_case(case, variant, expected):
    assert split_case(case, variant) == expected


def test_clip_keeps_both_ends_and_tolerates_non_strings():
    text = "a" * 300 + "MIDDLE" + "z" * 300
    assert clip(text) == "a" * 200 + " … " + "z" * 200
    assert clip(None) == "" and clip(12) == "12" and clip("short") == "short"


def test_fmt_num():
    assert [fmt_num(v) for v in (None, "inf", "-inf", "nan", 0, 12.3456, 1e-7, 123456.0, "garbage")] == \
        ["—", "∞", "−∞", "NaN", "0", "12.35", "1.000e-07", "1.235e+05", "garbage"]


def test_natural_key_and_dtype():
    assert sorted(["M13", "M4", "M64", "M1"], key=natural_key) == ["M1", "M4", "M13", "M64"]
    assert dtype_of("fp16-texture3d") == "fp16" and dtype_of("buffer-int8") == "int8" and dtype_of("8da4w") == ""


def test_merge_keeps_latest_and_remembers_earlier():
    older = Result.from_dict(result("op[a-fp32-buffer]", "mali", "FAIL_NUMERIC", time="2026-01-01T00:00:00Z"))
    newer = Result.from_dict(result("op[a-fp32-buffer]", "mali", "PASS", time="2026-01-02T00:00:00+00:00"))
    other = Result.from_dict(result("op[a-fp32-buffer]", "adreno", "PASS"))
    merged = Merged.from_results([newer, other, older])
    row = merged.rows[("op[a-fp32-buffer]", "mali")]
    assert row.status == "PASS" and row.history == ["FAIL_NUMERIC"] and row.flaky
    assert merged.duplicates == {"mali": 1} and merged.total_read == 3
    assert merged.devices() == ["adreno", "mali"]


def test_row_metrics_parse_store_strings():
    row = Merged.from_results([Result.from_dict(result("op[a-fp32-buffer]", "mali", "PASS",
                                                       metrics={"sqnr_db": "inf", "error_map": [[1, "x"]]}))])
    only = next(iter(row.rows.values()))
    assert math.isinf(only.sqnr) and only.error_map is None and only.error_hist is None


@pytest.mark.parametrize("value, expected", (
    (None, None),
    ({}, None),
    ("plain reason", Expectation(reason="plain reason")),
    ({"id": "E1", "link": "javascript:alert(1)", "reason": "r"}, Expectation(id="E1", reason="r")),
    ({"signature": "sig", "url": "https://x/1"}, Expectation(id="sig", link="https://x/1")),
))
def test_expectation_from_value(value, expected):
    assert Expectation.from_value(value) == expected
