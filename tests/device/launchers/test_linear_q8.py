"""The float-activation quantized linears' launchers (issue 23) on the first adapter: each route dispatches the
shader, global and local size the ported C++ gives, and matches the reference; a corrupted constant does not."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.cases.kernels import all_cases
from vkdiff.datamodel import Status
from vkdiff.executors import references
from vkdiff.executors import kernel as executor
from vkdiff.harness import kernels
from vkdiff.verdicts.kernels import record_launch

pytestmark = [requires_tree, requires_vulkan]

ROUTES = {
    "weight_int8pack_mm[M3-K64-N16-fp32-buffer-tiled_o4x3]":
        ("linear_qcs8w_tiled_buffer_buffer_texture2d_texture2d_float_o4x3", [4, 1, 1], [64, 1, 1]),
    "weight_int8pack_mm[M1-K256-N16-fp32-texture3d-coop]":
        ("linear_qcs8w_coop_texture3d_texture3d_texture2d_texture2d_float_o4x1", [4, 1, 1], [8, 1, 8]),
    "weight_int8pack_mm[M5-K30-N16-fp32-texture3d-fallback]":
        ("linear_qcs8w_W_packed_W_packed_float_texture3d", [80, 1, 1], [64, 1, 1]),
    "linear_qcs4w[M2-K64-N32-fp32-buffer-tiled_o4x2]":
        ("linear_qcs4w_tiled_buffer_buffer_buffer_texture2d_float_o4x2", [4, 1, 1], [64, 1, 1]),
    "linear_q8csw[M13-K64-N20-fp32-buffer-tiled-bias]": ("linear_q8csw_tiled_buffer_texture2d_float", [5, 4, 1],
                                                         [4, 16, 1]),
    "linear_q8ta_q8csw[M13-K64-N20-fp32-texture3d-int8]":
        ("linear_q8ta_q8csw_tiled_texture3d_buffer_texture2d_float", [3, 4, 1], [4, 16, 1]),
    "q4gsw_requant[N12-K16-g16-int32-buffer]": ("q4gsw_requant_buffer_float", [4, 2, 1], [8, 8, 1]),
}
"""Case → (shader, global, local) as the C++ computes them for the case's sizes."""


def _case(case_id: str):
    return next(c for c in all_cases("^" + re.escape(case_id) + "$"))


@pytest.mark.parametrize("case_id", sorted(ROUTES))
def test_route_dispatches_the_ported_shader_and_sizes(et_ctx, case_id):
    result = kernels.run_case(et_ctx, _case(case_id))
    assert result.status == Status.PASS.name, result.reason
    shader, global_wg, local_wg = ROUTES[case_id]
    assert (result.shader, result.dispatch["global"], result.dispatch["local"]) == (shader, global_wg, local_wg)


def test_prepack_and_quantize_shaders(et_ctx):
    qcs4w = kernels.run_case(et_ctx, _case("linear_qcs4w[M2-K64-N32-fp32-buffer-tiled_o4x2]"))
    assert qcs4w.shaders[0] == "pack_int4_linear_weight_transposed_interleaved_nobitw8buffer_buffer"
    q8ta = kernels.run_case(et_ctx, _case("linear_q8ta_q8csw[M13-K64-N20-fp32-texture3d-int8]"))
    assert "pack_q8_linear_weight_texture2d" in q8ta.shaders
    assert q8ta.shaders[-2:] == ["quantize_and_pack_4h4w_per_tensor_buffer_texture3d_float",
                                 "linear_q8ta_q8csw_tiled_texture3d_buffer_texture2d_float"]
    requant = kernels.run_case(et_ctx, _case("q4gsw_requant[N12-K16-g16-int32-buffer]"))
    assert requant.dispatch["spec"] == {3: 16} and requant.metrics["max_abs"] == 0


def _corrupted(et_ctx, case_id: str, corrupt) -> str:
    """The launcher sees ``corrupt(args)``; the reference keeps the true arguments."""
    case = _case(case_id)
    prepared = references.prepare_case(case)
    wrong = dataclasses.replace(prepared, args=corrupt(dict(prepared.args)))
    result = kernels.base_result(case, et_ctx.info.slug, Status.ERROR)
    record_launch(result, executor.checked(case.op, executor.launch(et_ctx, case, wrong), prepared))
    return result.status


@pytest.mark.parametrize("case_id,corrupt", [
    ("weight_int8pack_mm[M4-K64-N16-fp32-texture3d-tiled_o4x4]",
     lambda a: {**a, "mat2": np.ascontiguousarray(a["mat2"][::-1])}),
    ("linear_qcs4w[M4-K64-N16-fp32-buffer-tiled_o4x4]",
     lambda a: {**a, "weight": ((a["weight"] >> 4) | (a["weight"] << 4)).astype(np.uint8)}),
    ("linear_q8ta_q8csw[M8-K64-N16-fp32-buffer-int8-zp_lo]",
     lambda a: {**a, "weight_sums": -a["weight_sums"]}),
    ("q4gsw_requant[N32-K64-g32-int32-buffer]", lambda a: {**a, "scales": a["scales"] * np.float32(1.5)}),
])
def test_a_corrupted_constant_fails_numeric(et_ctx, case_id, corrupt):
    """Reversed weight rows, swapped nibbles, negated weight sums (the zero-point correction's sign), scaled
    requantization scales: each is caught."""
    assert _corrupted(et_ctx, case_id, corrupt) == Status.FAIL_NUMERIC.name


def test_tiled_shader_is_fixed_while_the_global_size_follows_m(et_ctx):
    """Built at M = 13 (``_o4x1``), run at 12: the variant stays, the global size counts 3-row tiles."""
    case = _case("weight_int8pack_mm[M13-K64-N64-fp32-buffer-tiled_o4x1]")
    prepared = references.prepare_case(case)
    graph = executor.build(et_ctx, case, prepared)
    graph.launch()
    smaller = dataclasses.replace(case, shape=(("M", 12), ("K", 64), ("N", 64)))
    graph.resize({**prepared.args, "self": references.prepare_case(smaller).args["self"]})
    node = next(n for n in graph.graph.execute_nodes if n.picked and n.picked[0].startswith("linear_qcs8w"))
    shader, global_wg, _ = node.picked
    assert shader.endswith("_o4x1") and global_wg == (16 * 4, 1, 1)
    assert graph.output_sizes == [(12, 64)]
