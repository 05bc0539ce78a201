"""vkdiff command line: help, devices, run, and one-line errors for bad input."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.testutils import main_tree, requires_glslc, requires_tree, requires_vulkan
from vkdiff.device.shaders import build, trees
from vkdiff.entry import cli
from vkdiff.store import load

QUICK = r"^linear_q4gsw\[M1-K64-N40-g32-"
"""The four small linear_q4gsw cases (not the backward op's of the same sizes)."""

FAKE_TREE = Path(__file__).parents[1] / "device" / "fake_tree"


def _tree(tmp_path: Path, shader: str = "vk_broken.glsl") -> Path:
    """An ExecuTorch-shaped tree holding the fake tree's broken shader under the name ``shader``."""
    glsl = tmp_path / "et" / trees.GLSL_SUBDIR
    glsl.mkdir(parents=True)
    shutil.copy(FAKE_TREE / "vk_broken.glsl", glsl / shader)
    return tmp_path / "et"


RUN_HELP = """usage: vkdiff run [-h] [--cases PATTERN] [--device SLUG] [--et-src PATH]
                  [--repeat N] [--timeout SECONDS] [--sample N] [--seed INT]
                  [--route PROFILE] [--limits-profile NAME]
                  [--transport {wgpu,vulkan}] [--validate [{sync,gpu}]]
                  [--device-profile PROFILE] [--mediump]
                  [--local-wg XxYxZ[@NODE]] [--mode {nodes,graph}]
                  [--replays N] [--allow-empty] [--results FILE.jsonl]
                  [--jobs N] [--list] [--suite {all,kernels,models,upstream}]
                  [-r DIR] [--save-artifacts DIR | --from-artifacts DIR]
"""


def test_run_help_is_pinned(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    out = capsys.readouterr().out
    assert out.startswith(RUN_HELP)
    for flag in ("--cases PATTERN", "--device SLUG", "--et-src PATH", "--results FILE.jsonl", "--repeat N"):
        assert flag in out


def test_bad_regex_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["run", "--cases", "("])
    assert exit_info.value.code == 2
    assert "--cases '(' is not a valid regular expression" in capsys.readouterr().err


def test_et_src_that_is_not_a_tree_is_one_line(capsys, tmp_path):
    assert cli.main(["run", "--et-src", str(tmp_path), "--cases", r"M1-K64-N40-g32-fp32-buffer\]$"]) == 2
    err = capsys.readouterr().err
    assert err == f"vkdiff: error: --et-src {tmp_path} is not an ExecuTorch tree: missing " \
                  f"backends/vulkan/runtime/graph/ops/glsl/\n"
    assert "Traceback" not in err


@requires_vulkan
def test_unknown_device_lists_slugs(capsys):
    assert cli.main(["run", "--device", "no-such-gpu", "--cases", r"M1-K64-N40-g32-fp32-buffer\]$"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vkdiff: error: no Vulkan adapter matches --device 'no-such-gpu'; available: ")
    assert err.count("\n") == 1


@requires_vulkan
def test_a_bad_device_and_a_bad_tree_give_the_devices_line_alone(capsys, tmp_path):
    """The tree is chosen on a thread while adapters are enumerated: still one line, the device's, as before."""
    assert cli.main(["run", "--device", "no-such-gpu", "--et-src", str(tmp_path), "--cases",
                     r"M1-K64-N40-g32-fp32-buffer\]$"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vkdiff: error: no Vulkan adapter matches --device 'no-such-gpu'; available: ")
    assert err.count("\n") == 1


@requires_vulkan
def test_a_bad_device_is_one_line_at_once_while_the_tree_is_still_being_fetched(capsys, monkeypatch):
    """The tree's thread (a fetch can take minutes) is not waited for before a usage error is printed."""
    import threading
    import time

    from vkdiff.device.shaders import trees

    fetched = threading.Event()
    monkeypatch.setattr(trees, "choose_tree", lambda *a, **k: fetched.wait(20))
    start = time.perf_counter()
    try:
        assert cli.main(["run", "--device", "no-such-gpu", "--cases", r"M1-K64-N40-g32-fp32-buffer\]$"]) == 2
        waited = time.perf_counter() - start
    finally:
        fetched.set()
    err = capsys.readouterr().err
    assert err.startswith("vkdiff: error: no Vulkan adapter matches --device 'no-such-gpu'; available: ")
    assert err.count("\n") == 1 and waited < 10, waited


@requires_vulkan
@requires_tree
def test_a_run_in_one_process_opens_its_device_while_the_tree_is_chosen(monkeypatch, et_tree, tmp_path):
    """The device is created once, on the opening thread during ``resolve_inputs``, and the case runs on it."""
    import threading

    from vkdiff.device.runtime import context
    from vkdiff.device.transports import adapters

    made = []

    def create_device(*args, **kwargs):
        made.append(threading.current_thread().name)
        return real(*args, **kwargs)

    real = adapters.create_device
    monkeypatch.setattr(adapters, "create_device", create_device)
    monkeypatch.setattr(context, "create_device", create_device)
    assert cli.main(["run", "--et-src", str(et_tree), "--device", "0", "--results", str(tmp_path / "r.jsonl"),
                     "--cases", r"^add\[B1-H7-W64-fp32-buffer\]$"]) == 0
    assert len(made) == 1 and made[0].startswith("vkdiff-open"), made


@requires_vulkan
@requires_tree
def test_the_adapters_and_the_tree_are_resolved_while_the_cases_are_selected(monkeypatch, et_tree, tmp_path):
    """``vkdiff run`` starts enumerating adapters and checking the tree before it imports its harness and selects
    its cases, so the driver's instance and the tree's check overlap them (``inputs_ahead``)."""
    import threading

    from vkdiff.cases import kernels
    from vkdiff.device.shaders import trees
    from vkdiff.device.transports import adapters

    started = {"select": threading.Event(), "choose_tree": threading.Event()}
    real = {"select": adapters.select, "choose_tree": trees.choose_tree, "all_cases": kernels.all_cases}

    def noted(name):
        def call(*args, **kwargs):
            started[name].set()
            return real[name](*args, **kwargs)
        return call

    def all_cases(*args, **kwargs):
        assert all(event.wait(5) for event in started.values()), "cases selected before the inputs were started"
        return real["all_cases"](*args, **kwargs)

    monkeypatch.setattr(adapters, "select", noted("select"))
    monkeypatch.setattr(trees, "choose_tree", noted("choose_tree"))
    monkeypatch.setattr(kernels, "all_cases", all_cases)
    assert cli.main(["run", "--et-src", str(et_tree), "--device", "0", "--results", str(tmp_path / "r.jsonl"),
                     "--cases", r"^add\[B1-H7-W64-fp32-buffer\]$"]) == 0


def test_no_case_matches(capsys):
    assert cli.main(["run", "--cases", "nothing-like-this"]) == 2
    assert "matches no case; try 'vkdiff run --list'" in capsys.readouterr().err


def test_report_of_missing_file_is_one_line(capsys, tmp_path):
    assert cli.main(["report", str(tmp_path / "absent.jsonl"), "-o", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"vkdiff: error: no such results file: {tmp_path / 'absent.jsonl'}\n"


def test_list(capsys):
    assert cli.main(["run", "--list", "--cases", r"^linear_q4gsw\[M1-K64-N40-g32-fp32-buffer\]$"]) == 0
    assert capsys.readouterr().out == "linear_q4gsw[M1-K64-N40-g32-fp32-buffer]\n"


@requires_vulkan
def test_devices_json(capsys):
    assert cli.main(["devices", "--json"]) == 0
    devices = json.loads(capsys.readouterr().out)
    assert devices and {"slug", "name", "vendor", "driver", "backend", "adapter_type", "features", "limits"} <= set(
        devices[0])
    assert "max-immediate-size" in devices[0]["limits"]


@requires_vulkan
def test_run_without_tree_is_not_run_and_exit_0(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(trees.ET_SRC_ENV, "none")
    results = tmp_path / "r.jsonl"
    assert cli.main(["run", "--suite", "kernels", "--cases", QUICK, "--results", str(results)]) == 0
    loaded = list(load([results]))
    assert len(loaded) == 4 and {r.status for r in loaded} == {"NOT_RUN"}
    assert "no ExecuTorch tree" in loaded[0].reason
    assert "no ExecuTorch tree (VKDIFF_ET_SRC=none" in capsys.readouterr().err


@requires_vulkan
@requires_glslc
@requires_tree
def test_broken_shader_is_build_fail_and_run_goes_on(tmp_path, monkeypatch, capsys, et_tree):
    """The main tree with its weight-packing shader broken: every case BUILD_FAIL, none aborts the run."""
    tree = tmp_path / "et"
    shutil.copytree(et_tree, tree, symlinks=True)
    shutil.copy(FAKE_TREE / "vk_broken.glsl", tree / build.GLSL_SUBDIR / "pack_q4_linear_weight__w_4x8.glsl")
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "cache"))
    results = tmp_path / "r.jsonl"
    code = cli.main(["run", "--suite", "kernels", "--et-src", str(tree), "--cases", QUICK + "fp32-",
                     "--results", str(results)])
    assert code == 1
    loaded = list(load([results]))
    assert len(loaded) == 2 and {r.status for r in loaded} == {"BUILD_FAIL"}
    assert "glslc failed" in loaded[0].reason and "undeclared_identifier" in loaded[0].reason
    assert loaded[0].repro.startswith("vkdiff run --suite kernels --cases")
    assert "BUILD_FAIL" in capsys.readouterr().err


def test_glslc_missing_is_one_line(tmp_path, monkeypatch, capsys):
    tree = _tree(tmp_path)
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    build.glslc_version.cache_clear()
    try:
        code = cli.main(["run", "--suite", "kernels", "--et-src", str(tree), "--cases", QUICK + "fp32-"])
    finally:
        build.glslc_version.cache_clear()
    assert code == 2
    assert capsys.readouterr().err == ("vkdiff: error: glslc not found: install Debian package 'glslc' "
                                       "(apt-get install glslc)\n")


@requires_vulkan
@requires_glslc
def test_spirv_opt_missing_is_one_line(tmp_path, monkeypatch, capsys):
    """glslc present, spirv-opt absent: kernels could build but never be specialised, so stop before running."""
    tree = _tree(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "glslc").symlink_to(shutil.which("glslc"))
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(bin_dir))
    code = cli.main(["run", "--suite", "kernels", "--et-src", str(tree), "--cases", QUICK + "fp32-"])
    assert code == 2
    assert capsys.readouterr().err == ("vkdiff: error: spirv-opt not found: install Debian package 'spirv-tools' "
                                       "(apt-get install spirv-tools)\n")


@requires_vulkan
@requires_tree
def test_kernel_runs_and_the_plugin_never_import_torch(tmp_path):
    """torch costs seconds per process (every xdist worker, every pytest run with vkdiff installed): with a tree, so
    the kernel path (build, launch, compare) really runs."""
    import subprocess
    import sys

    script = ("import sys\n"
              "from vkdiff.entry import cli\nfrom vkdiff.entry import plugin\n"
              f"cli.main(['run', '--suite', 'kernels', '--cases', '^linear_q4gsw\\[M1-K64-N40-g32-', "
              f"'--results', {str(tmp_path / 'r.jsonl')!r}])\n"
              "print('torch' in sys.modules)\n")
    env = {**os.environ, "VKDIFF_ET_SRC": main_tree()[0]}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stderr
    assert {r.status for r in load([tmp_path / "r.jsonl"])} == {"PASS"}


def _run_repro(repro: str, results: Path, cwd: Path) -> list:
    """Run a result's repro command as a user would paste it (the installed ``vkdiff`` script)."""
    import shlex
    import subprocess

    argv = shlex.split(repro)
    assert argv[0] == "vkdiff" and shutil.which("vkdiff"), repro
    done = subprocess.run(argv + ["--results", str(results)], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr
    return list(load([results]))


@requires_vulkan
@requires_tree
def test_kernel_repro_command_runs_and_reproduces(tmp_path):
    first = tmp_path / "first.jsonl"
    assert cli.main(["run", "--suite", "kernels", "--cases", r"^linear_q4gsw\[M13-K64-N40-g32-fp32-texture3d\]$",
                     "--et-src", main_tree()[0], "--results", str(first)]) == 0
    (result,) = load([first])
    again = _run_repro(result.repro, tmp_path / "again.jsonl", tmp_path)
    assert [(r.case, r.device, r.status, r.metrics["max_abs"]) for r in again] == [
        (result.case, result.device, "PASS", result.metrics["max_abs"])]


def test_model_repro_command_runs_and_reproduces(tmp_path, monkeypatch):
    """The repro of a model case names options that exist (it once printed a nonexistent --models)."""
    from vkdiff.cases.catalog import all_model_cases
    from vkdiff.harness.runner import repro_command

    monkeypatch.setenv(trees.ET_SRC_ENV, "none")
    (case,) = all_model_cases(r"^embedding\[emb4w-perrow-vulkan\]$")
    again = _run_repro(repro_command(case, "cpu", None), tmp_path / "again.jsonl", tmp_path)
    assert {r.case for r in again} == {case.id}
    assert {r.rule: r.status for r in again if r.device == "cpu"} == {rule: "PASS" for rule in case.rules}


def test_a_reader_that_goes_away_ends_the_listing_quietly():
    """``vkdiff run --list | head -1``: SIGPIPE's status, no traceback."""
    import subprocess
    import sys

    listing = subprocess.Popen([sys.executable, "-m", "vkdiff.entry.cli", "run", "--list", "--suite", "kernels"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert listing.stdout.readline().strip()
    listing.stdout.close()
    assert listing.wait(timeout=60) == 141
    assert listing.stderr.read() == b""


def test_the_command_line_leaves_sigpipe_ignored_in_its_process():
    """An in-process caller (a test session, a ``--jobs`` parent) keeps SIGPIPE ignored: a write to a dead worker's
    pipe is then an error the process pool handles, not the caller's death (an xdist worker died so)."""
    import signal

    before = signal.getsignal(signal.SIGPIPE)
    assert cli.main(["run", "--list", "--cases", r"^add\[B1-H7-W64-fp32-buffer\]$"]) == 0
    assert signal.getsignal(signal.SIGPIPE) == before == signal.SIG_IGN
