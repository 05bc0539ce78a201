"""The tiny Llama's delegate generating on the first adapter: prefill, then decode steps, every node judged."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.cases.catalog import all_model_cases
from vkdiff.datamodel import Status
from vkdiff.device.launchers import sdpa
from vkdiff.harness.device_models import check_on_device

pytestmark = [requires_tree, requires_vulkan]

CASE = "tiny_llama[llm-4w-vulkan]"
SDPA_NODE = 17
"""The first layer's ``sdpa_with_kv_cache`` in the 4w delegate."""


def case(case_id: str):
    (found,) = all_model_cases("^" + re.escape(case_id) + "$")
    return found


@pytest.fixture(scope="module")
def generated(et_ctx, et_tree):
    return check_on_device(case(CASE), et_ctx, tree=et_tree)


def test_prefill_and_four_decode_steps_match_eager(generated):
    steps = generated.metrics["steps"]
    assert generated.status == Status.PASS.name, generated.reason
    assert [s["kind"] for s in steps] == ["prefill"] + ["decode"] * 4
    assert all(s["status"] == "PASS" and s["token_matches"] and s["max_abs_vs_eager"] < 1e-4 for s in steps)


def test_kv_cache_state_is_judged_at_the_sdpa_node(generated):
    node = next(n for n in generated.metrics["nodes"] if n["index"] == SDPA_NODE)
    states = [o for o in node["outputs"] if o.get("state")]
    assert node["op"] == "sdpa_with_kv_cache.default" and len(states) == 2
    assert all(o["status"] == "PASS" and o["slots_compared"] > 0 for o in states)


def _update_at_build_position(graph, input_pos, projected, cache):
    """The cache update with its position UBO made once at build (``create_params_buffer``), never refreshed."""
    name = f"sdpa_kv_cache_update_{cache.spec.storage}_{projected.spec.storage}_float"
    frozen = graph.uniform(np.array([graph.read_symint(input_pos)], np.int32).tobytes())
    graph.dispatch(name, global_wg=lambda: sdpa.kv_cache_update_global_wg_size(projected),
                   resources=[cache, projected, graph.sizes_ubo(cache), graph.sizes_ubo(projected), frozen],
                   resize_args=(input_pos,))


def test_a_stale_position_ubo_is_caught_at_the_first_decode_step_and_the_sdpa_node(et_ctx, et_tree, monkeypatch):
    """Right at prefill (position 0 at build and at run); at the first decode the update writes slot 0 again."""
    monkeypatch.setattr(sdpa, "add_sdpa_kv_cache_update_node", _update_at_build_position)
    result = check_on_device(case(CASE), et_ctx, tree=et_tree)
    assert result.status == Status.FAIL_NUMERIC.name, result.reason
    assert {k: result.node[k] for k in ("index", "op", "step")} == {"index": SDPA_NODE,
                                                                     "op": "sdpa_with_kv_cache.default", "step": 1}
    assert result.node["source"].startswith("layers.0.attention, custom_kv_cache.py:")
    assert result.reason.startswith(f"step 1 (decode): first diverging node {SDPA_NODE} ")
    steps = result.metrics["steps"]
    assert steps[0]["status"] == "PASS" and steps[1]["first_diverging"]["index"] == SDPA_NODE
    bad = next(n for n in result.metrics["nodes"] if n["index"] == SDPA_NODE)
    assert any(o.get("state") and o["status"] == "FAIL_NUMERIC" for o in bad["outputs"])
