"""The pytest plugin facing bad options and odd spellings: nothing deleted or written where it should not be."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.testutils import pinned_tarball, requires_tree, requires_vulkan
from vkdiff.entry import pytest_args

pytest_plugins = ["pytester"]

KERNELS = r"^linear_q4gsw\[M1-K64-N40-g32-fp32-"


@pytest.fixture
def earlier_session(pytester):
    """A report folder holding a previous session's results and a file of the user's."""
    results = pytester.path / "report" / "results"
    results.mkdir(parents=True)
    (results / "results.jsonl").write_text("previous session\n")
    (results / "notes.txt").write_text("mine\n")
    return results


def test_joined_spelling():
    assert pytest_args.joined(["--et-src", "/x", "-q", "--vkdiff-report", "r", "--vkdiff"]) == [
        "--et-src=/x", "-q", "--vkdiff-report=r", "--vkdiff"]


@pytest.mark.parametrize("bad", [["--et-src", "/no/such/tree"], ["--vkdiff-device", "no-such-gpu"]])
def test_a_bad_option_deletes_nothing(pytester, earlier_session, monkeypatch, bad):
    monkeypatch.setenv("VKDIFF_CACHE_DIR", str(pytester.path / "cache"))
    result = pytester.runpytest("--vkdiff", "--vkdiff-suite", "kernels", "--vkdiff-cases", KERNELS,
                                "--vkdiff-report=report", *[f"{bad[0]}={bad[1]}"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (earlier_session / "results.jsonl").read_text() == "previous session\n"


def test_only_vkdiff_result_files_are_replaced(pytester, earlier_session, monkeypatch):
    """A previous session's worker file holds a well-formed result: merged again it would pass as this session's."""
    from vkdiff.datamodel import Result

    stale = Result(case="stale[from-an-earlier-session]", op="stale", device="llvmpipe", status="PASS",
                   time="2026-01-01T00:00:00+00:00")
    (earlier_session / "results-gw7.jsonl").write_text(stale.to_json() + "\n")
    monkeypatch.setenv("VKDIFF_ET_SRC", "none")
    result = pytester.runpytest("--vkdiff", "--vkdiff-suite", "kernels", "--vkdiff-cases", KERNELS,
                                "--vkdiff-report=report")
    assert result.ret == pytest.ExitCode.OK
    assert (earlier_session / "notes.txt").read_text() == "mine\n"
    assert not (earlier_session / "results-gw7.jsonl").exists()
    merged = (earlier_session / "results.jsonl").read_text()
    assert "previous session" not in merged and "stale[from-an-earlier-session]" not in merged
    assert "linear_q4gsw[M1-K64-N40-g32-fp32-buffer]" in merged


def test_report_folder_that_is_a_file_is_a_usage_error(pytester, monkeypatch):
    monkeypatch.setenv("VKDIFF_ET_SRC", "none")
    (pytester.path / "report").write_text("a file")
    result = pytester.runpytest("--vkdiff", "--vkdiff-suite", "kernels", "--vkdiff-report=report/sub")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--vkdiff-report *report/sub/results: *report is a file, so no folder can be made*"])


@requires_vulkan
@requires_tree
@pytest.mark.parametrize("spelling", ["two words", "one word"])
def test_et_src_in_either_spelling_keeps_the_root(pytester, tmp_path, spelling):
    """The tree (a tarball in a folder of its own) must not become pytest's root or receive any file."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    tarball = Path(shutil.copy(pinned_tarball("main"), elsewhere))
    option = ["--et-src", str(tarball)] if spelling == "two words" else [f"--et-src={tarball}"]
    result = pytester.runpytest_subprocess("--vkdiff", "--vkdiff-suite", "kernels", "--vkdiff-cases", KERNELS, *option)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"rootdir: {pytester.path}*"])
    assert sorted(p.name for p in elsewhere.iterdir()) == [tarball.name]
    assert (pytester.path / "vkdiff-results" / "pytest" / "results.jsonl").is_file()


@requires_tree
def test_two_words_in_process_is_one_usage_line(pytester, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    tarball = Path(shutil.copy(pinned_tarball("main"), elsewhere))
    result = pytester.runpytest("--vkdiff", "--et-src", str(tarball))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--et-src VALUE in two words made pytest take VALUE as its root directory*"
                                 "write --et-src=VALUE*"])


def test_loading_the_plugin_twice_is_harmless(pytester, monkeypatch):
    monkeypatch.setenv("VKDIFF_ET_SRC", "none")
    result = pytester.runpytest_subprocess("-p", "vkdiff.entry.plugin", "--vkdiff", "--vkdiff-suite", "kernels",
                                           "--vkdiff-cases", KERNELS)
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    assert result.stdout.str().count("results in ") == 1
    helped = pytester.runpytest_subprocess("-p", "vkdiff.entry.plugin", "--help")
    assert helped.stdout.str().count("--et-src=PATH") == 1
