"""Bad paths and inputs: one line naming the input and what to do, exit 2, before any device work."""

from __future__ import annotations

import subprocess

import pytest

from tests.testutils import requires_vulkan
from vkdiff.device.transports import adapters
from vkdiff.entry import cli

CASE = r"^linear_q4gsw\[M1-K64-N40-g32-fp32-buffer\]$"


@pytest.fixture
def no_device_work(monkeypatch):
    """Fail the test if anything enumerates adapters (the check must come first)."""
    def refuse(*args, **kwargs):
        raise AssertionError("device work before the inputs were checked")

    monkeypatch.setattr(adapters, "enumerate_adapters", refuse)


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("vkdiff: error: ") and "Traceback" not in err, err
    return err.strip().removeprefix("vkdiff: error: ")


def test_results_that_is_a_directory(tmp_path, capsys, no_device_work):
    assert cli.main(["run", "--cases", CASE, "--results", str(tmp_path)]) == 2
    assert one_line(capsys) == f"--results {tmp_path}: is a directory; name a file such as {tmp_path / 'results.jsonl'}"


def test_results_under_a_file(tmp_path, capsys, no_device_work):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert cli.main(["run", "--cases", CASE, "--results", str(blocker / "sub" / "r.jsonl")]) == 2
    assert one_line(capsys) == f"--results {blocker / 'sub' / 'r.jsonl'}: {blocker} is a file, so no folder can be " \
                               f"made under it"


def test_report_that_is_a_file(tmp_path, capsys, no_device_work):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert cli.main(["run", "--cases", CASE, "--results", str(tmp_path / "r.jsonl"), "--report", str(blocker)]) == 2
    assert one_line(capsys) == f"--report {blocker}: is a file, not a folder"


def test_report_output_that_is_a_file(tmp_path, capsys):
    results, blocker = tmp_path / "r.jsonl", tmp_path / "file"
    results.write_text("")
    blocker.write_text("x")
    assert cli.main(["report", str(results), "-o", str(blocker)]) == 2
    assert one_line(capsys) == f"-o {blocker}: is a file, not a folder"


def test_et_src_that_is_a_plain_file(tmp_path, capsys):
    plain = tmp_path / "notes.txt"
    plain.write_text("x")
    assert cli.main(["run", "--cases", CASE, "--results", str(tmp_path / "r.jsonl"), "--et-src", str(plain)]) == 2
    assert one_line(capsys).startswith(f"--et-src {plain} is a file, not a directory (give an ExecuTorch checkout")


def test_repo_at_a_revision_that_does_not_exist(tmp_path, capsys):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert cli.main(["run", "--cases", CASE, "--results", str(tmp_path / "r.jsonl"), "--et-src", f"{repo}@v9.9"]) == 2
    assert one_line(capsys) == f"--et-src {repo}@v9.9: no revision 'v9.9' in {repo}"


@requires_vulkan
def test_device_from_the_environment_is_named_as_such(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("VKDIFF_DEVICE", "no-such-gpu")
    assert cli.main(["run", "--cases", CASE, "--results", str(tmp_path / "r.jsonl"), "--et-src", "none"]) == 2
    assert one_line(capsys).startswith("no Vulkan adapter matches $VKDIFF_DEVICE='no-such-gpu'; available: ")
