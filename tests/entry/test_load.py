"""``vkdiff load``: every chosen variant of the tree loaded on each device, one record per variant; a pattern that
chooses nothing is a usage error before any device work, never an empty green run."""

from __future__ import annotations

import json

from tests.testutils import main_tree, requires_tree, requires_vulkan
from vkdiff.entry import cli

pytestmark = [requires_tree, requires_vulkan]


def test_the_chosen_variants_load_and_are_recorded(tmp_path, capsys):
    results = tmp_path / "load.jsonl"
    code = cli.main(["load", "--et-src", main_tree()[0], "--variants", "^binary_add_buffer", "--results", str(results)])
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert code == 0, capsys.readouterr()
    assert sorted(r["variant"] for r in records) == ["binary_add_buffer_float", "binary_add_buffer_half",
                                                     "binary_add_buffer_int32"]
    assert {(r["device"], r["transport"], r["status"]) for r in records} == {(records[0]["device"], "wgpu", "LOADED")}
    assert "3 LOADED" in capsys.readouterr().out


def test_a_pattern_that_chooses_no_variant_is_a_usage_error(tmp_path, capsys):
    results = tmp_path / "load.jsonl"
    code = cli.main(["load", "--et-src", main_tree()[0], "--variants", "^no_such_variant$", "--results", str(results)])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("vkdiff: error:")]
    assert code == cli.EXIT_USAGE and len(errors) == 1 and "matches none of the tree's" in errors[0], err
    assert not results.exists()
