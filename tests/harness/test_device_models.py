"""Model cases' delegates on the first adapter, node by node, with the pinned trees' real ET-VK kernels."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.harness.tampering import add_half_at_3, nudge
from tests.testutils import first_adapter, requires_tree, requires_vulkan
from vkdiff.cases.catalog import all_model_cases
from vkdiff.datamodel import Status
from vkdiff.device.graph import delegate as delegate_runtime
from vkdiff.harness.device_models import PORT_STALE_FLAG, check_on_device

pytestmark = [requires_tree, requires_vulkan]


def case(case_id: str):
    (found,) = all_model_cases("^" + re.escape(case_id) + "$")
    return found


@pytest.fixture(scope="module")
def v131_ctx(et_tree_v131):
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.runtime.context import DeviceContext

    return DeviceContext(*first_adapter(), ShaderBuilder(et_tree_v131))


@pytest.mark.parametrize("name", ["llama_proj[8da4w-vulkan]", "llama_proj[4w-vulkan-buffer]",
                                  "tied_embed_first[emb4w+4w-vulkan]", "two_heads[4w-vulkan]"])
def test_delegate_passes_node_by_node(et_ctx, et_tree, name):
    result = check_on_device(case(name), et_ctx, tree=et_tree)
    assert result.status == Status.PASS.name, result.reason
    nodes = result.metrics["nodes"]
    assert nodes and all(n["status"] == "PASS" and n["shader"] for n in nodes)
    assert result.metrics["vs_eager"]["max_abs"] < 1e-4 and result.knobs["route"] == "native"
    assert PORT_STALE_FLAG not in result.flags


def test_a_wrong_value_in_a_middle_node_names_exactly_that_node(et_ctx, et_tree):
    """A fault injected into node 9's output: node 9 diverges; later nodes, fed the wrong value, compute it right."""
    target = 9
    tamper = nudge(target, add_half_at_3)
    result = check_on_device(case("llama_proj[4w-vulkan]"), et_ctx, tree=et_tree, tamper=tamper)
    assert result.status == Status.FAIL_NUMERIC.name
    assert result.node["index"] == target and f"first diverging node {target} " in result.reason
    statuses = [n["status"] for n in result.metrics["nodes"]]
    assert statuses[target] == "FAIL_NUMERIC" and statuses.count("FAIL_NUMERIC") == 1
    assert [o["mismatches"] for o in result.metrics["nodes"][target]["outputs"]] == [1], "only the injected element"


def test_routes_mali_and_adreno_give_the_same_node_verdicts(et_ctx, et_tree):
    verdicts = {}
    for route in ("mali", "adreno"):
        result = check_on_device(case("llama_proj[8da4w-vulkan]"), et_ctx, tree=et_tree, route_name=route)
        assert result.metrics["route"]["name"] == route and result.knobs["route"] == route
        verdicts[route] = [(n["index"], n["status"], n["shader"]) for n in result.metrics["nodes"]]
    assert verdicts["mali"] == verdicts["adreno"]
    assert all(status == "PASS" for _, status, _ in verdicts["mali"])


def test_without_int8_dot_product_dq8ca_takes_the_weight_only_path(et_ctx, et_tree):
    result = check_on_device(case("llama_proj[8da4w-vulkan]"), et_ctx, tree=et_tree, route_name="no-dot-product")
    linear = [n for n in result.metrics["nodes"] if n["op"] == "et_vk.linear_dq8ca_q4gsw.default"]
    assert linear and all(n["shader"].startswith("linear_q4gsw_tiled_") for n in linear)


def test_float_zero_points_on_an_int8_binding_are_a_dtype_mismatch(v131_ctx, et_tree_v131, et_ctx, et_tree):
    """v1.3.1 names one choose_qparams variant whose zero-point image is int8; the fp32-zp recipe allocates float."""
    fp32zp = case("llama_proj[8da4w-fp32zp-vulkan]")
    old = check_on_device(fp32zp, v131_ctx, tree=et_tree_v131)
    assert old.status == Status.DTYPE_MISMATCH.name, old.reason
    assert "choose_qparams_per_row_texture3d_float" in old.reason and "(t_zps)" in old.reason
    assert "float32" in old.reason and old.node["index"] == 0
    assert check_on_device(fp32zp, et_ctx, tree=et_tree).status == Status.PASS.name


def test_port_stale_fires_on_a_tree_whose_ported_source_differs(v131_ctx, et_tree_v131):
    result = check_on_device(case("llama_proj[4w-vulkan-buffer]"), v131_ctx, tree=et_tree_v131)
    assert PORT_STALE_FLAG in result.flags
    stale = result.metrics["port_stale"]
    assert "BinaryOp.cpp" in stale["aten.add.Tensor"] and "UnaryOp.cpp" in stale["aten.sigmoid.default"]


def test_kernel_results_on_that_tree_say_port_stale_too_and_on_main_they_do_not(v131_ctx, et_ctx):
    from vkdiff.cases.kernels import all_cases
    from vkdiff.harness.kernels import run_case

    (add,) = all_cases(r"^add\[B1-H7-W64-fp32-buffer\]$")
    old = run_case(v131_ctx, add)
    assert old.status == Status.PASS.name and PORT_STALE_FLAG in old.flags
    assert "BinaryOp.cpp" in old.metrics["port_stale"]["aten.add.Tensor"]
    fresh = run_case(et_ctx, add)
    assert fresh.status == Status.PASS.name and PORT_STALE_FLAG not in fresh.flags


def test_an_op_without_launcher_is_not_run_naming_it(et_ctx, et_tree, monkeypatch):
    launchers = dict(delegate_runtime.LAUNCHERS)
    launchers.pop("aten.sigmoid.default")
    monkeypatch.setattr(delegate_runtime, "LAUNCHERS", launchers)
    result = check_on_device(case("llama_proj[4w-vulkan]"), et_ctx, tree=et_tree)
    assert result.status == Status.NOT_RUN.name and "aten.sigmoid.default" in result.reason


def test_inputs_and_outputs_are_probed_in_their_declared_dims(et_ctx, et_tree):
    from vkdiff.device.runtime.routing import route_for
    from vkdiff.lowering.lower import lower

    lowered = lower(case("embedding[emb4w-vulkan]"))
    (d,) = lowered.delegates
    tokens = np.arange(9, dtype=np.int64).reshape(1, 9) * 7 % 256
    run = delegate_runtime.run_delegate(et_ctx, d, [tokens], route=route_for("native", et_ctx.info), tree=et_tree)
    assert set(run.values) >= set(d.input_ids) | set(d.output_ids)
    assert run.outputs[0].shape == tuple(d.tensors[d.output_ids[0]].dims)


def test_repeat_names_the_first_node_whose_value_differs_bitwise_between_runs(et_ctx, et_tree):
    """A node whose output changes from one run to the next (here: only in the second graph) is NONDETERMINISTIC,
    named with its step and the count of differing elements, although each run alone is judged PASS."""
    target, builds = 9, []
    second = nudge(target, lambda flat: flat.__setitem__(slice(3, 5), np.nextafter(flat[3:5], np.inf)),
                   when=lambda: len(builds) == 2)

    def tamper(index, graph, outputs):
        if index == 0 and graph not in builds:
            builds.append(graph)
        second(index, graph, outputs)

    result = check_on_device(case("llama_proj[4w-vulkan]"), et_ctx, tree=et_tree, tamper=tamper, repeat=2)
    assert result.status == Status.NONDETERMINISTIC.name, result.reason
    found = result.metrics["nondeterministic"]
    assert (found["run"], found["step"], found["index"], found["differing"]) == (2, 0, target, 2)
    assert found["first_run_status"] == "PASS"
    assert result.node["index"] == target and f"node {target} (" in result.reason
