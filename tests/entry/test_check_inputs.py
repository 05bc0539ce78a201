"""Bad input to ``vkdiff check`` is one line naming the input and what to do, exit 2, before any device work."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.entry import cli

pytestmark = [requires_vulkan, requires_tree]


def _refused(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    assert cli.main(["check", *argv]) == cli.EXIT_USAGE
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vkdiff: error: "), captured.err
    assert "ExecuTorch tree:" not in captured.err + captured.out, "refused before choosing a tree or a device"
    return lines[0]


@pytest.fixture(scope="module")
def portable(tmp_path_factory) -> Path:
    """A program with no delegate at all (the portable runtime runs it)."""
    import torch
    from executorch.exir import to_edge

    model = torch.nn.Linear(4, 4).eval()
    path = tmp_path_factory.mktemp("portable") / "portable.pte"
    path.write_bytes(to_edge(torch.export.export(model, (torch.randn(2, 4),))).to_executorch().buffer)
    return path


def test_not_a_program_and_a_truncated_one(capsys, tmp_path, two_partitions):
    text = tmp_path / "notes.pte"
    text.write_text("hello")
    assert "not an ExecuTorch program" in _refused(capsys, [str(text)])
    cut = tmp_path / "cut.pte"
    cut.write_bytes(two_partitions[0].read_bytes()[:2000])
    assert "cut.pte" in _refused(capsys, [str(cut)]) and "truncated" in _refused(capsys, [str(cut)])
    assert "no such file" in _refused(capsys, [str(tmp_path / "absent.pte")])


def test_a_program_without_a_vulkan_delegate_says_so(capsys, portable):
    assert "no Vulkan delegate in any method" in _refused(capsys, [str(portable)])


def test_inputs_of_the_wrong_count_shape_or_dtype_name_the_expected_spec(capsys, tmp_path, two_partitions):
    pte = str(two_partitions[0])
    two = tmp_path / "two.npz"
    np.savez(two, np.zeros((4, 64), np.float32), np.zeros(3, np.float32))
    assert "2 inputs, method 'forward' takes 1 (float32[4, 64])" in _refused(capsys, [pte, "--inputs", str(two)])
    shape = tmp_path / "shape.npz"
    np.savez(shape, np.ones((4, 63), np.float32))
    assert "input 0: sizes [4, 63] do not fit float32[4, 64]" in _refused(capsys, [pte, "--inputs", str(shape)])
    dtype = tmp_path / "dtype.npz"
    np.savez(dtype, np.ones((4, 64), np.int32))
    assert "input 0 is int32[4, 64]" in _refused(capsys, [pte, "--inputs", str(dtype)])
    pickled = tmp_path / "object.npz"
    np.savez(pickled, np.array([{"a": 1}], dtype=object))
    assert "is an object array (pickles are refused)" in _refused(capsys, [pte, "--inputs", str(pickled)])


def test_an_unknown_method_lists_the_methods(capsys, two_partitions):
    assert "has methods forward" in _refused(capsys, [str(two_partitions[0]), "--method", "decode"])


def test_an_etrecord_of_another_program_does_not_match(capsys, two_partitions, masked_block):
    line = _refused(capsys, [str(two_partitions[0]), "--etrecord", str(masked_block[1])])
    assert "does not match two_partitions.pte" in line


def test_a_factory_that_raises_or_returns_the_wrong_thing(capsys, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def boom():\n    raise ValueError('no weights here')\n\ndef wrong():\n    return 3\n")
    assert "the factory raised ValueError: no weights here" in _refused(capsys, [f"{bad}:boom", "--recipe", "4w"])
    assert "must return (module, example_inputs" in _refused(capsys, [f"{bad}:wrong", "--recipe", "4w"])
    assert "has no function 'absent'" in _refused(capsys, [f"{bad}:absent", "--recipe", "4w"])
    assert "choose one of" in _refused(capsys, [f"{bad}:boom", "--recipe", "bogus"])
    assert "needs --recipe" in _refused(capsys, [f"{bad}:boom"])


def _peak_rss(argv: list[str]) -> tuple[int, str, int]:
    """(exit status, stderr, peak resident MB) of ``vkdiff ARGV`` in a process of its own."""
    import json
    import subprocess
    import sys

    wrapper = ("import json, resource, subprocess, sys\n"
               "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "print(json.dumps([done.returncode, done.stderr, "
               "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024]))\n")
    out = subprocess.run([sys.executable, "-c", wrapper, sys.executable, "-m", "vkdiff.entry.cli", *argv],
                         capture_output=True, text=True, check=True)
    return tuple(json.loads(out.stdout))


def test_a_small_program_declaring_gigabytes_is_refused_before_any_allocation(tmp_path, two_partitions):
    """The hole: a 2 KB .pte declaring a 6 GiB buffer made vkdiff allocate and fill 6.76 GB before the device's
    limit was consulted."""
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    pte = deserialize_pte_binary(two_partitions[0].read_bytes())
    plan = pte.program.execution_plan[0]
    plan.values[plan.inputs[0]].val.sizes = [100_000, 16_384]
    big = tmp_path / "big.pte"
    big.write_bytes(bytes(serialize_pte_binary(pte)))
    status, err, peak = _peak_rss(["check", str(big), "--et-src", "none"])
    assert status == cli.EXIT_USAGE and len(err.strip().splitlines()) == 1, err
    assert "float32[100000, 16384] takes 6.6 GB: no Vulkan device binds a buffer over 4 GiB" in err
    assert peak < 500, f"peak resident memory {peak} MB"


def test_an_npz_bomb_is_refused_from_its_header(tmp_path, two_partitions):
    """The hole: a 6 MiB .npz was decompressed whole (6.67 GB) before the input count was checked."""
    from tests.faults.mutants import npz_bomb

    bomb = tmp_path / "bomb.npz"
    npz_bomb(bomb, (1, 1_667_000_000))
    assert bomb.stat().st_size < 8 << 20
    status, err, peak = _peak_rss(["check", str(two_partitions[0]), "--inputs", str(bomb), "--et-src", "none"])
    assert status == cli.EXIT_USAGE and len(err.strip().splitlines()) == 1, err
    assert "sizes [1, 1667000000] do not fit float32[4, 64]" in err
    assert peak < 500, f"peak resident memory {peak} MB"


def test_the_budget_refuses_what_fits_a_device_but_not_the_machine(capsys, tmp_path, two_partitions, monkeypatch):
    from tests.faults.mutants import npz_bomb

    monkeypatch.setenv("VKDIFF_MEMORY_BUDGET", "4K")
    line = _refused(capsys, [str(two_partitions[0])])
    assert "its tensors with their float64 references: needs" in line
    assert "over vkdiff's budget of 4.1 kB (VKDIFF_MEMORY_BUDGET)" in line
    monkeypatch.setenv("VKDIFF_MEMORY_BUDGET", "100M")
    bomb = tmp_path / "fits.npz"
    npz_bomb(bomb, (4, 64 * 1_000_000))
    line = _refused(capsys, [str(two_partitions[0]), "--inputs", str(bomb)])
    assert "needs 1.0 GB of host memory, over vkdiff's budget of 104.9 MB" in line


def test_a_dict_pt_is_one_line(capsys, tmp_path, two_partitions):
    import torch

    pt = tmp_path / "dict.pt"
    torch.save({"x": torch.zeros(4, 64)}, pt)
    assert "holds a dict; save a tuple or list of the method's inputs in order" in _refused(
        capsys, [str(two_partitions[0]), "--inputs", str(pt)])
