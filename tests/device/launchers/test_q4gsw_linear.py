"""``Q4gswLinear.cpp``'s ``__w_4x8`` path (the live ``et_vk.linear_q4gsw`` since v1.4.0) on the pinned main tree."""

from __future__ import annotations

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.cases.kernels import all_cases
from vkdiff.datamodel import Status
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.staging import graph_input
from vkdiff.device.launchers.q4gsw_linear import pick_coop_variant_for_n, q4gsw_linear
from vkdiff.harness import kernels

pytestmark = [requires_tree, requires_vulkan]


@pytest.mark.parametrize("case_id, shader", [
    ("linear_q4gsw[M1-K256-N40-g32-fp32-buffer]", "q4gsw_linear_gemv_coop__w_4x8_nc_buffer_g1w64_buffer_float"),
    ("linear_q4gsw[M1-K256-N4096-g32-fp32-texture3d]",
     "q4gsw_linear_gemv_coop__w_4x8_nc_buffer_g4w16_texture3d_float"),
    ("linear_q4gsw[M13-K256-N40-g32-fp32-texture3d]", "q4gsw_linear_gemm__w_4x8_nc_texture3d_float"),
    ("linear_q4gsw[M200-K160-N52-g32-fp32-buffer]", "q4gsw_linear_gemm__w_4x8_nc_buffer_float"),
    ("linear_q4gsw[M1-K256-N40-g32-fp16-texture3d]", "q4gsw_linear_gemv_coop__w_4x8_nc_buffer_g1w64_texture3d_half"),
])
def test_live_path_shader_and_result(et_ctx, case_id, shader):
    (case,) = [c for c in all_cases() if c.id == case_id]
    result = kernels.run_case(et_ctx, case)
    assert result.status == Status.PASS.name, result.reason
    assert result.shader == shader and result.shaders[0] == "pack_q4_linear_weight__w_4x8_nc_buffer"
    assert result.metrics["unwritten"] == 0


def test_coop_variant_by_n():
    assert [pick_coop_variant_for_n(n)[0] for n in (64, 1024, 1025, 4096, 4097)] == [
        "_g1w64", "_g1w64", "_g4w16", "_g4w16", "_g8w8"]


def test_each_use_packs_the_weight_again(et_ctx):
    """Unlike QuantizedLinear.cpp, prepack_q4_w_4x8_nc_buffer has no prepack cache: two consumers pack twice."""
    rng = np.random.default_rng(11)
    graph = ComputeGraph(et_ctx)
    x = graph_input(graph, rng.standard_normal((5, 64)).astype(np.float32), "buffer", "width")
    args = {"self": x, "weights": TensorRef(id=1, data=rng.integers(0, 256, (32, 32), dtype=np.uint8)),
            "weight_scales": TensorRef(id=2, data=rng.uniform(0.01, 0.02, (2, 32)).astype(np.float32)),
            "group_size": 32, "bias": None}
    outs = [graph.add_tensor((5, 32), "float32", "buffer") for _ in range(2)]
    for out in outs:
        q4gsw_linear(graph, args, out)
    graph.execute()
    packs = [d.shader for d in graph.dispatches if d.shader.startswith("pack_q4")]
    assert packs == ["pack_q4_linear_weight__w_4x8_nc_buffer"] * 2
    gated = [d for d in graph.dispatches if d.shader.startswith("q4gsw_linear_gemv")]
    assert len(gated) == 2 and all(d.skipped for d in gated)
    np.testing.assert_array_equal(graph.read(outs[0]), graph.read(outs[1]))
