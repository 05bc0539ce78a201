"""The cross-device page lists each device's probed traits and groups the cases devices disagree on by the trait their
results name as the cause; differences no trait names are listed apart."""

from __future__ import annotations

from tests.reports.helpers import DEVICE_INFO, parse_html, result, write_jsonl
from vkdiff.reports import render_reports

MALI = {"f32_denorm": "flushed", "fma": "contracted", "subgroup_size": 16}
ADRENO = {"f32_denorm": "preserved", "fma": "contracted", "subgroup_size": 64}
FLUSHED = "rsqrt[W6-fp32-buffer]"
CONTRACTED = "var[W6-fp16-buffer]"
UNEXPLAINED = "linear_q4gsw[M1-K64-N40-g32-fp32-buffer]"
SAME = "tan[W6-fp32-buffer]"


def _lines(device: str, traits: dict, *, mali: bool) -> list[dict]:
    info = dict(DEVICE_INFO[device], traits=traits)
    known = {"id": "var-half-one-pass-contracted", "outcome": "known", "reason": "contracted", "traits": ["fma"]}
    return [
        result(FLUSHED, device, device_info=info, flags=["spec-allowed:f32_denorm"] if mali else []),
        result(CONTRACTED, device, "FAIL_NUMERIC" if mali else "PASS", device_info=info,
               expectation=known if mali else {}),
        result(UNEXPLAINED, device, "FAIL_NUMERIC" if mali else "PASS", device_info=info),
        result(SAME, device, device_info=info),
    ]


def _page(tmp_path):
    files = [write_jsonl(tmp_path / "mali.jsonl", _lines("mali", MALI, mali=True)),
             write_jsonl(tmp_path / "adreno.jsonl", _lines("adreno", ADRENO, mali=False))]
    index = render_reports(files, tmp_path / "report")
    return parse_html(index.cross_device.read_text(encoding="utf-8")).find("section", id="traits")


def _cases(section, table_id: str) -> list[str]:
    """The case of each row (a cell holds the case id, then its shader)."""
    table = section.find("table", id=table_id)
    cells = [] if table is None else [tr.find("td").text for tr in table.find("tbody").find_all("tr")]
    return [cell[:cell.index("]") + 1] for cell in cells]


def test_each_trait_is_listed_per_device_those_that_differ_first(tmp_path):
    rows = _page(tmp_path).find("table", id="trait-table").find("tbody").find_all("tr")
    table = [(tr.find("th").text, [td.text for td in tr.find_all("td")], "differs" in tr.classes) for tr in rows]
    devices = sorted(["mali", "adreno"])
    assert [name for name, _, _ in table] == ["f32_denorm", "subgroup_size", "fma"]
    assert [differs for _, _, differs in table] == [True, True, False]
    by_device = dict(zip(devices, zip(*[values for _, values, _ in table])))
    assert by_device["mali"][0] == "flushed" and by_device["adreno"][0] == "preserved"


def test_disagreements_are_grouped_by_the_trait_their_results_name(tmp_path):
    section = _page(tmp_path)
    assert _cases(section, "trait-f32_denorm-table") == [FLUSHED]      # a spec-allowed pass on one device
    assert _cases(section, "trait-fma-table") == [CONTRACTED]          # a known bug keyed by fma
    assert _cases(section, "trait-none-table") == [UNEXPLAINED]        # no trait names it: look here
    assert SAME not in section.text


def test_a_program_that_hits_a_known_bug_fails_and_names_it(tmp_path):
    """(On the device page, not the cross-device one; here for the trait-era expectation records.)"""
    found = {"id": "etvk-conv2d-dw-base-clipped-window", "outcome": "known-bug", "reason": "conv2d_dw.glsl ...",
             "minimal": "input [1, 1, 2, 2], weight [1, 1, 2, 2], padding 1"}
    lines = [result("user.convnext[fp32-vulkan]", "mali", "FAIL_NUMERIC", device_info=DEVICE_INFO["mali"],
                    expectation=found)]
    render_reports([write_jsonl(tmp_path / "mali.jsonl", lines)], tmp_path / "report")
    page = (tmp_path / "report" / "mali.html").read_text(encoding="utf-8")
    assert "This program hits known ET-VK bug <code>etvk-conv2d-dw-base-clipped-window</code>" in page
    assert "minimal shape: input [1, 1, 2, 2]" in page and "The program's failure stands" in page
    assert 'id="status-known"' not in page, "not grouped with the known bugs: the program still fails"
