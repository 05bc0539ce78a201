"""Where a device is promised, finding none fails the run: never a green run of skips."""

from __future__ import annotations

import pytest

from tests.testutils import main_tree, requires_tree
from vkdiff.device.transports import adapters
from vkdiff.entry import cli

pytest_plugins = ["pytester"]
KERNELS = r"^linear_q4gsw\[M1-K64-N40-g32-fp32-"


@pytest.fixture
def no_adapters(monkeypatch):
    """Adapter discovery that finds nothing (a broken loader, a missing driver, a regression in vkdiff)."""
    monkeypatch.setattr(adapters, "enumerate_adapters",
                        lambda backend="Vulkan", via="wgpu", validate="", profile="": [])


def test_the_cli_refuses_in_one_line_when_a_device_is_promised(no_adapters, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv(adapters.REQUIRE_ENV, "1")
    assert cli.main(["run", "--suite", "kernels", "--cases", KERNELS, "--et-src", "none",
                     "--results", str(tmp_path / "r.jsonl")]) == cli.EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["vkdiff: error: no Vulkan adapter found although $VKDIFF_REQUIRE_DEVICE promises one (adapters "
                   "seen: none); install mesa-vulkan-drivers (lavapipe) or a GPU driver"]


@requires_tree
def test_a_tree_without_an_adapter_is_not_a_green_run(no_adapters, monkeypatch, capsys, tmp_path):
    """No promise (a developer's laptop): every kernel item NOT_RUN for lack of a device still fails the run."""
    for name in (adapters.REQUIRE_ENV, "CI"):
        monkeypatch.delenv(name, raising=False)
    argv = ["run", "--suite", "kernels", "--cases", KERNELS, "--et-src", main_tree()[0],
            "--results", str(tmp_path / "r.jsonl")]
    assert cli.main(argv) == cli.EXIT_EMPTY
    assert "no Vulkan adapter was found although an ExecuTorch tree was given" in capsys.readouterr().err
    assert cli.main([*argv, "--allow-empty"]) == 0


def test_a_discovery_error_is_never_no_adapters(monkeypatch):
    from tests import testutils

    def broken(backend="Vulkan", via="wgpu", validate="", profile=""):
        raise RuntimeError("vkEnumeratePhysicalDevices: VK_ERROR_INITIALIZATION_FAILED")

    monkeypatch.setattr(adapters, "enumerate_adapters", broken)
    with pytest.raises(RuntimeError, match="VK_ERROR_INITIALIZATION_FAILED"):
        testutils.vulkan_adapters.__wrapped__()


def test_a_pytest_session_that_finds_no_adapter_fails_in_one_line(pytester, monkeypatch):
    """What ``.ci/run`` sees with a vkdiff whose adapter discovery returns nothing."""
    monkeypatch.setenv(adapters.REQUIRE_ENV, "1")
    pytester.makeconftest("import vkdiff.device.transports.adapters as a\n"
                          "a.enumerate_adapters = lambda backend='Vulkan', via='wgpu', validate='', profile='': []\n")
    result = pytester.runpytest_subprocess("--vkdiff", "--vkdiff-suite", "kernels", "--vkdiff-cases", KERNELS,
                                           "--et-src=none")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: no Vulkan adapter found although $VKDIFF_REQUIRE_DEVICE promises one "
                                 "(adapters seen: none)*"])


def test_a_newcomers_session_says_how_many_items_had_no_tree():
    """``tests/conftest.py`` ends a run without a tree with one line: how many were skipped and how to give one."""
    from types import SimpleNamespace

    from tests import conftest
    from tests.testutils import NO_TREE

    lines = []
    reporter = SimpleNamespace(stats={"skipped": [SimpleNamespace(longrepr=("f.py", 1, f"NOT_RUN: {NO_TREE} (x)")),
                                                  SimpleNamespace(longrepr=("f.py", 2, "NOT_RUN: glslc missing"))]},
                               write_line=lambda text, **style: lines.append(text))
    conftest.pytest_terminal_summary(reporter)
    assert lines == [f"vkdiff: 1 tests and items were skipped for lack of an ExecuTorch tree; "
                     f"{conftest.HOW_TO_GIVE_TREE}"]
