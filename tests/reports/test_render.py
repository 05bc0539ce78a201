"""HTML reports from small synthetic result files: pages, ordering, merging, robustness."""

from __future__ import annotations

import json
import re

import pytest

from tests.reports.helpers import parse_html, result, write_jsonl
from vkdiff.datamodel import Result
from vkdiff.reports import ReportIndex, render_reports, render_results
from vkdiff.reports import render as render_module
from vkdiff.reports.model import CARD_COLUMNS, COLUMNS, CROSS_COLUMNS, REPORT_COLUMNS, TABLE_COLUMNS, anchor

CASE_PASS = "linear_q4gsw[M1-K64-N40-g32-fp32-buffer]"
CASE_BOTH_FAIL = "linear_q4gsw[M1-K64-N40-g32-fp16-buffer]"
CASE_DIVERGENT = "linear_q4gsw[M13-K256-N40-g32-fp32-texture3d]"
CASE_AAA = "embedding_q4gsw[M1-K64-N40-g32-fp32-buffer]"  # sorts first alphabetically, passes everywhere
CASE_SKIP = "linear_q4gsw[M4-K64-N40-g32-fp16-texture3d]"


@pytest.fixture
def two_devices(tmp_path):
    """Two runner files: ``adreno`` passes CASE_DIVERGENT, ``mali`` fails it."""
    adreno = write_jsonl(tmp_path / "adreno.jsonl", [
        result(CASE_AAA, "adreno"), result(CASE_PASS, "adreno"), result(CASE_BOTH_FAIL, "adreno", "FAIL_NUMERIC"),
        result(CASE_DIVERGENT, "adreno"), result(CASE_SKIP, "adreno", "NOT_SUPPORTED", reason="naga: no int8"),
    ])
    mali = write_jsonl(tmp_path / "mali.jsonl", [
        result(CASE_AAA, "mali"), result(CASE_PASS, "mali"), result(CASE_BOTH_FAIL, "mali", "FAIL_NAN"),
        result(CASE_DIVERGENT, "mali", "FAIL_NUMERIC"), result(CASE_SKIP, "mali"),
    ])
    index = render_reports([adreno, mali], tmp_path / "report")
    return index


def _page(path):
    return parse_html(path.read_text(encoding="utf-8"))


def test_writes_one_page_per_device_plus_cross_and_index(two_devices):
    index = two_devices
    assert isinstance(index, ReportIndex)
    assert sorted(index.devices) == ["adreno", "mali"]
    assert [p.name for p in index.files] == ["index.html", "cross-device.html", "adreno.html", "mali.html"]
    assert all(p.is_file() for p in index.files)
    assert index.results == 10 and index.duplicates == 0
    links = {a.attrs["href"] for a in _page(index.index).find("section", id="devices").find_all("a")}
    assert {"adreno.html", "mali.html"} <= links


def test_pass_on_one_device_fail_on_another_is_listed_first(two_devices):
    page = _page(two_devices.cross_device)
    sections = [s.attrs.get("id") for s in page.find_all("section")]
    assert sections.index("divergent") < sections.index("nowhere") < sections.index("allpass")
    first_table = page.find("table", cls="cross")
    first_row = [tr for tr in first_table.find("tbody").find_all("tr") if "group-row" not in tr.classes][0]
    assert first_row.find("td", cls="case").text.startswith(CASE_DIVERGENT)
    cells = first_row.find_all("td", cls="dev")
    assert [c.find("span", cls="badge").text.strip() for c in cells] == ["PASS", "FAIL_NUMERIC"]
    assert "SQNR dB" in cells[1].text and "37 / 520" in cells[1].text
    assert cells[1].find("a").attrs["href"] == f"mali.html#{anchor(CASE_DIVERGENT)}"
    nowhere = page.find("section", id="nowhere")
    assert CASE_BOTH_FAIL in nowhere.text and CASE_DIVERGENT not in nowhere.text
    assert "2 pass everywhere" in re.sub(r"\s+", " ", page.find("section", id="summary").text)
    assert CASE_SKIP in page.find("section", id="gaps").text


def test_device_page_shows_identity_summary_matrix_and_details(two_devices):
    page = _page(two_devices.devices["mali"])
    identity = page.find("header", id="identity").text
    for text in ("Mali-G715", "ARM", "r44p0", "Vulkan", "IntegratedGPU", "0x13b5", "shader-f16", "max-buffer-size"):
        assert text in identity
    badges = {b.text.split()[0]: int(b.find("b").text) for b in page.find("section", id="summary").find_all("span", cls="badge")}
    assert badges == {"PASS": 3, "FAIL_NUMERIC": 1, "FAIL_NAN": 1}
    matrix = page.find("table", cls="matrix", data_op="linear_q4gsw")
    headers = [th.text.strip() for th in matrix.find("thead").find_all("th", cls="vh")]
    assert headers == ["fp16-buffer", "fp16-texture3d", "fp32-buffer", "fp32-texture3d"]
    rows = {tr.find("th").text: tr for tr in matrix.find("tbody").find_all("tr")}
    assert set(rows) == {"M1-K64-N40-g32", "M4-K64-N40-g32", "M13-K256-N40-g32"}
    divergent_cell = rows["M13-K256-N40-g32"].find_all("td")[3]
    assert CASE_DIVERGENT in divergent_cell.attrs["title"] and "FAIL_NUMERIC" in divergent_cell.attrs["title"]
    assert divergent_cell.find("a").attrs["href"] == f"#{anchor(CASE_DIVERGENT)}"
    card = page.find("article", id=anchor(CASE_DIVERGENT))
    text = re.sub(r"\s+", " ", card.text)
    for expected in ("Mismatched elements: 37 / 520", "12.5", "0.25", "37 / 520 (7.12%)", "[3, 39]",
                     "linear_q4gsw_tiled_buffer_texture2d_float", "atol=1.000e-06", "global [5, 1, 1]"):
        assert expected in text, expected
    assert card.find("pre", id=f"repro-{anchor(CASE_DIVERGENT)}").text == f"vkdiff run --cases '^{CASE_DIVERGENT}$' --device mali"
    assert card.find("button", cls="copy")
    heat = card.find("figure", cls="heat").find("img")
    assert heat.attrs["src"].startswith("data:image/png;base64,")
    bars = card.find("figure", cls="hist").find_all("div", cls="b")
    assert len(bars) == 13 and sum("over" in b.classes for b in bars) == 4
    plots = page.find("section", id="plots").find_all("img")
    assert len(plots) == 2 and all(img.attrs["src"].startswith("data:image/png;base64,") for img in plots)


def test_pages_are_self_contained(two_devices):
    for path in two_devices.files:
        text = path.read_text(encoding="utf-8")
        page = parse_html(text)
        assert not page.find_all("link"), path
        assert all("src" not in s.attrs for s in page.find_all("script")), path
        assert all(img.attrs["src"].startswith("data:") for img in page.find_all("img")), path
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", text), path
        assert page.find("style").text.strip()


def test_duplicate_keeps_latest_by_time_and_is_counted(tmp_path):
    first = write_jsonl(tmp_path / "runner1.jsonl", [
        result(CASE_PASS, "mali", "PASS", time="2026-11-26T05:00:00+00:00"),
        result(CASE_AAA, "mali", "PASS"),
    ])
    second = write_jsonl(tmp_path / "runner2.jsonl", [  # read later, yet older
        result(CASE_PASS, "mali", "FAIL_NUMERIC", time="2026-11-26T04:00:00+00:00"),
    ])
    index = render_reports([first, second], tmp_path / "out")
    assert index.results == 2 and index.duplicates == 1
    page = _page(index.devices["mali"])
    summary = re.sub(r"\s+", " ", page.find("section", id="summary").text)
    assert "1 duplicate result" in summary and "changed status between runs" in summary
    assert [b.text.split()[0] for b in page.find("section", id="summary").find_all("span", cls="badge")] == ["PASS"]
    cell = [td for td in page.find_all("td", cls="cell") if CASE_PASS in td.attrs.get("title", "")][0]
    assert "flaky" in cell.classes and "earlier runs: FAIL_NUMERIC" in cell.attrs["title"]
    assert "1 duplicate superseded" in re.sub(r"\s+", " ", _page(index.index).text)


def test_tie_on_time_keeps_the_one_read_last(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [result(CASE_PASS, "mali", "FAIL_NUMERIC")])
    b = write_jsonl(tmp_path / "b.jsonl", [result(CASE_PASS, "mali", "PASS")])
    index = render_reports([a, b], tmp_path / "out")
    assert "FAIL_NUMERIC" not in _page(index.devices["mali"]).find("section", id="summary").text


def test_missing_and_odd_optional_fields_do_not_crash(tmp_path):
    lines = [
        {"case": "bare", "op": "", "variant": "", "device": "mali", "status": "PASS"},
        {"case": "odd[x]", "op": "odd", "variant": "fp16", "device": "mali", "status": "FAIL_NUMERIC",
         "metrics": {"sqnr_db": "-inf", "max_abs": "nan", "mismatches": "many", "error_map": [[1.0], [2.0, 3.0]],
                     "error_hist": {"edges": [0, 1], "counts": [1, 2]}, "per_output": {"out0": {"sqnr_db": 3}}},
         "tolerance": None, "dispatch": [1, 2], "device_info": {"features": "abc", "limits": "x"},
         "versions": None, "flags": "polyfilled", "shaders": "one_shader",
         "future_field": {"ignored": True}},
        {"case": "new[status]", "op": "new", "variant": "", "device": "", "status": "FANCY_NEW_STATUS",
         "reason": "x" * 300 + "MIDDLE" + "y" * 300, "time": "not a time"},
        {"case": "exact[fp32]", "op": "exact", "variant": "fp32", "device": "mali", "status": "PASS",
         "metrics": {"sqnr_db": "inf", "error_hist": {"edges": [-1.0, 0.0, 1.0], "counts": [0, 0], "exact": 10}}},
    ]
    path = tmp_path / "odd.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"case": "torn', encoding="utf-8")
    index = render_reports([path], tmp_path / "out")
    assert sorted(index.devices) == ["mali", "unknown-device"]
    mali = path.parent / "out" / "mali.html"
    text = mali.read_text(encoding="utf-8")
    assert "per_output" in text and "−∞" in text and "one_shader" in text and "polyfilled" in text
    unknown = index.devices["unknown-device"].read_text(encoding="utf-8")
    assert "FANCY_NEW_STATUS" in unknown
    assert "x" * 200 + " … " + "y" * 200 in unknown and "MIDDLE" not in unknown


def test_empty_input_still_writes_the_index(tmp_path):
    path = write_jsonl(tmp_path / "empty.jsonl", [])
    index = render_reports([path], tmp_path / "out")
    assert index.devices == {} and index.index.is_file() and index.cross_device.is_file()
    assert "No results." in index.index.read_text(encoding="utf-8")


def test_missing_results_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=re.escape(f"results file {str(tmp_path / 'nope.jsonl')!r} not found")):
        render_reports([tmp_path / "nope.jsonl"], tmp_path / "out")


def test_expectation_is_rendered_as_known_when_present(tmp_path):
    failing = Result.from_dict(result(CASE_DIVERGENT, "mali", "FAIL_NUMERIC"))
    failing.expectation = {"id": "ETVK-42", "link": "https://github.com/pytorch/executorch/issues/42",
                           "reason": "fp16 overflow in tiled linear"}
    fixed = Result.from_dict(result(CASE_PASS, "mali", "PASS"))
    fixed.expectation = {"id": "ETVK-7", "reason": "was broken"}
    plain = Result.from_dict(result(CASE_BOTH_FAIL, "mali", "FAIL_NAN"))
    index = render_results([failing, fixed, plain], tmp_path / "out")
    page = _page(index.devices["mali"])
    card = page.find("article", id=anchor(CASE_DIVERGENT))
    assert "known" in card.classes and "ETVK-42" in card.text and "fp16 overflow" in card.text
    assert card.find("a", href="https://github.com/pytorch/executorch/issues/42")
    assert "known" not in page.find("article", id=anchor(CASE_BOTH_FAIL)).classes
    headline = re.sub(r"\s+", " ", page.find("section", id="summary").text)
    assert "1 failing" in headline and "1 known" in headline and "passed" in headline and CASE_PASS in headline


def test_heatmaps_are_capped_and_the_page_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(render_module, "MAX_HEATMAPS_PER_DEVICE", 2)
    cases = [f"linear_q4gsw[M{m}-K64-N40-g32-fp32-buffer]" for m in (1, 4, 13)]
    path = write_jsonl(tmp_path / "r.jsonl", [result(c, "mali", "FAIL_NUMERIC") for c in cases])
    index = render_reports([path], tmp_path / "out")
    page = _page(index.devices["mali"])
    assert len(page.find_all("figure", cls="heat")) == 2
    assert "Heatmaps drawn for the 2 worst of 3 failures" in re.sub(r"\s+", " ", page.find("section", id="failures").text)


def test_reserved_device_slug_gets_its_own_file(tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl", [result(CASE_PASS, "index"), result(CASE_PASS, "cross-device")])
    index = render_reports([path], tmp_path / "out")
    assert {p.name for p in index.devices.values()} == {"device-index.html", "device-cross-device.html"}
    assert index.index.name == "index.html" and "vkdiff reports" in index.index.read_text(encoding="utf-8")


def test_columns_are_declared_once():
    keys = [c.key for c in REPORT_COLUMNS]
    assert len(keys) == len(set(keys))
    assert set(TABLE_COLUMNS) | set(CARD_COLUMNS) | set(CROSS_COLUMNS) <= set(COLUMNS)


def test_failure_table_headers_follow_the_column_declaration(two_devices):
    page = _page(two_devices.devices["mali"])
    headers = [th.text for th in page.find("table", id="failure-table").find("thead").find_all("th")]
    assert headers == [COLUMNS[k].title for k in TABLE_COLUMNS]


def test_expectation_in_results_file_is_rendered(tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl", [
        result(CASE_DIVERGENT, "mali", "FAIL_NUMERIC", expectation={"id": "ETVK-9", "reason": "upstream"}),
        result(CASE_PASS, "mali", "PASS", expectation={}),
    ])
    page = _page(render_reports([path], tmp_path / "out").devices["mali"])
    assert "known" in page.find("article", id=anchor(CASE_DIVERGENT)).classes
    assert "passed" not in page.find("section", id="summary").text


def test_generation_steps_are_a_table_in_the_card(tmp_path):
    case = "tiny_llama[llm-8da4w-vulkan]"
    steps = [{"step": 0, "kind": "prefill", "status": "PASS", "max_abs_vs_eager": 3e-7, "sqnr_db": 136.7,
              "token": 229, "eager_token": 229},
             {"step": 1, "kind": "decode", "status": "FAIL_NUMERIC", "max_abs_vs_eager": 9e-3, "sqnr_db": 45.0,
              "token": 179, "eager_token": 179, "failing_nodes": [[10, "a"], [13, "a"]],
              "first_diverging": {"index": 10, "op": "et_vk.linear_dq8ca_q4gsw.default", "shader": "coop_x"}}]
    line = result(case, "mali", "FAIL_NUMERIC")
    line["metrics"]["steps"] = steps
    index = render_results([Result.from_dict(line)], tmp_path / "out")
    card = _page(index.devices["mali"]).find("article", id=anchor(case))
    table = card.find("table", cls="steps")
    text = re.sub(r"\s+", " ", table.text)
    assert "prefill" in text and "decode" in text and "179 / 179" in text
    assert "10 et_vk.linear_dq8ca_q4gsw.default (coop_x)" in text
    assert "steps" not in re.sub(r"\s+", " ", card.find("dl", cls="facts").text)


def test_failures_sharing_shader_vendor_and_profiles_are_one_bucket(tmp_path):
    """Two cases wrong in the same shader on one vendor are one bucket; another shader is another."""
    def failing(case, shader):
        return Result.from_dict(result(case, "llvmpipe", "FAIL_NUMERIC", shader=shader, device_info={"vendor": "Mesa"}))

    rows = [failing("rope[T1-fp32-buffer]", "rotary_embedding_buffer_float"),
            failing("rope[T2-fp32-buffer]", "rotary_embedding_buffer_float"),
            failing("add[B1-fp32-buffer]", "add_buffer_float"), Result.from_dict(result("add[B2-fp32-buffer]", "llvmpipe"))]
    index = render_results(rows, tmp_path)
    text = re.sub(r"<[^>]+>", " ", index.index.read_text())
    section = text[text.index("Failure buckets"):]
    assert re.search(r"2\s+FAIL_NUMERIC \| rotary_embedding_buffer_float \| Mesa \| route=native limits=native", section)
    assert re.search(r"1\s+FAIL_NUMERIC \| add_buffer_float \| Mesa", section)
    assert "add[B2-fp32-buffer]" not in section.split("Versions")[0]


def test_the_index_shows_the_trees_coverage_when_given(tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl", [result(CASE_PASS, "adreno")])
    coverage = {"tree": "/src/executorch", "summary": {"registered": 3, "in_scope_covered_percent": 50.0, "families": {
        "in scope": {"ops": 2, "launcher": 1, "reference": 2, "both": 1, "suite": 1},
        "training": {"ops": 1, "launcher": 0, "reference": 0, "both": 0, "suite": 0}}},
        "ops": [{"op": "aten.add.Tensor", "file": "BinaryOp.cpp", "family": "in scope", "launcher": True,
                 "reference": True, "cases": 4},
                {"op": "aten.flip.default", "file": "Flip.cpp", "family": "in scope", "launcher": False,
                 "reference": True, "cases": 0}],
        "variants": {"variants": 10, "templates": 4, "dispatched_variants": 3, "dispatched_templates": 2}}
    section = _page(render_reports([path], tmp_path / "with", coverage).index).find("section", id="coverage")
    text = " ".join(section.text.split())
    assert "registers 3 ops; in scope, 50.0% have a launcher and a reference" in text
    assert "dispatched 3 of 10 shader variants (2 of 4 templates)" in text
    assert "without launcher and reference: aten.flip.default (Flip.cpp)" in text
    assert [td.text for td in section.find("tbody").find("tr").find_all("td")] == ["in scope", "2", "1", "2", "1",
                                                                                     "1"]
    assert not _page(render_reports([path], tmp_path / "without").index).find_all("section", id="coverage")
