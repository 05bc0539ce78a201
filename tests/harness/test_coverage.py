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


def test_logical_not_is_accepted_by_the_partitioner_and_registered_by_no_runtime_line(et_tree):
    from vkdiff.tools import registrations

    accepted = {row.op: row for row in registrations.accepted_not_registered(et_tree)}
    assert len(accepted) == 24 and sum(row.cannot_load for row in accepted.values()) == 21
    logical_not = accepted["aten.logical_not.default"]
    assert logical_not.fate == registrations.CANNOT_LOAD and logical_not.cannot_load
    assert logical_not.where == "op_registry.py:1830 (register_logical_not)"
    assert not accepted["getitem"].cannot_load and "VkGraphBuilder" in accepted["getitem"].fate
    assert accepted["_assert_scalar.default"].fate == "removed by RemoveAssertsTransform (_passes/remove_asserts.py)"
    assert accepted["aten.alias_copy.default"].fate.startswith("removed by RemoveRedundantOpsTransform")
    per_channel = accepted["quantized_decomposed.dequantize_per_channel.default"]
    assert per_channel.cannot_load and "FoldQDQPass" in per_channel.fate
    assert "patterns/quantized_embedding.py (into et_vk.embedding_q4gsw.default)" in \
        accepted["quantized_decomposed.embedding_4bit.dtype"].fate
    assert {"add", "sym_size.int", "aten.where.self"}.isdisjoint(accepted), "registered ops are no mismatch"


def test_registered_ops_no_partitioner_key_names_come_with_how_a_graph_holds_them(et_tree):
    from vkdiff.tools import registrations

    reverse = {row.op: row.fate for row in registrations.registered_not_accepted(et_tree)}
    assert len(reverse) == 24
    assert reverse["et_vk.prepack.default"] == "inserted by vulkan_preprocess (_passes/insert_prepack_nodes.py)"
    assert reverse["et_vk.conv1d_pw.default"] == "called by Convolution.cpp through VK_GET_OP_FN"
    assert reverse["conv_with_clamp.default"].startswith("et_vk.conv_with_clamp.default as it serializes")
    assert reverse["testing.compute_attn_weight_with_kv_cache.default"].startswith("test-only")
    assert "sdpa_with_kv_cache.default" not in reverse, "a string key llama::sdpa_with_kv_cache names it"


def test_the_mismatches_are_computed_from_the_tree(et_tree, tmp_path):
    """A copy of the tree whose runtime registers logical_not and no longer registers where.self swaps them."""
    import shutil

    from vkdiff.device.runtime.registrations import IMPL_SUBDIR
    from vkdiff.tools import registrations

    vulkan = et_tree / "backends/vulkan"
    shutil.copytree(vulkan, tmp_path / "backends/vulkan", ignore=shutil.ignore_patterns("glsl", "third-party", "test"))
    where = tmp_path / IMPL_SUBDIR / "Where.cpp"
    where.write_text(where.read_text().replace("VK_REGISTER_OP(aten.where.self,", "VK_REGISTER_OP(aten.logical_not.default,"))
    accepted = {row.op for row in registrations.accepted_not_registered(tmp_path)}
    assert "aten.where.self" in accepted and "aten.logical_not.default" not in accepted


def test_cli_lists_both_directions_with_their_fates(et_tree, capsys):
    assert cli.main(["coverage", "--et-src", str(et_tree), "--json"]) == 0
    registration = json.loads(capsys.readouterr().out)["registration"]
    assert registration["accepted"] == 157 and registration["registered"] == 157
    rows = {row["op"]: row for row in registration["accepted_not_registered"]}
    assert rows["aten.logical_not.default"] == {"op": "aten.logical_not.default",
                                                "where": "op_registry.py:1830 (register_logical_not)",
                                                "fate": "not registered: a delegate holding it cannot load",
                                                "cannot_load": True}
    assert len(registration["registered_not_accepted"]) == 24
    assert cli.main(["coverage", "--et-src", str(et_tree)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "not registered by the runtime (VK_REGISTER_OP): 24, 21 of them can reach a delegate" in out
    assert "aten.logical_not.default" in out and "registered by the runtime, never accepted by the partitioner: 24" in out
