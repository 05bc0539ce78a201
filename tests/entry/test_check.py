"""``vkdiff check``: programs built with ExecuTorch's own API (not vkdiff's lowering), checked node by node."""

from __future__ import annotations

from pathlib import Path

from tests.harness.tampering import add_half_at_3, nudge
from tests.testutils import requires_tree, requires_vulkan
from vkdiff.datamodel import Status
from vkdiff.entry import cli
from vkdiff.store import read

pytestmark = [requires_vulkan, requires_tree]
FACTORIES = Path(__file__).parents[1] / "programs" / "factories.py"


def _device(path: Path):
    [result] = [r for r in read([path]).results if r.rule == "device"]
    return result


def test_two_partitions_with_a_cpu_op_between_run_every_node_named_by_module_path(two_partitions, et_tree, tmp_path):
    from vkdiff.program.pte import load_pte

    pte, etrecord = two_partitions
    plan = load_pte(pte.read_bytes(), pte.name).methods["forward"]
    assert [i.kind for i in plan.instructions] == ["delegate", "kernel", "delegate"]
    assert plan.instructions[1].op == "aten::cumsum.out"
    out = tmp_path / "r.jsonl"
    assert cli.main(["check", str(pte), "--etrecord", str(etrecord), "--et-src", str(et_tree),
                     "--results", str(out)]) == 0
    result = _device(out)
    assert result.status == Status.PASS.name, result.reason
    nodes = result.metrics["nodes"]
    assert {n["delegate"] for n in nodes} == {0, 1} and all(n["status"] == "PASS" for n in nodes)
    linear = {n["delegate"]: n["source"] for n in nodes if n["op"] == "et_vk.linear_q4gsw.default"}
    assert linear == {0: "encoder, factories.py:23", 1: "head, factories.py:25"}
    assert all(n["source"] and all(o.get("global_status") == "PASS" for o in n["outputs"]) for n in nodes)
    table = (tmp_path / "r.nodes.csv").read_text().splitlines()
    assert len(table) == 1 + len(nodes) and table[0].startswith("case,device,step,delegate,node_id,debug_handles")


def test_a_fault_in_one_node_is_reported_at_that_node_with_its_source_line(two_partitions, et_ctx, et_tree):
    from vkdiff.harness.device_models import run_prepared
    from vkdiff.subjects.programs import CheckOptions, pte_cases

    pte, etrecord = two_partitions
    [case] = pte_cases(pte, CheckOptions(etrecord=etrecord), ("vkdiff", "check", str(pte)))
    result = run_prepared(et_ctx, model=case.model, ident=case.ident, tree=et_tree,
                          tamper={1: nudge(2, add_half_at_3)})
    assert result.status == Status.FAIL_NUMERIC.name, result.reason
    assert result.node == {"index": 2, "op": "et_vk.linear_q4gsw.default", "delegate": 1,
                           "source": "head, factories.py:25", "args": {"group_size": "32"}}
    assert "first diverging node 2 of delegate 1 (et_vk.linear_q4gsw.default" in result.reason
    bad = [(n["delegate"], n["index"]) for n in result.metrics["nodes"] if n["status"] != "PASS"]
    assert bad == [(1, 2)], "later nodes fed the wrong value must not blame themselves"


def test_et_vk_debug_handles_name_graph_positions_not_the_edge_programs_nodes(two_partitions):
    """Upstream finding: ``VkGraphBuilder.process_node`` overwrites ``debug_handle`` with the node's position before
    ``DelegateMappingBuilder`` reads it, so the ETRecord maps Vulkan nodes to unrelated edge nodes (here: to handles
    beyond the model's 4 edge nodes, or to other modules). vkdiff's sources come from re-lowering instead."""
    from vkdiff.lowering.etrecord import read_etrecord

    _, etrecord = two_partitions
    record = read_etrecord(etrecord)
    handles = {h for entry in record._delegate_map["forward"].values() for hs in entry["delegate_map"].values()
               for h in hs}
    edge = {n.meta.get("debug_handle") for n in record.edge_dialect_program.graph_module.graph.nodes
            if n.op == "call_function"}
    assert not handles <= edge, "ET-VK's map resolves now: map through it and drop the re-lowering"


def test_a_module_factory_checks_with_a_recipe_from_a_clean_checkout(et_tree, tmp_path):
    out = tmp_path / "m.jsonl"
    assert cli.main(["check", f"{FACTORIES}:two_partitions", "--recipe", "8da4w", "--et-src", str(et_tree),
                     "--results", str(out)]) == 0
    results = {r.rule: r for r in read([out]).results}
    assert results["numerics"].status == results["device"].status == Status.PASS.name
    ops = {n["op"] for n in results["device"].metrics["nodes"]}
    assert {"torchao.choose_qparams_affine.default", "et_vk.linear_dq8ca_q4gsw.default"} <= ops
    assert results["device"].repro.startswith(f"vkdiff check {FACTORIES}:two_partitions --recipe 8da4w")


def test_a_delegate_with_a_minus_inf_scalar_decodes_and_runs_every_node(masked_block, et_tree, tmp_path):
    """The masked attention block (where, layer_norm, softmax, full with -inf) runs node by node on the device."""
    from vkdiff.program.pte import load_pte

    masked_block = masked_block[0]
    graph = load_pte(masked_block.read_bytes()).methods["forward"].delegates[0].graph
    assert any(v.get("double_val") == float("-inf") for v in graph.values)
    out = tmp_path / "b.jsonl"
    assert cli.main(["check", str(masked_block), "--et-src", str(et_tree), "--results", str(out)]) == 0
    result = _device(out)
    assert result.status == Status.PASS.name, result.reason
    ops = {node["op"] for node in result.metrics["nodes"]}
    assert {"aten.where.self", "aten.native_layer_norm.default", "aten._softmax.default",
            "aten.full.default"} <= ops


LOGICAL_NOT = "aten.logical_not.default"


def _holding(pte: Path, op: str) -> list[int]:
    """Indexes of the Vulkan delegates of ``pte`` whose chain holds ``op``."""
    from vkdiff.program.pte import load_pte

    plan = load_pte(pte.read_bytes(), pte.name).methods["forward"]
    return [d.index for d in plan.delegates if d.graph is not None and any(o.name == op for o in d.graph.ops)]


def test_a_delegate_holding_an_op_the_runtime_does_not_register_fails_check_before_any_device_work(
        gqa_block, et_tree, tmp_path):
    """GQA attention with a boolean mask: the pinned tree's partitioner accepts ``aten.logical_not.default``
    (``op_registry.py``) but no ``VK_REGISTER_OP`` names it, so ``VulkanBackend::build_graph`` stops at "Missing
    operator" on every device: FAIL_CHECK naming the op, not NOT_RUN for a missing launcher."""
    from vkdiff.device.shaders.trees import origin_of

    pte, etrecord = gqa_block
    holding = _holding(pte, LOGICAL_NOT)
    assert len(holding) == 2
    out = tmp_path / "g.jsonl"
    assert cli.main(["check", str(pte), "--etrecord", str(etrecord), "--et-src", str(et_tree),
                     "--results", str(out)]) == cli.EXIT_FAIL
    result = _device(out)
    assert result.status == Status.FAIL_CHECK.name, result.reason
    assert result.reason == "; ".join(
        f"delegate {d}: ET-VK cannot load this delegate: {LOGICAL_NOT} is not registered by the runtime of "
        f"{origin_of(et_tree)} (VK_REGISTER_OP)" for d in holding)
    assert result.node["op"] == LOGICAL_NOT and result.node["delegate"] == holding[0]
    assert result.metrics["unregistered"] == {str(d): [LOGICAL_NOT] for d in holding}
    assert "nodes" not in result.metrics, "judged before any node ran on the device"


def test_the_registered_ops_are_read_from_the_tree_the_run_uses(gqa_block, tmp_path):
    """A tree whose runtime registers every op of the program loads it; one without logical_not does not; a tree
    without runtime sources says nothing."""
    from vkdiff.datamodel import PreparedProgram, Tolerance
    from vkdiff.device.runtime.registrations import IMPL_SUBDIR
    from vkdiff.harness.device_models import unloadable_on
    from vkdiff.program.pte import load_pte

    program = load_pte(gqa_block[0].read_bytes(), "gqa.pte")
    model = PreparedProgram(case_id="gqa", program=program, steps=[], tolerance=Tolerance())
    ops = {op.name for d in model.plan.delegates if d.graph is not None for op in d.graph.ops}
    trees = {}
    for name, registered in (("all", ops), ("without", ops - {LOGICAL_NOT})):
        impl = tmp_path / name / IMPL_SUBDIR
        impl.mkdir(parents=True)
        (impl / "Ops.cpp").write_text("".join(f"  VK_REGISTER_OP({op}, fn);\n" for op in sorted(registered)))
        trees[name] = tmp_path / name
    assert unloadable_on(model, trees["all"]) is None
    status, fields = unloadable_on(model, trees["without"])
    assert status is Status.FAIL_CHECK and fields["node"]["op"] == LOGICAL_NOT
    assert str(trees["without"]) in fields["reason"]
    assert unloadable_on(model, tmp_path) is None and unloadable_on(model, None) is None


def test_a_users_llm_config_is_exported_with_export_llama_and_checked_as_a_generation(et_tree, tmp_path):
    params = Path(__file__).parents[1] / "programs" / "tiny_params.json"
    out = tmp_path / "l.jsonl"
    assert cli.main(["check", "--llama", str(params), "--qmode", "4w", "--decode-steps", "3", "--et-src",
                     str(et_tree), "--results", str(out)]) == 0
    results = {r.rule: r for r in read([out]).results}
    device = results["device"]
    assert device.status == Status.PASS.name, device.reason
    steps = device.metrics["steps"]
    assert [s["kind"] for s in steps] == ["prefill", "decode", "decode", "decode"]
    assert all(s["token_matches"] for s in steps)
    sources = {n["source"].split(",")[0] for n in device.metrics["nodes"] if n["op"] == "et_vk.linear_q4gsw.default"}
    assert {"layers.0.attention.wq", "layers.0.feed_forward.w2", "output"} <= sources
    assert results["expected_fusions"].status == results["numerics"].status == Status.PASS.name


def test_a_bad_llm_config_is_one_line(capsys, tmp_path):
    params = tmp_path / "params.json"
    params.write_text('{"dim": 32, "n_layers": 1}')
    capsys.readouterr()
    assert cli.main(["check", "--llama", str(params)]) == cli.EXIT_USAGE
    assert capsys.readouterr().err.strip() == f"vkdiff: error: --llama {params}: params.json lacks n_heads, vocab_size"
