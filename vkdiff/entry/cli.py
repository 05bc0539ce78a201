"""``vkdiff`` command line: ``devices``, ``run``, ``check``, ``report``, ``bisect``, ``repro``, ``cache``,
``coverage``."""

from __future__ import annotations

import argparse
import datetime
import json
import signal
import sys
from pathlib import Path
from typing import Sequence

from vkdiff.datamodel.settings import SettingsError
from vkdiff.entry.options import add_run_options, route_transport_problem, run_settings
from vkdiff.entry.terminal import console as terminal_console
from vkdiff.entry.terminal import (EXIT_EMPTY, EXIT_FAIL, EXIT_USAGE, Interrupts, UsageError, check_outputs,
                                   error_line, explain_no_tree, print_summary, report_line, resolve_inputs,
                                   run_exit_code, summarize, write_report)
from vkdiff.harness.selection import SelectionError

__all__ = ["EXIT_EMPTY", "EXIT_FAIL", "EXIT_USAGE", "build_parser", "main"]



def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vkdiff", description="Differential tester for ExecuTorch's Vulkan backend")
    sub = parser.add_subparsers(dest="command", required=True)
    devices = sub.add_parser("devices", help="List Vulkan adapters with features and limits")
    devices.add_argument("--json", action="store_true", help="Print JSON instead of a table")
    devices.add_argument("--all-backends", action="store_true", help="Include non-Vulkan adapters (OpenGL, ...)")
    devices.add_argument("--transport", choices=("wgpu", "vulkan"), default="wgpu",
                         help="wgpu: adapters as wgpu (naga) sees them; vulkan: the devices' own features and limits "
                              "through raw Vulkan (what the device has, whatever naga can represent)")
    run = sub.add_parser("run", help="Run cases on devices and record results")
    add_run_options(run.add_argument)
    run.add_argument("--results", metavar="FILE.jsonl", default=None,
                     help="Results file to append to (default: vkdiff-results/run-<time>.jsonl)")
    run.add_argument("--list", action="store_true", help="List the selected case ids and exit")
    run.add_argument("--suite", choices=("all", "kernels", "models", "upstream"), default="all",
                     help="Kernel cases on devices, model cases (host checks, and Vulkan delegates run node by node on "
                          "devices), or both; upstream: ExecuTorch's own delegate tests from the tree's "
                          "backends/vulkan/test/test_vulkan_delegate.py, each lowering run node by node")
    run.add_argument("-r", "--report", metavar="DIR", default=None,
                     help="Also write per-device and cross-device HTML reports to DIR")
    artifacts = run.add_mutually_exclusive_group()
    artifacts.add_argument("--save-artifacts", metavar="DIR", default=None,
                           help="Also save what each Vulkan model case's device verdict needs (no torch needed to "
                                "use it) to DIR")
    artifacts.add_argument("--from-artifacts", metavar="DIR", default=None,
                           help="Model cases from a --save-artifacts folder: judged on this machine's devices "
                                "with numpy and wgpu only")
    cache = sub.add_parser("cache", help="Check or clear vkdiff's cache ($VKDIFF_CACHE_DIR)")
    cache_sub = cache.add_subparsers(dest="cache_command", required=True)
    verify = cache_sub.add_parser("verify", help="Check every cache entry against its content hash")
    verify.add_argument("--repair", action="store_true", help="Delete corrupt entries (rebuilt when next used)")
    verify.add_argument("--rebuild", action="store_true",
                        help="Also generate and compile again every cached module of the tree and compare the bytes "
                             "(needs glslc and the tree's codegen)")
    verify.add_argument("--et-src", default=None, metavar="TREE",
                        help="The tree --rebuild compiles (as for run: a checkout, REPO@REV, a tarball or none)")
    cache_sub.add_parser("clear", help="Delete the whole cache")
    from vkdiff.entry.bisect_cli import add_bisect_parser

    add_bisect_parser(sub)
    from vkdiff.entry.repro_cli import add_repro_parser

    add_repro_parser(sub)
    from vkdiff.entry.check_cli import add_check_parser

    add_check_parser(sub)
    from vkdiff.entry.load_cli import add_load_parser

    add_load_parser(sub)
    from vkdiff.entry.lint_cli import add_lint_parser

    add_lint_parser(sub)
    coverage = sub.add_parser("coverage", help="The ops and shader variants of a tree that vkdiff covers")
    coverage.add_argument("--et-src", metavar="TREE", default=None,
                          help="ExecuTorch tree: checkout, REPO@REV or tarball (default: as vkdiff run chooses)")
    coverage.add_argument("--results", metavar="RESULTS.jsonl", nargs="*", default=(),
                          help="Results files: count the shader variants they dispatched")
    coverage.add_argument("--json", action="store_true", help="Print JSON instead of tables")
    coverage.add_argument("-v", "--verbose", action="store_true", help="List every registered op")
    report = sub.add_parser("report", help="Merge results files (several runners) into HTML reports")
    report.add_argument("results", metavar="RESULTS.jsonl", nargs="+", help="Results files from vkdiff run or pytest")
    report.add_argument("-o", "--output", metavar="DIR", required=True, help="Folder for the HTML pages")
    report.add_argument("--et-src", metavar="PATH", default=None,
                        help="The ExecuTorch tree the results ran: the index then shows its op and shader coverage")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        args.settings = run_settings(vars(args))
        problem = route_transport_problem(args.settings)
        if problem:
            raise UsageError(problem)
        if args.command == "check":
            from vkdiff.entry.check_cli import cmd_check

            return cmd_check(args, argv[argv.index("check") + 1:])
        if args.command == "devices":
            return cmd_devices(args)
        if args.command == "lint":
            from vkdiff.entry.lint_cli import cmd_lint

            return cmd_lint(args)
        if args.command == "load":
            from vkdiff.entry.load_cli import cmd_load

            return cmd_load(args)
        if args.command == "report":
            return cmd_report(args)
        if args.command == "cache":
            return cmd_cache(args)
        if args.command == "coverage":
            return cmd_coverage(args)
        if args.command == "repro":
            from vkdiff.entry.repro_cli import cmd_repro

            return cmd_repro(args)
        if args.command == "bisect":
            from vkdiff.entry.bisect_cli import cmd_bisect

            return cmd_bisect(args)
        return cmd_run(args)
    except UsageError as exc:
        print(error_line(exc), file=sys.stderr)
        return EXIT_USAGE
    except (SelectionError, SettingsError) as exc:
        print(error_line(exc), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("vkdiff: interrupted; results already written are kept", file=sys.stderr)
        return 128 + signal.SIGINT


def cmd_coverage(args: argparse.Namespace) -> int:
    """Registered ops against launchers, references and suites; variants against the results' dispatches."""
    from rich.table import Table

    from vkdiff.device.shaders.trees import EtSourceError, choose_tree
    from vkdiff.tools import coverage
    from vkdiff.store import load

    try:
        tree = choose_tree(args.et_src)
    except EtSourceError as exc:
        raise UsageError(str(exc)) from None
    if tree.path is None:
        raise UsageError(f"coverage needs an ExecuTorch tree: {tree.note}")
    ops = coverage.op_coverage(tree.path)
    variants = coverage.variant_coverage(tree.path, load([Path(p) for p in args.results])) if args.results else None
    if args.json:
        print(json.dumps(coverage.to_document(tree.path, ops, variants), indent=1))
        return 0
    console = terminal_console()
    summary = coverage.summary(ops)
    table = Table(title=f"ops registered by {tree.path} ({summary['registered']})", title_justify="left")
    for column in ("family", "ops", "launcher", "reference", "both", "suite"):
        table.add_column(column, justify="left" if column == "family" else "right")
    for family, counts in summary["families"].items():
        table.add_row(family, *(str(counts[k]) for k in ("ops", "launcher", "reference", "both", "suite")))
    console.print(table)
    console.print(f"in scope with launcher and reference: {summary['in_scope_covered_percent']}%", markup=False)
    rows = ops if args.verbose else [row for row in ops if row.family == coverage.IN_SCOPE and not row.covered]
    if rows:
        detail = Table(title="every op" if args.verbose else "in scope, not yet covered", title_justify="left")
        for column in ("op", "file", "family", "launcher", "reference", "cases"):
            detail.add_column(column, no_wrap=column == "op")
        for row in rows:
            detail.add_row(row.op, row.file, row.family, "yes" if row.launcher else "-",
                           "yes" if row.reference else "-", str(row.cases))
        console.print(detail)
    if variants:
        console.print(f"shader variants dispatched by the results: {variants['dispatched_variants']} of "
                      f"{variants['variants']} ({variants['dispatched_templates']} of {variants['templates']} "
                      f"templates)", markup=False)
    return 0


def cmd_devices(args: argparse.Namespace) -> int:
    """``vkdiff devices``: adapters as wgpu lists them, or (``--transport vulkan``) each device's own features."""
    return {"vulkan": lambda: _raw_devices(args.json)}.get(args.transport, lambda: _wgpu_devices(args))()


def _wgpu_devices(args: argparse.Namespace) -> int:
    from rich.table import Table

    from vkdiff.device.transports.adapters import enumerate_adapters

    infos = [info for info, _ in enumerate_adapters(None if args.all_backends else "Vulkan")]
    if args.json:
        print(json.dumps([i.to_dict() for i in infos], indent=2))
        return 0
    console = terminal_console()
    for i in infos:
        table = Table(title=f"{i.slug}", show_header=False, title_justify="left")
        table.add_column("field", style="bold")
        table.add_column("value")
        for field, value in (("name", i.name), ("vendor", f"{i.vendor} ({i.vendor_id:#x})"), ("driver", i.driver),
                             ("backend", i.backend), ("type", i.adapter_type), ("features", ", ".join(i.features))):
            table.add_row(field, value)
        for limit, value in i.limits.items():
            table.add_row(limit, str(value))
        console.print(table)
    if not infos:
        print("no adapters found (install mesa-vulkan-drivers for lavapipe)")
    return 0


def _raw_devices(as_json: bool) -> int:
    """``vkdiff devices --transport vulkan``: each device's features (yes/no) and limits through raw Vulkan."""
    from rich.table import Table

    from vkdiff.device.transports.raw_vulkan import RawVulkanError
    from vkdiff.device.transports.vk_device import probe

    try:
        devices = probe()
    except RawVulkanError as exc:
        print(f"vkdiff: {exc}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps([d.to_dict() for d in devices], indent=2))
        return 0
    console = terminal_console()
    for d in devices:
        table = Table(title=f"{d.name} (raw Vulkan {d.api_version}, {d.device_type})", show_header=False,
                      title_justify="left")
        table.add_column("field", style="bold")
        table.add_column("value")
        table.add_row("has", ", ".join(name for name, ok in d.features.items() if ok))
        table.add_row("lacks", ", ".join(name for name, ok in d.features.items() if not ok) or "—")
        table.add_row("extensions", ", ".join(d.extensions))
        for limit, value in d.limits.items():
            table.add_row(limit, str(value))
        console.print(table)
    if not devices:
        print("no Vulkan devices found (install mesa-vulkan-drivers for lavapipe)")
    return 0


def _model_cases(pattern: str | None) -> list:
    """Imported here: model cases need torch, which kernel-only runs never load."""
    from vkdiff.cases.catalog import all_model_cases

    return all_model_cases(pattern)


def cmd_run(args: argparse.Namespace) -> int:

    from vkdiff.cases.kernels import all_cases
    from vkdiff.cases.sampling import sampled
    from vkdiff.datamodel import REPAIRS
    from vkdiff.harness.runner import Runner
    from vkdiff.store import ResultStore

    console = terminal_console(stderr=True, soft_wrap=True)
    cases = sampled(all_cases(args.cases), minimum=args.sample or 0, seed=args.seed) if args.suite in (
        "all", "kernels") else []
    models = _models(args) if args.suite in ("all", "models") else _upstream(args) if args.suite == "upstream" else []
    if args.list:
        print("\n".join([c.id for c in cases] + [m.id for m in models]))
        return 0
    if not cases and not models:
        raise UsageError(f"--cases {args.cases!r} matches no case; try 'vkdiff run --list'")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    results_path = Path(args.results or f"vkdiff-results/run-{stamp}.jsonl")
    check_outputs((results_path, "--results", False), (args.report, "--report", True),
                  (args.save_artifacts, "--save-artifacts", True))
    repairs_before = len(REPAIRS)
    tree, devices = resolve_inputs(args, console)
    runner = Runner(tree=tree, adapters=devices, settings=args.settings, et_src=args.et_src,
                    repairs_from=repairs_before)
    console.print(f"vkdiff: seed {args.seed}; {len(cases)} kernel cases × {len(devices)} device(s) "
                  f"({', '.join(runner.slugs) or 'none'}), {len(models)} model cases", markup=False)
    with Interrupts(console) as interrupts:
        results = run_all(runner, cases, models, ResultStore(results_path), console, interrupts,
                          save_to=Path(args.save_artifacts) if args.save_artifacts else None)
    print_summary(summarize(results), console)
    explain_no_tree(results, runner.tree, console)
    console.print(f"results: {results_path}", markup=False)
    if args.report:
        write_report([results_path], Path(args.report), console, runner.tree.path)
    return run_exit_code(results, runner, interrupts, args.allow_empty, console)


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


def _models(args: argparse.Namespace) -> list:
    """The catalogue's model cases, or those saved in ``--from-artifacts`` (then torch is never imported)."""
    if not args.from_artifacts:
        return _model_cases(args.cases)
    from vkdiff.subjects.artifacts import ArtifactError, load

    try:
        return load(Path(args.from_artifacts), args.cases)
    except ArtifactError as exc:
        raise UsageError(str(exc)) from None


def run_all(runner, cases: Sequence, models: Sequence, store, console, interrupts: "Interrupts",
            save_to: Path | None = None) -> list:
    """Every case on its devices (``harness.loop.run_cases``), each result appended and shown as it comes; stops
    early on a signal.

    With ``save_to``, each Vulkan model case's artifact is saved before its devices run."""
    from rich.progress import Progress

    from vkdiff.cases.kernels import KernelCase
    from vkdiff.datamodel import HOST
    from vkdiff.harness.loop import run_cases

    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("running", total=len(cases) * max(1, len(runner.slugs)) + len(models))
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

        return run_cases([*cases, *models], (), runner, store, on_result=shown, stop=lambda: bool(interrupts.received),
                         before=save, after=advance)


def cmd_cache(args: argparse.Namespace) -> int:
    """``vkdiff cache verify [--repair] [--rebuild [--et-src TREE]]`` (exit 1 when corrupt entries remain) and
    ``vkdiff cache clear``."""
    from vkdiff.entry import cache_admin
    from vkdiff.datamodel import cache_dir, cache_root

    root = cache_dir()
    if args.cache_command == "clear":
        root = cache_root()
        files, size = cache_admin.clear(root)
        print(f"removed {root}: {files} files, {size / 2**20:.1f} MiB")
        return 0
    if args.et_src is not None and not args.rebuild:
        raise UsageError("vkdiff cache verify: --et-src names the tree --rebuild compiles; add --rebuild")
    rebuild = cache_admin.rebuilder(args.et_src, root) if args.rebuild else None
    report = cache_admin.verify(root, repair=args.repair, rebuild=rebuild)
    print(f"cache {root}")
    print("\n".join(report.lines()))
    if report.corrupt and args.repair:
        print(f"repaired {len(report.corrupt)} corrupt entries and deleted {len(report.stale)} leftovers; what was "
              f"deleted is rebuilt when next used")
    return EXIT_FAIL if report.corrupt and not args.repair else 0


def cmd_report(args: argparse.Namespace) -> int:

    missing = [p for p in args.results if not Path(p).is_file()]
    if missing:
        raise UsageError(f"no such results file: {', '.join(missing)}")
    check_outputs((args.output, "-o", True))
    tree = None
    if args.et_src:
        from vkdiff.device.shaders.trees import EtSourceError, choose_tree

        try:
            tree = choose_tree(args.et_src).path
        except EtSourceError as exc:
            raise UsageError(str(exc)) from None
    write_report([Path(p) for p in args.results], Path(args.output), terminal_console(stderr=True, soft_wrap=True),
                 tree)
    return 0


if __name__ == "__main__":
    sys.exit(main())
