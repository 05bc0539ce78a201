"""``et_vk.q8ta_linear`` / ``q8ta_linear_gemv`` on the pinned main tree: the weight packed as the numpy layout says
(texture2d, and a buffer past the 2-D limit), each route runs the variant it names, the C++'s checks refuse what it
refuses, and a launcher passing the shader an output zero point off by one is caught."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.cases.kernel_suites.quantized import q8ta_linear as suite
from vkdiff.cases.kernels import all_cases
from vkdiff.datamodel import Status
from vkdiff.device.runtime import resources
from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.launchers import q8ta_linear
from vkdiff.executors.op_graph import OpGraph
from vkdiff.harness import kernels
from vkdiff.reference.quantized import packing

pytestmark = [requires_tree, requires_vulkan]

PLAIN = {op: next(c for c in all_cases(rf"^{stem}\[M\d+-K(100|260)-N20-int8-buffer-int8x4_4\w+-dot-bias\]$"))
         for op, stem in ((suite.LINEAR, "q8ta_linear"), (suite.GEMV, "q8ta_linear_gemv"))}
OTHER_LAYOUTS = {suite.LINEAR: ("int8x4_4w", "int8x4_4c", "int8x4_4c1w", "int8x4_4w4c"),
                 suite.GEMV: ("int8x4_4h4w", "int8x4_4c", "int8x4_4c1w", "int8x4_4w4c")}
"""The int8x4 layouts each op's ``check_packed_dim_info`` refuses."""


def _args(case) -> dict:
    return suite.make_args(case, np.random.default_rng(case.seed()))


@pytest.mark.parametrize("n,storage", [(10, "texture2d"), (suite.WIDE_N, "buffer")])
def test_weight_blocks_land_where_the_numpy_layout_puts_them(et_ctx, n, storage):
    w = np.random.default_rng(n).integers(-127, 128, (n, 12)).astype(np.int8)
    graph = ComputeGraph(et_ctx)
    ref = TensorRef(id="weights", data=w)
    packed = q8ta_linear.prepack_quantized_linear_weight(graph, ref)
    assert packed.storage == storage and graph.dispatches[-1].shader == f"pack_q8_linear_weight_{storage}"
    expected = packing.pack_q8_linear_weight(w)
    np.testing.assert_array_equal(resources.read_raw(graph.device, packed)[: expected.size].reshape(expected.shape),
                                  expected)
    assert q8ta_linear.prepack_quantized_linear_weight(graph, ref) is packed  # the prepack cache


@pytest.mark.parametrize("route", ["dot", "fallback"])
@pytest.mark.parametrize("op", [suite.LINEAR, suite.GEMV])
def test_each_route_runs_the_variant_it_names(et_ctx, op, route):
    case = dataclasses.replace(PLAIN[op], options=suite.q8ta_case(op, PLAIN[op].shape, route, ()).options)
    result = kernels.run_case(et_ctx, case)
    assert result.status == Status.PASS.name, result.reason
    stem = "q8ta_linear_gemv" if op == suite.GEMV else "q8ta_linear"
    assert result.shader == f"{stem}{'_fallback' if route == 'fallback' else ''}_float"
    assert result.dispatch["local"] == ([1, 1, 64] if op == suite.GEMV else [4, 16, 1])
    assert result.dispatch["spec"] == {3: 1, 4: 0}


def test_a_case_declaring_another_route_is_refused(et_ctx):
    case = PLAIN[suite.LINEAR]
    with pytest.raises(ValueError, match="declares route=fallback but the device profile takes route=dot"):
        OpGraph(et_ctx, case.op, _args(case), storage="buffer", layout=case.layout, dtype=np.int8, route="fallback")


@pytest.mark.parametrize("op", [suite.LINEAR, suite.GEMV])
def test_other_int8x4_layouts_are_refused_as_the_cpp_checks(et_ctx, op):
    case, check = PLAIN[op], ("q8ta_linear_gemv" if op == suite.GEMV else "q8ta_linear")
    for layout in OTHER_LAYOUTS[op]:
        with pytest.raises(EtVkRefusal, match=rf"VK_CHECK_COND\({check}_check_packed_dim_info\(graph\."
                                              rf"packed_dim_info_of\(packed_int8_input\)\)\) failed: the "
                                              rf"packed_int8_input is {layout} buffer"):
            OpGraph(et_ctx, op, _args(case), storage="buffer", layout=case.layout, dtype=np.int8,
                    **{"storage.x": f"buffer:{layout}"})
        with pytest.raises(EtVkRefusal, match=r"packed_dim_info_of\(packed_int8_output\)"):
            OpGraph(et_ctx, op, _args(case), storage="buffer", layout=case.layout, dtype=np.int8, out_layout=layout)


def test_k_not_a_multiple_of_4_and_unknown_activations_are_refused(et_ctx):
    case = PLAIN[suite.LINEAR]
    args = _args(case)
    odd = {**args, "x": args["x"][:, :98], "weights": args["weights"][:, :98]}
    with pytest.raises(EtVkRefusal, match=r"VK_CHECK_COND\(K % 4 == 0\) failed: K=98"):
        OpGraph(et_ctx, case.op, odd, storage="buffer", layout=case.layout, dtype=np.int8)
    with pytest.raises(EtVkRefusal, match="Unknown activation type: gelu"):
        OpGraph(et_ctx, case.op, {**args, "activation": "gelu"}, storage="buffer", layout=case.layout,
                dtype=np.int8)


@pytest.mark.parametrize("op", [suite.LINEAR, suite.GEMV])
def test_an_output_zero_point_off_by_one_is_caught(et_ctx, monkeypatch, op):
    """The push constants the launcher passes the shader, with ``output_zp + 1``: every code that does not
    saturate is one too high, and the exact comparison fails."""
    honest = q8ta_linear.requant_push_constants

    def off_by_one(input_scale, input_zp, output_scale, output_zp):
        return honest(input_scale, input_zp, output_scale, output_zp + 1)

    case = PLAIN[op]
    assert kernels.run_case(et_ctx, case).status == Status.PASS.name
    monkeypatch.setattr(q8ta_linear, "requant_push_constants", off_by_one)
    result = kernels.run_case(et_ctx, case)
    assert result.status == Status.FAIL_NUMERIC.name and result.metrics["max_abs"] == 1.0
    assert result.metrics["mismatches"] >= 0.9 * np.prod([case.size("M"), case.size("N")])
