"""``QuantizedLinear.cpp``'s linear_q4gsw tiled/coop kernels (dq8ca's weight-only fallback; the live path before
v1.4.0) of the pinned trees against the numpy reference, on the first adapter."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.cases.kernels import KernelCase, all_cases
from vkdiff.datamodel import Status
from vkdiff.device.runtime.context import DeviceContext
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.staging import graph_input
from vkdiff.device.launchers import LAUNCHERS, launcher_for
from vkdiff.device.launchers.quantized_linear import OP_Q4GSW as OP, quantized_linear_impl
from vkdiff.executors.op_graph import run_op
from vkdiff.executors import references
from vkdiff.executors import kernel as executor
from vkdiff.harness import kernels

pytestmark = [requires_tree, requires_vulkan]

SMALL = [c for c in all_cases(r"^linear_q4gsw_tiled\[") if c.size("N") < 100]

TILED = (("impl", "QuantizedLinear.cpp"),)
CASE = KernelCase(op=OP, name="linear_q4gsw_tiled", shape=(("M", 13), ("K", 256), ("N", 64), ("g", 32)),
                  dtype="fp32", storage="buffer", options=TILED)


@pytest.mark.parametrize("case", SMALL, ids=lambda c: c.id)
def test_case_passes(et_ctx, case):
    result = kernels.run_case(et_ctx, case)
    assert result.status == Status.PASS.name, result.reason
    assert result.metrics["unwritten"] == 0
    assert result.shader.startswith("linear_q4gsw_" + ("coop" if case.size("M") == 1 else "tiled"))
    assert result.shaders[0].startswith("pack_q4_linear_weight_")


@pytest.mark.parametrize("m", [1, 13])
def test_v1_3_1_tree_passes(et_tree_v131, m):
    """The older tree (``linear_q4gsw`` registered in ``QuantizedLinear.cpp`` itself) builds and matches too."""
    from tests.testutils import first_adapter
    from vkdiff.device.shaders.build import ShaderBuilder

    ctx = DeviceContext(*first_adapter(), ShaderBuilder(et_tree_v131))
    result = kernels.run_case(ctx, dataclasses.replace(CASE, shape=(("M", m), ("K", 256), ("N", 64), ("g", 32))))
    assert result.status == Status.PASS.name, result.reason


def _corrupt(monkeypatch, corrupt):
    """The launcher sees ``corrupt(args)``; the reference keeps the true arguments."""
    prepare = references.prepare_case

    def prepare_corrupted(case, session_seed=0):
        prepared = prepare(case, session_seed)
        return dataclasses.replace(prepared, args=corrupt(dict(prepared.args)))

    monkeypatch.setattr(executor, "prepare_case", prepare_corrupted)


def test_scales_in_untransposed_order_fail_numeric(et_ctx, monkeypatch):
    """A pass that forgets to transpose: the buffer holds [N, K/gs] order in a [K/gs, N] tensor."""
    def untransposed(args):
        scales_t = args["weight_scales"]
        args["weight_scales"] = np.ascontiguousarray(scales_t.T).reshape(scales_t.shape)
        return args

    _corrupt(monkeypatch, untransposed)
    result = kernels.run_case(et_ctx, CASE)
    assert result.status == Status.FAIL_NUMERIC.name
    assert "Mismatched elements" in result.reason
    assert result.metrics["sqnr_db"] < 20  # a correct fp32 run gives ~130 dB


def test_swapped_nibbles_fail_numeric(et_ctx, monkeypatch):
    def swapped(args):
        w = args["weights"]
        args["weights"] = ((w >> 4) | (w << 4)).astype(np.uint8)
        return args

    _corrupt(monkeypatch, swapped)
    assert kernels.run_case(et_ctx, CASE).status == Status.FAIL_NUMERIC.name


def test_variant_missing_is_not_run(et_ctx, monkeypatch):
    monkeypatch.setattr(et_ctx, "_variants", frozenset())
    result = kernels.run_case(et_ctx, CASE)
    assert result.status == Status.NOT_RUN.name
    assert "is not defined by" in result.reason


def test_a_variant_the_trees_own_cpp_asks_for_but_its_yaml_lacks_is_fail_check(et_ctx, monkeypatch):
    """The tree builds the shader's other variants and the port is current: ET-VK itself would throw."""
    shader = kernels.run_case(et_ctx, CASE).shader
    monkeypatch.setattr(et_ctx, "_variants", frozenset(et_ctx._variants) - {shader})
    result = kernels.run_case(et_ctx, CASE)
    assert result.status == Status.FAIL_CHECK.name
    assert result.reason.startswith(f"shader variant {shader} is not defined by ")
    assert "yet the tree's own C++ (QuantizedLinear.cpp, Common.cpp, as ported) asks for it" in result.reason


def test_repeat_runs_are_deterministic(et_ctx):
    assert kernels.run_case(et_ctx, CASE, repeat=3).status == Status.PASS.name


def test_numpy_wrapper_matches_the_generic_runner(et_ctx):
    """``run_op`` of the ``QuantizedLinear.cpp`` port on the case's arguments is the case's own launch: identical bits."""
    prepared = references.prepare_case(CASE)
    direct = run_op(et_ctx, OP, prepared.args, storage="buffer", impl="QuantizedLinear.cpp")
    generic = executor.launch(et_ctx, CASE, prepared)
    np.testing.assert_array_equal(direct.output, generic.output)
    assert direct.variant == generic.variant == "linear_q4gsw_tiled_buffer_texture2d_float"


def test_registered_with_its_port(et_tree, et_tree_v131):
    """Two implementations of the op: the tree's registration picks one (v1.3.1: this one; main: Q4gswLinear.cpp)."""
    launcher = next(x for x in LAUNCHERS[OP] if x.add_node is quantized_linear_impl)
    assert launcher.constants == {"weights", "weight_scales", "bias"}
    assert launcher.ports[0].file.endswith("QuantizedLinear.cpp") and len(launcher.ports[0].sha256) == 64
    assert launcher_for(OP, et_tree_v131) is launcher
    assert launcher_for(OP, et_tree).registered_in.endswith("Q4gswLinear.cpp")


def test_two_consumers_of_one_weight_prepack_it_once(et_ctx):
    """ET-VK's prepack cache is keyed by (constant, kernel): a weight shared by two linears is packed once."""
    prepared = references.prepare_case(CASE)
    args = prepared.args
    graph = ComputeGraph(et_ctx)
    weights = TensorRef(id=7, data=args["weights"])
    shared = dict(args, self=graph_input(graph, args["self"], "buffer", "width"), weights=weights,
                  weight_scales=TensorRef(id=8, data=args["weight_scales"]), bias=None)
    outs = [graph.add_tensor(prepared.expected.shape, "float32", "buffer") for _ in range(2)]
    for out in outs:
        quantized_linear_impl(graph, shared, out)
    graph.execute()
    packs = [d for d in graph.dispatches if d.prepack and d.shader.startswith("pack_q4")]
    assert [d.shader for d in packs] == ["pack_q4_linear_weight_texture2d"]
    assert len([d for d in graph.dispatches if d.shader.startswith("linear_q4gsw_tiled")]) == 2
    first, second = (graph.read(out) for out in outs)
    np.testing.assert_array_equal(first, second)
