"""Report data model: case ids, clipping, merging, expectations."""

from __future__ import annotations

import math

import pytest

from tests.reports.helpers import result
from vkdiff.datamodel import Result
from vkdiff.reports.model import Expectation, Merged, Row, clip, fmt_num, natural_key


def test_rows_are_placed_by_structured_fields():
    """Kernel results: sizes × knob set; model results: knob set × rule (nothing parsed from ids)."""
    kernel = Row.from_result(Result(case="linear_q4gsw[M13-K256-N40-g32-fp16-buffer-wbuffer]", op="et_vk.x",
                                    device="mali", status="PASS", variant="fp16-buffer-wbuffer",
                                    shape={"M": 13, "K": 256, "N": 40, "g": 32},
                                    knobs={"dtype": "fp16", "storage": "buffer", "weight_storage": "buffer"}))
    assert (kernel.shape, kernel.column, kernel.dtype) == ("M13-K256-N40-g32", "fp16-buffer-wbuffer", "fp16")
    model = Row.from_result(Result(case="llama_proj[8da4w-vulkan]", op="llama_proj", device="cpu", status="PASS",
                                   variant="8da4w-vulkan", rule="numerics",
                                   knobs={"recipe": "8da4w", "partitioner": "vulkan"}))
    assert (model.shape, model.column, model.dtype) == ("8da4w-vulkan", "numerics", "")


def test_each_rule_of_a_model_case_is_its_own_row():
    rules = [Result(case="m[4w-vulkan]", op="m", device="cpu", status="PASS", rule=r) for r in ("a", "b")]
    assert sorted(key for key, _ in Merged.from_results(rules).rows) == ["m[4w-vulkan]/a", "m[4w-vulkan]/b"]


def test_clip_keeps_both_ends_and_tolerates_non_strings():
    text = "a" * 300 + "MIDDLE" + "z" * 300
    assert clip(text) == "a" * 200 + " … " + "z" * 200
    assert clip(None) == "" and clip(12) == "12" and clip("short") == "short"


def test_fmt_num():
    assert [fmt_num(v) for v in (None, "inf", "-inf", "nan", 0, 12.3456, 1e-7, 123456.0, "garbage")] == \
        ["—", "∞", "−∞", "NaN", "0", "12.35", "1.000e-07", "1.235e+05", "garbage"]


def test_natural_key():
    assert sorted(["M13", "M4", "M64", "M1"], key=natural_key) == ["M1", "M4", "M13", "M64"]


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
