"""``vkdiff coverage``: the tree's registered ops against launchers, references and suites; variants dispatched."""

from __future__ import annotations

import json

from vkdiff.datamodel import Result
from vkdiff.entry import cli
from vkdiff.tools import coverage


def test_registered_ops_are_read_from_the_tree_and_sorted_into_families(et_tree):
    ops = {row.op: row for row in coverage.op_coverage(et_tree)}
    assert len(ops) == 157 and ops["aten.relu.default"].file == "UnaryOp.cpp"
    assert ops["aten.relu.default"].covered and ops["aten.relu.default"].cases > 0
    assert ops["et_vk.q4gsw_requant.default"].covered and ops["et_vk.q4gsw_requant.default"].family == "in scope"
    assert {ops[op].family for op in ("et_vk.q8ta_conv2d.default", "aten._weight_int8pack_mm.default",
                                      "quantized_decomposed.quantize_per_tensor.default")} == {"static-int8"}
    assert {ops[op].family for op in ("et_vk.adamw_step.default", "et_vk.linear_q4gsw_backward.default",
                                      "et_vk.fused_ce.default")} == {"training"}
    assert ops["testing.compute_attn_weight_with_kv_cache.default"].family == "test-only"
    assert ops["add"].covered, "a SymInt operator registered by bare name is the reference's _operator.add"
    summary = coverage.summary(list(ops.values()))
    scope = summary["families"]["in scope"]
    assert summary["in_scope_covered_percent"] == round(100 * scope["both"] / scope["ops"], 1)


def test_variants_dispatched_by_results(et_tree):
    results = [Result(case="relu[W67-fp32-buffer]", op="aten.relu.default", device="d", status="PASS",
                      shader="clamp_float_buffer", shaders=["nchw_to_buffer_float_float", "clamp_float_buffer"]),
               Result(case="x", op="x", device="d", status="PASS", shader="not_a_variant", shaders=[])]
    found = coverage.variant_coverage(et_tree, results)
    assert found["dispatched_variants"] == 2 and found["dispatched_templates"] == 2
    assert found["variants"] > 1000 and "unary_op.glsl" not in found["templates_never_dispatched"]


def test_cli_prints_json_and_the_uncovered_table(et_tree, capsys):
    assert cli.main(["coverage", "--et-src", str(et_tree), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["summary"]["registered"] == 157 and document["variants"] is None
    assert cli.main(["coverage", "--et-src", str(et_tree), "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "in scope with launcher and reference:" in out and "every op" in out
    assert "testing.compute_attn_weight_with_kv_cache.default" in out
