"""Run, then judge: a case goes down through the executors once and its result is judged once, after.

Every call the harness makes into ``executors`` or ``verdicts`` while the runner runs one
case on one device is traced (``sys.setprofile``): a kernel case and a program (the
lowered ``llama_proj``, as ``vkdiff check`` gets a ``.pte``) each make one executor call,
then the judge's call and the known-bug annotation, never execution after judging.
"""

from __future__ import annotations

import sys

import pytest

from tests.testutils import first_adapter, requires_tree, requires_vulkan
from vkdiff.cases.kernels import all_cases
from vkdiff.device.shaders.trees import TreeChoice
from vkdiff.harness.runner import Runner

pytestmark = [requires_tree, requires_vulkan]

ROOMS = ("executors", "verdicts")


def room(frame) -> str:
    name = frame.f_globals.get("__name__", "")
    return name.split(".")[1] if name.startswith("vkdiff.") else ""


def crossings(run) -> list[str]:
    """``run()``'s calls from ``vkdiff.harness`` into the executors and the verdicts, in order."""
    seen: list[str] = []

    def trace(frame, event, arg) -> None:
        caller = frame.f_back
        if caller is not None and room(caller) == "harness" and room(frame) in ROOMS:
            seen.append(f"{frame.f_globals['__name__']}.{frame.f_code.co_name}")

    sys.settrace(trace)
    try:
        run()
    finally:
        sys.settrace(None)
    return seen


@pytest.fixture(scope="module")
def runner(et_tree):
    made = Runner(tree=TreeChoice(path=et_tree, note="pinned"), adapters=[first_adapter()])
    yield made
    made.close()


def test_a_kernel_case_runs_once_then_is_judged(runner):
    (case,) = all_cases(r"^linear_q4gsw\[M13-K256-N40-g32-fp32-buffer\]$")
    (slug,) = runner.slugs
    runner.run(case, slug)  # untraced first: shader builds and pipelines are cold work, traced they cost seconds
    walk = crossings(lambda: runner.run(case, slug))
    assert [c for c in walk if not c.startswith("vkdiff.executors.references")] == [
        "vkdiff.executors.kernel.run_kernel", "vkdiff.verdicts.kernels.judge_kernel",
        "vkdiff.verdicts.expectations.annotate"], walk


def test_a_program_runs_once_then_is_judged(runner):
    from vkdiff.cases.catalog import all_model_cases
    from vkdiff.cases.program_case import ProgramCase
    from vkdiff.harness.device_models import identity, prepare_or_status

    (model,) = all_model_cases(r"^llama_proj\[4w-vulkan\]$")
    prepared = prepare_or_status(model)
    case = ProgramCase(id=model.id, ident=identity(model), model=prepared)
    (slug,) = runner.slugs
    walk = crossings(lambda: runner.run(case, slug))
    assert walk == ["vkdiff.verdicts.registrations.unloadable", "vkdiff.executors.program_runs.run_program",
                    "vkdiff.verdicts.program_runs.judge_program", "vkdiff.verdicts.expectations.annotate"], walk
