"""``vkdiff run``: kernel cases, model cases or the tree's own delegate tests on every device, each result recorded."""

from __future__ import annotations

import argparse
import datetime
import functools
import re
from pathlib import Path
from typing import Sequence

from vkdiff.entry.options import add_run_options
from vkdiff.entry.terminal import console as terminal_console
from vkdiff.entry.terminal import (Interrupts, UsageError, check_outputs, explain_no_tree, print_summary, report_line,
                                   inputs_ahead, resolve_inputs, run_exit_code, summarize, write_report)


def add_parser(sub) -> None:
    parser = sub.add_parser("run", help="Run cases on devices and record results")
    add_run_options(parser.add_argument)
    parser.add_argument("--results", metavar="FILE.jsonl", default=None,
                        help="Results file to append to (default: vkdiff-results/run-<time>.jsonl)")
    parser.add_argument("--jobs", "-j", metavar="N", type=_jobs, default=None,
                        help="Run kernel cases in N worker processes, each with its own device (verdicts as with 1; "
                             "a worker that dies has its cases rerun here one by one); default auto: one per core, "
                             "up to 16, when there are enough kernel cases to share")
    parser.add_argument("--list", action="store_true", help="List the selected case ids and exit")
    parser.add_argument("--suite", choices=("all", "kernels", "models", "upstream"), default="all",
                        help="Kernel cases on devices, model cases (host checks, and Vulkan delegates run node by node "
                             "on devices), or both; upstream: ExecuTorch's own delegate tests from the tree's "
                             "backends/vulkan/test/test_vulkan_delegate.py, each lowering run node by node")
    parser.add_argument("-r", "--report", metavar="DIR", default=None,
                        help="Also write per-device and cross-device HTML reports to DIR")
    artifacts = parser.add_mutually_exclusive_group()
    artifacts.add_argument("--save-artifacts", metavar="DIR", default=None,
                           help="Also save what each Vulkan model case's device verdict needs (no torch needed to "
                                "use it) to DIR")
    artifacts.add_argument("--from-artifacts", metavar="DIR", default=None,
                           help="Model cases from a --save-artifacts folder: judged on this machine's devices "
                                "with numpy and wgpu only")


def _jobs(text: str) -> int | None:
    """Validate ``--jobs``: ``auto`` (None) or a whole number of worker processes, at least 1."""
    if text == "auto":
        return None
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"--jobs must be auto or a whole number of worker processes (1 or more), "
                                         f"got {text!r}")
    return int(text)


def run(args: argparse.Namespace) -> int:
    from concurrent.futures import ThreadPoolExecutor

    from vkdiff.datamodel import REPAIRS

    repairs_before = len(REPAIRS)  # before the threads: the tree's check may repair its cached copy
    early = ThreadPoolExecutor(2, thread_name_prefix="vkdiff-inputs")
    ahead = None
    try:
        if not args.list:
            ahead = inputs_ahead(args, early)
        from vkdiff.cases.kernels import all_cases
        from vkdiff.cases.sampling import sampled
        from vkdiff.harness.parallel import jobs_for

        console = terminal_console(stderr=True, soft_wrap=True)
        cases = sampled(all_cases(args.cases), minimum=args.sample or 0, seed=args.seed) if args.suite in (
            "all", "kernels") else []
        models, unlowerable = _models(args) if args.suite in ("all", "models") else (_upstream(
            args) if args.suite == "upstream" else [], [])
        if args.list:
            print("\n".join([c.id for c in cases] + [m.id for m in models] + [r.case for r in unlowerable]))
            return 0
        if not cases and not models and not unlowerable:
            raise UsageError(f"--cases {args.cases!r} matches no case; try 'vkdiff run --list'")
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        results_path = Path(args.results or f"vkdiff-results/run-{stamp}.jsonl")
        check_outputs((results_path, "--results", False), (args.report, "--report", True),
                      (args.save_artifacts, "--save-artifacts", True))
        alone = args.settings.timeout is None and jobs_for(args.jobs, len(cases)) == 1  # devices used here
        tree, devices, opened = resolve_inputs(args, console, open_devices=alone, ahead=ahead)
    finally:
        _leave(early, ahead)
    from vkdiff.harness.runner import Runner
    from vkdiff.repro.driver import write_driver_repro
    from vkdiff.store import ResultStore

    runner = Runner(tree=tree, adapters=devices, settings=args.settings, et_src=args.et_src, opened=opened,
                    repairs_from=repairs_before, on_driver_bug=functools.partial(
                        write_driver_repro, root=str(results_path.with_suffix(".repro")), session_seed=args.seed))
    console.print(f"vkdiff: seed {args.seed}; {len(cases)} kernel cases × {len(devices)} device(s) "
                  f"({', '.join(runner.slugs) or 'none'}), {len(models)} model cases", markup=False)
    if unlowerable:
        console.print(f"vkdiff: {len(unlowerable)} model cases NOT_RUN: {unlowerable[0].reason}", markup=False,
                      style="yellow")
    with Interrupts(console) as interrupts:
        results = _run_all(runner, cases, models, ResultStore(results_path), console, interrupts, unlowerable,
                           save_to=Path(args.save_artifacts) if args.save_artifacts else None,
                           jobs=jobs_for(args.jobs, len(cases) if runner.slugs and runner.tree.path else 0))
    if args.save_artifacts and not interrupts.received:
        _sweep_saved(Path(args.save_artifacts), runner.tree, args.settings, console)
    print_summary(summarize(results), console)
    explain_no_tree(results, runner.tree, console)
    console.print(f"results: {results_path}", markup=False)
    if args.report:
        write_report([results_path], Path(args.report), console, runner.tree.path)
    return run_exit_code(results, runner, interrupts, args.allow_empty, console)


def _leave(early, ahead) -> None:
    """Let the input threads go without waiting for the tree's (a usage error is printed at once, not after a
    fetch); the adapters' is waited for, as its driver calls silence file descriptor 2, where the error goes."""
    import concurrent.futures

    if ahead is not None:
        concurrent.futures.wait([ahead[1]])
    early.shutdown(wait=False)


_LOWERING = ("torch", "executorch", "torchao")
"""What a model case needs to be built and lowered (``vkdiff[lower]``)."""


def _model_cases(pattern: str | None) -> tuple[list, list]:
    """(model cases, a ``NOT_RUN`` host result for each one matched that cannot be lowered here). Imported here, and
    only when ``pattern`` matches a model case's id (``MODEL_IDS``): model cases need torch, which a kernel-only run
    never loads; a runner without the lowering extra gets its model cases' ids, not a traceback."""
    from vkdiff.cases.model_ids import matches_a_model_case, model_ids

    if not matches_a_model_case(pattern):
        return [], []
    missing = [name for name in _LOWERING if not _importable(name)]
    if missing:
        from vkdiff.datamodel import HOST, Result, Status

        reason = (f"lowering a model case needs {', '.join(_LOWERING)}; not installed here: {', '.join(missing)} "
                  f"(pip install vkdiff[lower], or judge saved artifacts: --from-artifacts DIR)")
        regex = re.compile(pattern) if pattern else None
        return [], [Result(case=case_id, op=case_id.partition("[")[0], device=HOST, status=Status.NOT_RUN.name,
                           rule="lower", reason=reason) for case_id in model_ids()
                    if regex is None or regex.search(case_id)]
    from vkdiff.cases.catalog import all_model_cases

    return all_model_cases(pattern), []


def _importable(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # ValueError: present in sys.modules as None (import blocked)
        return False


def _upstream(args: argparse.Namespace) -> list:
    """The tree's own delegate tests as model cases (``vkdiff.cases.upstream``); a tree without them is one line."""
    from vkdiff.cases.upstream import UpstreamError, model_cases
    from vkdiff.device.shaders.trees import EtSourceError, choose_tree

    try:
        tree = choose_tree(args.et_src)
        if tree.path is None:
            raise UsageError(f"--suite upstream needs an ExecuTorch tree: {tree.note}")
        return model_cases(tree.path, args.cases)
    except (EtSourceError, UpstreamError) as exc:
        raise UsageError(str(exc)) from None


def _models(args: argparse.Namespace) -> tuple[list, list]:
    """The catalogue's model cases (and ``NOT_RUN`` results of those that cannot be lowered here), or those saved in
    ``--from-artifacts`` (then torch is never imported)."""
    if not args.from_artifacts:
        return _model_cases(args.cases)
    from vkdiff.subjects.artifacts import ArtifactError, load

    try:
        return load(Path(args.from_artifacts), args.cases), []
    except ArtifactError as exc:
        raise UsageError(str(exc)) from None


def _sweep_saved(folder: Path, tree, settings, console) -> None:
    """The saved model cases' SPIR-V under every routing profile, so a runner compiles nothing."""
    from vkdiff.entry.terminal import print_sweeps
    from vkdiff.subjects.artifacts import MANIFEST, load

    if (folder / MANIFEST).exists():
        print_sweeps(folder, load(folder), tree, settings, console)


def _run_all(runner, cases: Sequence, models: Sequence, store, console, interrupts: "Interrupts",
             host: Sequence = (), save_to: Path | None = None, jobs: int = 1) -> list:
    """Every case on its devices (``harness.loop.run_cases``) after the ``host`` results already made, each result
    appended and shown as it comes; stops early on a signal.

    With ``save_to``, each Vulkan model case's artifact is saved before its devices run; with ``jobs`` above 1,
    kernel cases run in that many worker processes (each prepares its own references)."""
    from rich.progress import Progress

    from vkdiff.cases.kernels import KernelCase
    from vkdiff.datamodel import HOST
    from vkdiff.harness.loop import run_cases

    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("running", total=len(cases) * max(1, len(runner.slugs)) + len(models))
        if jobs == 1:
            runner.schedule(cases)

        def shown(result) -> None:
            progress.advance(task, advance=int(result.device != HOST))
            for repair in runner.new_repairs():
                progress.console.print(repair.line(), markup=False, style="yellow")
            report_line(result, progress.console)

        def save(case) -> None:
            if save_to is not None and getattr(case, "partitioner", "").startswith("vulkan"):
                from vkdiff.subjects.artifacts import save as save_artifacts

                save_artifacts(case, save_to)

        def advance(case) -> None:
            if not isinstance(case, KernelCase):
                progress.advance(task)

        return run_cases([*cases, *models], host, runner, store, on_result=shown, stop=lambda: bool(interrupts.received),
                         before=save, after=advance, jobs=jobs)
