"""A dynamically shaped model runs at its upper bound and below it on the same lowered program."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.harness.dynamic import below_bound_calls


class Pair(torch.nn.Module):
    def forward(self, x, y):
        return torch.relu(x) + y


def test_a_shared_dim_resizes_every_input_and_values_are_cycled_from_the_example():
    t = Dim("t", min=1, max=12)
    x, y = torch.arange(10.0).reshape(2, 5), torch.arange(5.0).reshape(1, 5)
    calls = below_bound_calls(Pair(), (x, y), {"x": {1: t}, "y": {1: t}})
    assert [(tuple(a.shape), tuple(b.shape)) for a, b in calls] == [((2, 12), (1, 12)), ((2, 3), (1, 3)),
                                                                   ((2, 4), (1, 4)), ((2, 1), (1, 1))]
    assert calls[0][0][0, 5:].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 0.0, 1.0]


def test_a_sequence_spec_an_unbounded_dim_and_a_minimum():
    x = torch.ones(4, 3)
    calls = below_bound_calls(Pair(), (x, x), [{0: Dim("b", min=3)}, None])
    assert [tuple(c[0].shape) for c in calls] == [(3, 3)] and all(tuple(c[1].shape) == (4, 3) for c in calls)
    assert below_bound_calls(Pair(), (x, x), {"x": None, "y": None}) == ()


class Rows(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x, approximate="tanh") * 2


def rows_factory():
    torch.manual_seed(0)
    return Rows(), (torch.randn(6, 13),), {"x": {0: Dim("rows", min=1, max=9)}}


@requires_tree
@requires_vulkan
def test_a_users_dynamic_module_runs_at_the_bound_and_below_it(et_tree, tmp_path):
    from vkdiff.entry.api import check

    report = check(rows_factory, recipe="fp32", et_src=str(et_tree), results=tmp_path / "r.jsonl")
    (device,) = [r for r in report.results if r.rule == "device"]
    assert device.status == "PASS", device.reason
    steps = device.metrics["steps"]
    assert len(steps) == 5 and all(step["status"] == "PASS" for step in steps), steps
