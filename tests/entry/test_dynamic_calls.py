"""Every call of a user's test: a dynamic-shape ``.pte`` checked with each call's values, at every size ExecuTorch's
runtime accepts (the bound of a dynamic tensor is its element count, not each dimension)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.datamodel import Status
from vkdiff.entry import cli
from vkdiff.store import read

pytestmark = [requires_vulkan, requires_tree]
CALLS = [(3, 14, 15, 9), (1, 1, 4, 6), (5, 10, 50, 40)]
"""``test_vulkan_backend_max_pool2d``'s ``test_inputs`` (ExecuTorch's backends/vulkan/test/test_vulkan_delegate.py),
for a graph built for ``[≤8, 13, 55, 68]``."""


@pytest.fixture(scope="module")
def pooled(tmp_path_factory) -> Path:
    """ExecuTorch's own max-pool delegate test, lowered as it lowers it: batch dynamic up to 8."""
    import torch
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
    from executorch.exir import to_edge_transform_and_lower

    module = torch.nn.MaxPool2d(kernel_size=(2, 3), stride=(1, 1), padding=0, dilation=1, ceil_mode=False).eval()
    batch = torch.export.Dim("batch", max=8)
    program = torch.export.export(module, (torch.randn(5, 13, 55, 68),), dynamic_shapes={"input": {0: batch}})
    pte = tmp_path_factory.mktemp("pool") / "pool.pte"
    pte.write_bytes(to_edge_transform_and_lower(program, partitioner=[VulkanPartitioner()]).to_executorch().buffer)
    return pte


def _calls(rng, sizes) -> list[np.ndarray]:
    return [rng.standard_normal(s).astype(np.float32) for s in sizes]


def test_each_call_of_an_npz_keyed_by_call_gets_its_own_verdict(pooled, et_tree, tmp_path, rng):
    values = _calls(rng, CALLS)
    np.savez(tmp_path / "calls.npz", **{f"call{k}/x": v for k, v in enumerate(values)})
    out = tmp_path / "r.jsonl"
    assert cli.main(["check", str(pooled), "--inputs", str(tmp_path / "calls.npz"), "--et-src", str(et_tree),
                     "--results", str(out)]) == 0
    [result] = read([out]).results
    assert result.status == Status.PASS.name, result.reason
    steps = result.metrics["steps"]
    assert [s["status"] for s in steps] == [Status.PASS.name] * len(CALLS)
    assert all(s["resized"] for s in steps)


def test_one_file_per_call_runs_the_calls_in_order(pooled, et_tree, tmp_path, rng):
    files = []
    for k, value in enumerate(_calls(rng, CALLS[:2])):
        files += ["--inputs", str(tmp_path / f"{k}.npz")]
        np.savez(tmp_path / f"{k}.npz", value)
    out = tmp_path / "r.jsonl"
    assert cli.main(["check", str(pooled), *files, "--et-src", str(et_tree), "--results", str(out)]) == 0
    [result] = read([out]).results
    assert result.status == Status.PASS.name, result.reason
    assert len(result.metrics["steps"]) == 2


def test_a_call_past_the_element_bound_or_of_another_rank_is_one_line(pooled, capsys, tmp_path):
    np.savez(tmp_path / "big.npz", np.ones((9, 13, 55, 68), np.float32))
    assert cli.main(["check", str(pooled), "--inputs", str(tmp_path / "big.npz")]) == cli.EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert "sizes [9, 13, 55, 68] hold 437580 elements, more than the 388960 of its bound [8, 13, 55, 68]" in err
    np.savez(tmp_path / "rank.npz", np.ones((3, 14, 15), np.float32))
    assert cli.main(["check", str(pooled), "--inputs", str(tmp_path / "rank.npz")]) == cli.EXIT_USAGE
    assert "sizes [3, 14, 15] do not fit" in capsys.readouterr().err


def test_an_npz_mixing_call_keys_and_plain_keys_is_one_line(pooled, capsys, tmp_path):
    np.savez(tmp_path / "mixed.npz", **{"call0/x": np.ones((1, 13, 55, 68), np.float32),
                                        "x": np.ones((1, 13, 55, 68), np.float32)})
    assert cli.main(["check", str(pooled), "--inputs", str(tmp_path / "mixed.npz")]) == cli.EXIT_USAGE
    assert "key 'x' names no call" in capsys.readouterr().err
