"""The pytest plugin: items and ids, outcomes, xdist streaming, and a worker crash recorded as ERROR."""

from __future__ import annotations

import json

import pytest

from tests.testutils import main_tree, requires_tree, requires_vulkan

pytest_plugins = ["pytester"]

KERNELS = r"^linear_q4gsw\[M1-K64-N40-g32-fp32-"


def _results(pytester) -> list[dict]:
    path = pytester.path / "vkdiff-results" / "pytest" / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_help_lists_options(pytester):
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*vkdiff: differential tests of ExecuTorch's Vulkan backend*",
                                 "*--vkdiff-device=SLUG*", "*--et-src=PATH*", "*--vkdiff-report=DIR*"])


def test_inactive_without_flag(pytester):
    pytester.makepyfile("def test_x():\n    pass\n")
    pytester.runpytest().assert_outcomes(passed=1)


@requires_vulkan
def test_items_skip_as_not_run_without_tree(pytester, monkeypatch):
    monkeypatch.setenv("VKDIFF_ET_SRC", "none")
    result = pytester.runpytest("--vkdiff", "--vkdiff-suite", "kernels", "--vkdiff-cases", KERNELS, "-rs", "-v")
    result.stdout.fnmatch_lines(["vkdiff: no ExecuTorch tree (VKDIFF_ET_SRC=none*",
                                 "*linear_q4gsw?M1-K64-N40-g32-fp32-buffer?@llvmpipe SKIPPED*",
                                 "*NOT_RUN: no ExecuTorch tree*"])
    result.assert_outcomes(skipped=2)
    assert {r["status"] for r in _results(pytester)} == {"NOT_RUN"}


@requires_vulkan
def test_runs_without_xdist(pytester, monkeypatch):
    """The xdist-only hooks are registered only with xdist: ``-p no:xdist`` is not an INTERNALERROR."""
    monkeypatch.setenv("VKDIFF_ET_SRC", "none")
    result = pytester.runpytest("-p", "no:xdist", "--vkdiff", "--vkdiff-suite", "kernels", "--vkdiff-cases", KERNELS)
    result.assert_outcomes(skipped=2)


def test_unknown_device_is_a_usage_error(pytester, monkeypatch):
    monkeypatch.setenv("VKDIFF_ET_SRC", "none")
    result = pytester.runpytest("--vkdiff", "--vkdiff-device", "no-such-gpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no Vulkan adapter matches --device 'no-such-gpu'*"])


@requires_vulkan
def test_worker_crash_is_recorded_as_error_and_nothing_is_lost(pytester, monkeypatch):
    """Kill the worker running one item: that item is ERROR with the crash text, every other result is kept once."""
    monkeypatch.setenv("VKDIFF_ET_SRC", "none")
    pytester.makeconftest("""
import os
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_vkdiff_run_item(item, session):
    if item.case.id.endswith("-g32-fp32-texture3d]"):
        os._exit(3)
""")
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", "--vkdiff", "--vkdiff-suite", "kernels",
                                           "--vkdiff-cases", r"^linear_q4gsw\[M(1|4)-K64-N40-g32-fp32-")
    result.stdout.fnmatch_lines(["*crashed while running*"])
    results = _results(pytester)
    keys = [(r["case"], r["device"]) for r in results]
    assert len(keys) == len(set(keys)) == 4
    crashed = [r for r in results if r["status"] == "ERROR"]
    assert {r["case"] for r in crashed} == {"linear_q4gsw[M1-K64-N40-g32-fp32-texture3d]",
                                            "linear_q4gsw[M4-K64-N40-g32-fp32-texture3d]"}
    assert all("crash" in r["flags"] and "crashed" in r["reason"] for r in crashed)
    assert {r["status"] for r in results if r not in crashed} == {"NOT_RUN"}


def test_collect_only_leaves_the_report_folder_alone(pytester, monkeypatch):
    monkeypatch.setenv("VKDIFF_ET_SRC", "none")
    earlier = pytester.path / "report" / "results" / "results.jsonl"
    earlier.parent.mkdir(parents=True)
    earlier.write_text("an earlier session's results\n")
    result = pytester.runpytest("--collect-only", "-q", "--vkdiff", "--vkdiff-suite", "kernels", "--vkdiff-cases",
                                KERNELS, "--vkdiff-report", str(pytester.path / "report"))
    result.stdout.fnmatch_lines(["*linear_q4gsw?M1-K64-N40-g32-fp32-buffer?@*"])
    assert earlier.read_text() == "an earlier session's results\n"
    assert sorted(p.name for p in (pytester.path / "report").rglob("*")) == ["results", "results.jsonl"]


@requires_vulkan
@requires_tree
def test_real_kernels_pass_under_xdist_with_the_controllers_tree(pytester):
    """Workers take the tree the controller chose (a tarball here, extracted once) and run the real kernels."""
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", "--vkdiff", "--vkdiff-suite", "kernels",
                                           "--vkdiff-cases", KERNELS, f"--et-src={main_tree()[0]}")
    result.assert_outcomes(passed=2)
    results = _results(pytester)
    assert {r["status"] for r in results} == {"PASS"}
    assert len({r["versions"]["et_tree"] for r in results}) == 1
    assert all(r["repro"].endswith(f"--et-src {main_tree()[0]}") for r in results)


@requires_vulkan
@requires_tree
def test_a_conftest_declares_user_cases_that_run_under_xdist_into_one_report(pytester, two_partitions, monkeypatch):
    """Two user cases (a module factory with a recipe, a .pte with its ETRecord) from a conftest, ``-n 2``."""
    from pathlib import Path

    from vkdiff.datamodel import CACHE_ENV, cache_root

    monkeypatch.setenv(CACHE_ENV, str(cache_root()))
    factories = Path(__file__).parents[1] / "programs" / "factories.py"
    pte, etrecord = two_partitions
    pytester.makeconftest(f"""
import vkdiff

def pytest_vkdiff_cases(config):
    return [vkdiff.module_case({str(factories)!r} + ":two_partitions", recipe="4w", name="mine"),
            *vkdiff.program_cases({str(pte)!r}, etrecord={str(etrecord)!r})]
""")
    result = pytester.runpytest_subprocess("-n", "2", "--vkdiff", "--vkdiff-suite", "user",
                                           f"--et-src={main_tree()[0]}", "--vkdiff-report", "report", "-v")
    result.stdout.fnmatch_lines_random(["*PASSED mine?4w-vulkan?@cpu*", "*PASSED mine?4w-vulkan?@llvmpipe*",
                                        "*PASSED two_partitions?pte-forward?@llvmpipe*"])
    result.assert_outcomes(passed=3)
    merged = [json.loads(line) for line in (pytester.path / "report" / "results" / "results.jsonl").read_text()
              .splitlines()]
    assert {(r["case"], r["device"]) for r in merged} == {("mine[4w-vulkan]", "cpu"), ("mine[4w-vulkan]", "llvmpipe"),
                                                          ("two_partitions[pte-forward]", "llvmpipe")}
    assert (pytester.path / "report" / "index.html").is_file()
