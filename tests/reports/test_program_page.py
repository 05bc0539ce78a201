"""A program's card on its device page reads like the program: node table, first diverging node, output comparisons."""

from __future__ import annotations

import json
import re

import pytest

from tests.reports.helpers import PROGRAM_NODES, parse_html, program_result, write_jsonl
from vkdiff.datamodel import Result
from vkdiff.reports import inspector, render_reports
from vkdiff.reports.model import NODE_COLUMNS, ProgramView, Row, anchor

MODULE = "factories.two_partitions[4w-vulkan]"
PTE = "two_partitions[pte-forward]"


def _render(tmp_path, lines):
    path = write_jsonl(tmp_path / "program.jsonl", lines)
    return parse_html(render_reports([path], tmp_path / "report").devices["mali"].read_text(encoding="utf-8"))


@pytest.fixture
def card(tmp_path):
    """The card of a module's program whose node 2 of delegate 1 is off on its own inputs."""
    page = _render(tmp_path, [program_result(MODULE, "mali")])
    return page.find("article", id=anchor(MODULE))


def _cells(tr) -> list[str]:
    return [re.sub(r"\s+", " ", td.text).strip() for td in tr.find_all("td")]


def _body_rows(table) -> list:
    return table.find("tbody").find_all("tr")


def test_the_node_table_has_a_row_per_node_with_its_op_shader_source_and_status(card):
    table = card.find("table", cls="nodes")
    headers = [th.text for th in table.find("thead").find_all("th")][1:]
    assert headers == [c.title for c in NODE_COLUMNS]
    rows = [_cells(tr)[1:] for tr in _body_rows(table)]
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in rows] == [(str(d), str(i), op, shader, source)
                                                             for d, i, op, shader, source in PROGRAM_NODES]
    assert [r[5] for r in rows] == ["PASS"] * 4 + ["FAIL_NUMERIC", "PASS"]
    bad = rows[4]
    assert bad[6:9] == ["0.4999", "14.17", "1"] and bad[9] == "0.5 FAIL_NUMERIC"
    assert rows[0][7] == "∞", "the store's 'inf' SQNR is a number on the page"


def test_the_node_table_holds_what_the_nodes_csv_holds(tmp_path, card):
    """Same nodes, order, ops, sources, statuses and gaps as ``inspector.rows`` (the ``.nodes.csv`` of the run)."""
    result = Result.from_dict(program_result(MODULE, "mali"))
    csv = [(str(r["delegate"]), str(r["index"]), r["aot_ops"][0], r["source"], r["status"], r["gap_mismatches"])
           for r in inspector.rows([result])]
    page = [(c[1], c[2], c[3], c[5], c[6], int(c[9])) for c in map(_cells, _body_rows(card.find("table", cls="nodes")))]
    assert page == csv and len(page) == len(PROGRAM_NODES)


def test_only_the_first_diverging_node_is_marked_not_the_later_ones_fed_its_value(card):
    marked = [tr for tr in _body_rows(card.find("table", cls="nodes")) if "first-bad" in tr.classes]
    assert len(marked) == 1 and _cells(marked[0])[1:4] == ["1", "2", "et_vk.linear_q4gsw.default"]
    assert marked[0].find("a").attrs["href"] == f"#first-bad-{anchor(MODULE)}"
    later = _cells(_body_rows(card.find("table", cls="nodes"))[5])
    assert later[-1] == "0.1214 FAIL_NUMERIC" and later[6] == "PASS", "globally off, locally fine: not blamed"


def test_the_first_diverging_node_shows_what_its_record_holds(card):
    box = card.find("div", cls="first-bad-node", id=f"first-bad-{anchor(MODULE)}")
    heading = re.sub(r"\s+", " ", box.find("h5").text).strip()
    assert heading == "First diverging node: node 2 of delegate 1 FAIL_NUMERIC"
    facts = {dt.text: re.sub(r"\s+", " ", dd.text).strip()
             for dt, dd in zip(box.find("dl").find_all("dt"), box.find("dl").find_all("dd"))}
    assert facts["op"] == "et_vk.linear_q4gsw.default" and facts["source"] == "head, factories.py:25"
    assert facts["shader"] == "q4gsw_linear_gemm__w_4x8_nc_texture3d_float" and facts["arguments"] == "group_size=32"
    [output] = _body_rows(box.find("table", cls="node-outputs"))
    assert _cells(output) == ["%10", "FAIL_NUMERIC", "0.4999", "14.17", "1", "[0, 3]", "0.5 FAIL_NUMERIC"]
    assert "not error maps" in box.text
    dispatches = box.find("details", cls="dispatches")
    assert "q4gsw_linear_gemm__w_4x8_nc_texture3d_float" in dispatches.text and "[8, 8, 1]" in dispatches.text


def test_the_output_comparisons_are_a_table_of_metrics_not_json(card):
    table = card.find("table", cls="comparisons")
    rows = {tr.attrs["data-key"]: tr for tr in _body_rows(table)}
    assert list(rows) == ["vs_eager", "vs_reference"]
    assert "judged" in rows["vs_eager"].classes and "judged" not in rows["vs_reference"].classes
    assert _cells(rows["vs_eager"]) == ["0.1214", "0.2357", "33.42", "1 / 128 (0.781%)", "—", "0", "[3]"]
    headers = [th.text for th in table.find("thead").find_all("th")]
    assert headers == ["model output vs", "max |err|", "max rel", "SQNR dB", "mismatches / total", "NaN / Inf",
                       "unwritten", "worst index"]


def test_raw_json_is_only_behind_a_toggle(card):
    raw = card.find("details", cls="raw")
    assert raw.find("summary").text == "raw metrics (JSON)"
    assert json.loads(raw.find("pre").text)["nodes"][4]["op"] == "et_vk.linear_q4gsw.default"
    outside = card.text.replace(raw.text, "")
    assert '"vs_eager"' not in outside and '"outputs"' not in outside and "[{" not in outside
    assert not any(dt.text in ("nodes", "vs_eager", "vs_reference", "delegates", "route")
                   for dt in card.find("dl", cls="facts").find_all("dt"))


def test_a_pte_has_no_eager_row_and_is_judged_against_the_reference_program(tmp_path):
    page = _render(tmp_path, [program_result(PTE, "mali", eager=False)])
    table = page.find("article", id=anchor(PTE)).find("table", cls="comparisons")
    rows = {tr.attrs["data-key"]: tr for tr in _body_rows(table)}
    assert "not compared" in rows["vs_eager"].text and "judged" in rows["vs_reference"].classes
    assert _cells(rows["vs_reference"])[:3] == ["0.1214", "0.2357", "33.42"]


def test_numerics_plot_the_sqnr_a_programs_comparisons_carry(tmp_path):
    page = _render(tmp_path, [program_result(MODULE, "mali"),
                              program_result("factories.ok[4w-vulkan]", "mali", bad=None)])
    plots = page.find("section", id="plots")
    assert "No SQNR recorded" not in plots.text
    assert plots.find("img", alt="SQNR per case, grouped by variant").attrs["src"].startswith("data:image/png")
    failures = page.find("table", id="failure-table")
    [row] = _body_rows(failures)
    assert "33.42" in _cells(row)


def test_a_delegate_the_device_could_not_run_is_in_the_delegate_table(tmp_path):
    line = program_result(PTE, "mali", bad=None, eager=False, status="BUILD_FAIL", reason="glslc not found")
    line["metrics"]["nodes"] = line["metrics"]["nodes"][:2]
    line["metrics"]["delegates"][1] = {"delegate": 1, "status": "BUILD_FAIL", "reason": "glslc not found",
                                       "index": 2, "op": "et_vk.linear_q4gsw.default", "shader": "q4gsw_linear"}
    card = _render(tmp_path, [line]).find("article", id=anchor(PTE))
    rows = [_cells(tr) for tr in _body_rows(card.find("table", cls="delegates"))]
    assert rows[1] == ["1", "BUILD_FAIL", "—", "node 2 (et_vk.linear_q4gsw.default)", "glslc not found"]
    assert not card.find_all("div", cls="first-bad-node") and len(_body_rows(card.find("table", cls="nodes"))) == 2


def test_malformed_program_metrics_do_not_break_the_page(tmp_path):
    line = program_result(MODULE, "mali")
    line["metrics"]["nodes"] = [{"index": 0}, "junk", {"index": 1, "op": "aten.tanh.default", "status": "PASS",
                                                       "outputs": ["x", {"max_abs": "nan"}], "dispatches": [3]}]
    line["metrics"].update(vs_reference="garbage", delegates=[None], route=[1])
    card = _render(tmp_path, [line]).find("article", id=anchor(MODULE))
    assert [_cells(tr)[3] for tr in _body_rows(card.find("table", cls="nodes"))] == ["aten.tanh.default"]
    assert "not compared" in card.find("table", cls="comparisons").find("tr", data_key="vs_reference").text


def test_kernel_cases_get_no_program_view():
    from tests.reports.helpers import result

    row = Row.from_result(Result.from_dict(result("linear_q4gsw[M1-K64-N40-g32-fp32-buffer]", "mali", "FAIL_NUMERIC")))
    assert ProgramView.from_row(row) is None
    assert row.sqnr == 12.5, "a case's own metrics are read, not a comparison's"
