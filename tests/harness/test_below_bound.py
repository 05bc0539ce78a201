"""Below the bound: a case's graph is built once at its sizes, then run at smaller ones as ET-VK's backend
resizes it; a port without its resize function fails there and only there."""

from __future__ import annotations

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.cases.kernels import all_cases, below_bound
from vkdiff.datamodel import Status
from vkdiff.device.launchers import unary_op
from vkdiff.executors.op_graph import OpGraph, ResizeError
from vkdiff.executors import references
from vkdiff.executors import kernel as executor
from vkdiff.harness import kernels

pytestmark = [requires_tree, requires_vulkan]

CASES = ["relu[W67-fp32-texture3d]", "relu[N2-C1-H7-W9-fp16-texture3d-channels]", "relu[C3-H5-W6-fp32-buffer]"]


def _case(case_id: str):
    (case,) = all_cases("^" + case_id.replace("[", r"\[").replace("]", r"\]") + "$")
    return case


def test_smaller_sizes_shrink_only_the_resizable_dims_and_stay_distinct():
    smaller = below_bound(_case("relu[N2-C1-H7-W9-fp16-texture3d-channels]"))
    assert [c.sizes for c in smaller] == [{"N": 1, "C": 1, "H": 4, "W": 5}, {"N": 1, "C": 1, "H": 6, "W": 8},
                                          {"N": 1, "C": 1, "H": 1, "W": 1}]
    assert all(c.variant == smaller[0].variant and c.seed() != smaller[0].seed() for c in smaller[1:])
    assert below_bound(_case("linear_q4gsw[M1-K64-N40-g32-fp32-buffer]")) == []


@pytest.mark.parametrize("case_id", CASES)
def test_every_smaller_size_passes_on_the_graph_built_for_the_bound(et_ctx, case_id):
    result = kernels.run_case(et_ctx, _case(case_id))
    assert result.status == "PASS", result.reason
    runs = result.metrics["below_bound"]
    assert len(runs) >= 2 and all(run["status"] == "PASS" for run in runs)


def _without_resize(monkeypatch):
    """``add_unary_op_node`` with its ``resize`` argument dropped: the port of an op that has no resize function."""
    original = unary_op.add_unary_op_node

    def add_unary_op_node(graph, x, lo, hi, out, op):
        dispatch = graph.dispatch
        graph.dispatch = lambda *args, resize=None, **kwargs: dispatch(*args, **kwargs)
        try:
            original(graph, x, lo, hi, out, op)
        finally:
            del graph.dispatch

    monkeypatch.setattr(unary_op, "add_unary_op_node", add_unary_op_node)


@pytest.mark.parametrize("case_id", CASES)
def test_a_port_without_its_resize_function_passes_at_the_bound_and_fails_below_it(et_ctx, monkeypatch, case_id):
    _without_resize(monkeypatch)
    case = _case(case_id)
    at_bound = executor.launch(et_ctx, case, references.prepare_case(case))
    np.testing.assert_allclose(at_bound.output, references.prepare_case(case).expected, rtol=1e-3)
    result = kernels.run_case(et_ctx, case)
    assert result.status == Status.FAIL_CHECK.name
    assert result.reason.startswith(f"below the bound: {below_bound(case)[0].id} on the graph built for {case.id}")
    assert "output sizes" in result.reason and "did not follow its inputs" in result.reason
    assert all(run["status"] == "FAIL_CHECK" for run in result.metrics["below_bound"])


def test_a_smaller_run_may_not_change_what_the_graph_fixed(et_ctx):
    case = _case("relu[C3-H5-W6-fp32-buffer]")
    graph = OpGraph(et_ctx, case.op, references.prepare_case(case).args, storage="buffer")
    with pytest.raises(ResizeError, match="input self of sizes \\[4, 5, 6\\] does not fit the graph's \\[3, 5, 6\\]"):
        graph.resize({"self": np.ones((4, 5, 6), np.float32)})
    clamp = _case("clamp[C3-H5-W6-fp32-buffer]")
    graph = OpGraph(et_ctx, clamp.op, references.prepare_case(clamp).args, storage="buffer")
    with pytest.raises(ResizeError, match="argument min differs"):
        graph.resize({**references.prepare_case(clamp).args, "min": 0.0})


@pytest.mark.parametrize(("case_id", "fixed"), [
    ("cat[C3-H5-W9-fp32-buffer-w3w6]", "W"),
    ("squeeze_copy[N2-C1-H7-W1-fp32-texture3d-dm1.1]", "CW"),
    ("slice_copy[H32-W8-dim0-start5-end12-step1-fp32-buffer]", "H"),
    ("addmm[M13-K7-N6-fp32-buffer-mat2const-linear_bias_tile_row_1-bias_mn]", "MKN"),
])
def test_a_dim_the_case_fixes_never_shrinks(case_id, fixed):
    """The concat dim, a squeezed dim, a sliced dim and an M that sizes a constant bias keep their size."""
    case = _case(case_id)
    for small in below_bound(case):
        assert all(small.size(k) == case.size(k) for k in fixed), small.id


def test_a_resize_that_changes_a_tensors_rank_is_ET_VKs_refusal(et_ctx):
    """``resize_squeeze_node`` skips a negative dim: the output would gain a dim, which ``virtual_resize``
    refuses, so the smaller run is FAIL_CHECK naming the check (not a silent rank change)."""
    result = kernels.run_case(et_ctx, _case("squeeze_copy[C1-H1-W5-fp32-buffer-dm3]"))
    assert result.status == Status.FAIL_CHECK.name
    assert "new sizes cannot modify the dimensionality of the tensor" in result.reason
    assert kernels.run_case(et_ctx, _case("squeeze_copy[C1-H1-W5-fp32-texture3d-dm3]")).status == "PASS"
