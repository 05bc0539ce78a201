"""``llama.custom_sdpa`` and ``et_vk.sdpa`` on the pinned main tree: each AV route runs the shader it names, the
Adreno-only ``_tile2`` route runs under the ``adreno`` profile, a case declaring the wrong route is refused, and
the fused path's k/v head broadcast diverges as its expectation says."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.cases.kernel_suites.nn import sdpa
from vkdiff.cases.kernels import all_cases
from vkdiff.datamodel import Status
from vkdiff.executors.op_graph import OpGraph
from vkdiff.harness import kernels

pytestmark = [requires_tree, requires_vulkan]

ROUTE_CASES = [next(c for c in all_cases(r"^custom_sdpa\[.*-fp32-texture3d-" + route + r"(-profileadreno)?\]$"))
               for route in ("tiled", "coop", "gqa_coop", "gqa_coop_tile2")]


@pytest.mark.parametrize("case", ROUTE_CASES, ids=lambda c: c.id)
def test_custom_sdpa_route_runs_the_shader_it_names(et_ctx, case):
    result = kernels.run_case(et_ctx, case)
    assert result.status == Status.PASS.name, result.reason
    route = dict(case.options)["route"]
    assert result.shader.startswith(f"sdpa_compute_out_{route}_texture3d_texture3d_float"), result.shader


def test_a_case_declaring_another_route_is_refused(et_ctx):
    case = dataclasses.replace(ROUTE_CASES[2], options=(("route", "coop"),))
    args = sdpa.custom_sdpa_args(case, np.random.default_rng(0))
    with pytest.raises(ValueError, match="declares route=coop but the arguments take route=gqa_coop"):
        OpGraph(et_ctx, case.op, args, storage=case.storage, dtype=case.np_dtype, route="coop")


def test_fused_sdpa_with_and_without_mask_passes_on_textures(et_ctx):
    for case in all_cases(r"^sdpa\[B1-H4-Hkv4-S(7-L9|6-L6)-D16-fp32-texture3d(-causal)?\]$"):
        result = kernels.run_case(et_ctx, case)
        assert result.status == Status.PASS.name, (case.id, result.reason)


def test_fused_sdpa_single_kv_head_is_the_known_divergence(et_ctx):
    case = next(c for c in all_cases(r"^sdpa\[B1-H4-Hkv1-S5-L7-D8-fp32-texture3d\]$"))
    result = kernels.run_case(et_ctx, case)
    assert result.status == Status.FAIL_NUMERIC.name
    assert 0 < result.metrics["mismatches"] <= 120
