"""The real ET-VK embedding_q4gsw kernels of the pinned tree against the numpy reference."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff import reference
from vkdiff.cases.kernels import all_cases
from vkdiff.datamodel import Status
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.staging import graph_input
from vkdiff.device.launchers.embedding_q4gsw import OP, embedding_q4gsw_impl
from vkdiff.device.launchers.quantized_linear import quantized_linear_impl
from vkdiff.executors.op_graph import run_op
from vkdiff.executors import kernel as executor
from vkdiff.executors import references
from vkdiff.harness import kernels

pytestmark = [requires_tree, requires_vulkan]

SMALL = all_cases(r"^embedding_q4gsw\[V(256|67)-")


@pytest.mark.parametrize("case", SMALL, ids=lambda c: c.id)
def test_case_passes(et_ctx, case):
    result = kernels.run_case(et_ctx, case)
    assert result.status == Status.PASS.name, result.reason
    assert result.metrics["unwritten"] == 0
    linear = case.has("linear_weight")
    assert ("_linear_weight_" in result.shader) is linear
    assert (result.shaders[0] == "pack_q4_linear_weight_texture2d") is linear


def test_wrong_nibble_convention_fails(et_ctx, monkeypatch):
    """The table's bytes read in the other convention (is_linear_weight flipped): every odd/even pair swaps."""
    (case,) = all_cases(r"^embedding_q4gsw\[V256-D64-g32-T7-fp32-buffer\]$")
    prepare = references.prepare_case

    def flipped(c, session_seed=0):
        prepared = prepare(c, session_seed)
        return dataclasses.replace(prepared, args=dict(prepared.args, is_linear_weight=True))

    monkeypatch.setattr(executor, "prepare_case", flipped)
    result = kernels.run_case(et_ctx, case)
    assert result.status == Status.FAIL_NUMERIC.name and result.metrics["sqnr_db"] < 10


def test_run_op_on_numpy_arguments(et_ctx, rng):
    table = rng.integers(0, 256, (40, 32), dtype=np.uint8)
    scales = rng.uniform(0.5, 1.5, (40, 2)).astype(np.float32)
    indices = np.array([[0, 39, 7, 7, 12]], np.int32)
    args = dict(weight=table, weight_scales=scales, group_size=32, indices=indices, is_linear_weight=False)
    launch = run_op(et_ctx, OP, args, storage="buffer", dtype=np.float32)
    expected = reference.embedding_q4gsw(indices.astype(np.int64), table, scales, 32, False)
    np.testing.assert_allclose(launch.output, expected, rtol=1e-6)
    assert launch.unwritten == 0 and launch.variant == "embedding_q4gsw_float_scales_buffer_float"


def test_tied_weight_is_packed_once_for_the_embedding_and_the_lm_head(et_ctx, rng):
    """One TensorRef consumed by embedding_q4gsw(is_linear_weight) and linear_q4gsw: one pack dispatch."""
    vocab, dim, group = 64, 64, 32
    table = rng.integers(0, 256, (vocab, dim // 2), dtype=np.uint8)
    scales = rng.uniform(0.5, 1.5, (vocab, dim // group)).astype(np.float32)
    graph = ComputeGraph(et_ctx)
    weight = TensorRef(id=0, data=table)
    indices = graph_input(graph, np.array([[3, 1, 4, 1, 5]], np.int32), "buffer", "width")
    hidden = graph.add_tensor((1, 5, dim), "float32", "buffer")
    embedding_q4gsw_impl(graph, dict(weight=weight, weight_scales=TensorRef(id=1, data=scales), group_size=group,
                                     indices=indices, is_linear_weight=True), hidden)
    logits = graph.add_tensor((1, 5, vocab), "float32", "buffer")
    scales_t = np.ascontiguousarray(scales.T)
    quantized_linear_impl(graph, dict(self=hidden, weights=weight, weight_scales=TensorRef(id=2, data=scales_t),
                                      group_size=group, bias=None), logits)
    assert [d.shader for d in graph.dispatches if d.shader.startswith("pack_q4")] == ["pack_q4_linear_weight_texture2d"]
    rows = reference.embedding_q4gsw(np.array([[3, 1, 4, 1, 5]]), table, scales, group, True)
    expected = reference.linear_q4gsw(rows.astype(np.float32), table, scales_t, group)
    graph.execute()
    np.testing.assert_allclose(graph.read(logits), expected, rtol=1e-4, atol=1e-4)
