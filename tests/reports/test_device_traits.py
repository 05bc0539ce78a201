"""A device's report page lists the traits its results recorded (``device_info["traits"]``), one row each."""

from __future__ import annotations

from tests.reports.helpers import DEVICE_INFO, parse_html, result, write_jsonl
from vkdiff.reports import render_reports
from vkdiff.reports.model import device_traits, trait_text

CASE = "linear_q4gsw[M1-K64-N40-g32-fp32-buffer]"
TRAITS = {"f32_denorm": "flushed", "div_f32_max_ulp": 2.5, "fma": "contracted", "relaxed_precision_f16": True,
          "f16_denorm": {"not_measured": "the device lacks shader-f16"}, "subgroup_size": 16,
          "robust_access": {"error": "trait probe robust: device lost"}, "exp_max_ulp": "inf",
          "f2i_out_of_range": {"int(3e9)": 2147483647, "uint(NaN)": 0},
          "probe": {"version": "3f048e516dcf", "glslc": "shaderc 2023.2", "seconds": 0.412}}
"""What a phone's results might record (values chosen to differ from lavapipe's)."""


def test_the_device_page_lists_each_trait_and_its_value(tmp_path):
    info = dict(DEVICE_INFO["mali"], traits=TRAITS)
    index = render_reports([write_jsonl(tmp_path / "mali.jsonl", [result(CASE, "mali", device_info=info)])],
                           tmp_path / "report")
    section = parse_html(index.devices["mali"].read_text(encoding="utf-8")).find("details", id="traits")
    rows = {tr.find("th").text: tr.find("td").text for tr in section.find("table").find_all("tr")}
    assert rows == {"div_f32_max_ulp": "2.5", "exp_max_ulp": "∞",
                    "f16_denorm": "not measured: the device lacks shader-f16", "f2i_out_of_range": "int(3e9) = 2147483647, uint(NaN) = 0", "f32_denorm": "flushed",
                    "fma": "contracted", "relaxed_precision_f16": "yes",
                    "robust_access": "probe failed: trait probe robust: device lost", "subgroup_size": "16"}
    assert "9 traits, probed (probe 3f048e516dcf, 0.412 s)" in section.find("summary").text


def test_a_device_whose_results_carry_no_traits_shows_no_trait_table(tmp_path):
    index = render_reports([write_jsonl(tmp_path / "mali.jsonl", [result(CASE, "mali")])], tmp_path / "report")
    page = parse_html(index.devices["mali"].read_text(encoding="utf-8"))
    assert not page.find_all("details", id="traits")
    assert device_traits(DEVICE_INFO["mali"]) == ([], "")


def test_a_malformed_trait_record_reads_as_text_never_raises():
    assert device_traits({"traits": "garbage"}) == ([], "")
    assert device_traits({"traits": {"fma": ["a", 1.5], "probe": "x"}}) == ([("fma", "a, 1.5")], "")
    assert trait_text(None) == "None"
