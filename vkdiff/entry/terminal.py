"""What every command shares on the terminal: usage errors, signals, the summary, exit codes, reports."""

from __future__ import annotations

import argparse
import signal
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from vkdiff.datamodel import Status
from vkdiff.entry.options import output_problem

if TYPE_CHECKING:
    from concurrent.futures import Future

EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_EMPTY = 3
"""An adapter and a tree were given, yet no kernel case ran (see ``--allow-empty``)."""


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""


def console(**options):
    """A rich ``Console`` that shows a control character in any text it renders as its escape (names, reasons
    and notes can come from crafted files), whatever the caller forgot to clean."""
    from rich.console import Console

    from vkdiff.datamodel.text import printable

    class _Printable(Console):
        def render_str(self, text: str, **kwargs):
            return super().render_str(printable(text), **kwargs)

    return _Printable(**options)


def error_line(exc: BaseException) -> str:
    """``vkdiff: error: ...`` for a usage error, its control characters escaped."""
    from vkdiff.datamodel.text import printable

    return f"vkdiff: error: {printable(str(exc))}"


class Interrupts:
    """SIGINT/SIGTERM during a run: stop after the cases in flight (a second signal stops at once).

    Every result is appended as it happens (kernel cases as each window of them ends, ``overlap.WINDOW``), so
    stopping loses nothing, and a second signal only the cases in flight.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, console):
        self.console = console
        self.received: int | None = None
        self._saved: dict[int, object] = {}

    def __enter__(self) -> "Interrupts":
        self._saved = {sig: signal.signal(sig, self._handle) for sig in self.SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame) -> None:
        if self.received is not None:
            raise KeyboardInterrupt
        self.received = signum
        self.console.print(f"vkdiff: {signal.Signals(signum).name}: stopping after the cases in flight "
                           f"(again to stop now)", markup=False, style="yellow")

    @property
    def exit_code(self) -> int:
        """128 + the signal number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + int(self.received or 0)


def inputs_ahead(args: argparse.Namespace, pool) -> tuple[Future, Future]:
    """The tree chosen and the adapters enumerated (``select``) on ``pool``'s two threads, started while the caller
    still imports and selects its cases: the driver's instance and the tree's check are most of a one-case run's
    set-up (0.16 s and 0.17 s on an H200). Hashing, decompressing and the driver's calls release the GIL. What the
    threads run is imported here first, as imports on two threads at once can deadlock on a cycle.

    Returns:
        (choosing, selecting): futures of (tree, whether its SPIR-V is prebuilt) and of the adapters.
    """
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.shaders.trees import choose_tree
    from vkdiff.device.transports.adapters import import_for, select

    settings = args.settings
    import_for(settings.transport)

    def chosen():
        tree = choose_tree(args.et_src)
        return tree, tree.path is None or ShaderBuilder(tree.path).has_prebuilt()

    return pool.submit(chosen), pool.submit(select, args.device, via=settings.transport, validate=settings.validate,
                                            profile=settings.device_profile)


def resolve_inputs(args: argparse.Namespace, console, open_devices: bool = False,
                   ahead: tuple[Future, Future] | None = None):
    """Validate --device, choose the tree, check glslc and spirv-opt, all before any device work.

    The tree is chosen (and a cached copy checked against its source) on a thread while the adapters are
    enumerated on another (``inputs_ahead``; ``ahead`` when the caller started them) and, with ``open_devices``,
    while each device is created on a third (``create_device``: its driver calls release the GIL too). Each problem
    is one line (a usage error), a device's first; the tree's note is printed once everything is valid and the
    devices are open (their creation silences file descriptor 2).

    Returns:
        (tree, devices, opened): ``opened`` maps a slug to the future of its device (empty without ``open_devices``;
        a device that failed to open raises from ``result()``, where the first case on it would have).
    """
    from concurrent.futures import ThreadPoolExecutor

    from vkdiff.device.transports.adapters import (TRANSFORMS_MODULES, NoAdapterError, UnknownDeviceError,
                                                   create_device)
    from vkdiff.device.shaders.build import GlslcMissingError, glslc_version
    from vkdiff.device.shaders.dispatch import has_baked_modules
    from vkdiff.device.shaders.spirv import SpirvOptMissingError, spirv_opt
    from vkdiff.device.shaders.trees import EtSourceError
    from vkdiff.datamodel import CacheUnwritableError, ensure_cache_writable

    try:
        ensure_cache_writable()
        settings = args.settings
        with ThreadPoolExecutor(2, thread_name_prefix="vkdiff-inputs") as pool, \
                ThreadPoolExecutor(1, thread_name_prefix="vkdiff-open") as opener:
            choosing, selecting = ahead or inputs_ahead(args, pool)
            devices = selecting.result()
            opened = {info.slug: opener.submit(create_device, info, adapter, settings.limits_profile)
                      for info, adapter in devices} if open_devices else {}
            tree, prebuilt = choosing.result()
        if not prebuilt:
            glslc_version()
        if tree.path is not None and devices and TRANSFORMS_MODULES[settings.transport] and not has_baked_modules():
            spirv_opt()
    except (CacheUnwritableError, EtSourceError, GlslcMissingError, NoAdapterError, SpirvOptMissingError,
            UnknownDeviceError) as exc:
        raise UsageError(str(exc)) from None
    console.print(tree.note, markup=False)
    return tree, devices, opened


def run_exit_code(results: Sequence, runner, interrupts: "Interrupts", allow_empty: bool, console) -> int:
    """128+signal when stopped, 1 on failures, 3 when nothing ran (unless allowed), else 0."""
    from vkdiff.verdicts.expectations import counts_as_failure
    from vkdiff.harness.runner import nothing_ran

    if interrupts.received:
        console.print(f"vkdiff: stopped by {signal.Signals(interrupts.received).name} after {len(results)} results",
                      markup=False, style="yellow")
        return interrupts.exit_code
    if any(counts_as_failure(r) for r in results):
        return EXIT_FAIL
    empty = nothing_ran(results, runner.tree, runner.slugs)
    if empty and not allow_empty:
        console.print(f"vkdiff: warning: {empty}; pass --allow-empty if that is intended", markup=False, style="red")
        return EXIT_EMPTY
    return 0


def report_line(result, console) -> None:
    """One line for a known bug, an unexpected pass or a failure (passes and skips stay quiet)."""
    from vkdiff.verdicts.expectations import KNOWN_IN_PROGRAM, counts_as_failure

    first = result.reason.splitlines()[0] if result.reason else ""
    where = f"{result.case}@{result.device}" + (f" {result.rule}" if result.rule else "")
    outcome = (result.expectation or {}).get("outcome")
    if outcome == "known":
        console.print(f"KNOWN {result.expectation['id']}: {result.status} {where}", markup=False, style="yellow")
    elif outcome == "unexpected-pass":
        console.print(f"UNEXPECTED PASS {where}: expectation {result.expectation['id']} may be fixed upstream",
                      markup=False, style="magenta")
    elif outcome == KNOWN_IN_PROGRAM:
        found = result.expectation
        console.print(f"{result.status} {where}: {first} [known ET-VK bug {found['id']}; minimal: "
                      f"{found.get('minimal', '')}]", markup=False, style="red")
    elif counts_as_failure(result):
        console.print(f"{result.status} {where}: {first}", markup=False, style="red")
    made = (result.metrics or {}).get("driver_repro") or {}
    if made.get("folder"):
        amber = made.get("amber") or f"no Amber script: {made.get('amber_error', '')}"
        console.print(f"  repro: {made['folder']} ({made['replay']}; {amber})", markup=False)
    elif made.get("error"):
        console.print(f"  repro: not written: {made['error']}", markup=False)


STALE_PASS = "PASS (port-stale)"
"""The summary column of passes that used a port whose C++ differs in the tree: never counted as plain PASS."""


def summarize(results) -> dict[str, Counter]:
    """Counts per status, per device; known bugs, unexpected passes and port-stale passes counted apart."""
    table: dict[str, Counter] = {}
    for result in results:
        outcome = (result.expectation or {}).get("outcome")
        column = {"known": "KNOWN", "unexpected-pass": "UNEXPECTED_PASS"}.get(outcome, result.status)
        if column == Status.PASS.name and "port-stale" in (result.flags or []):
            column = STALE_PASS
        table.setdefault(result.device, Counter())[column] += 1
    return table


def check_outputs(*outputs: tuple[object, str, bool]) -> None:
    """Each ``(path or None, flag, is a folder)`` must be writable as such: else one usage error."""
    for path, flag, folder in outputs:
        problem = output_problem(path, flag, folder=folder) if path else None
        if problem:
            raise UsageError(problem)


def write_report(paths: Sequence[Path], out_dir: Path, console, tree: Path | None = None) -> None:
    """The HTML reports of ``paths``; with the tree the results ran, the index shows its coverage too."""
    from vkdiff.store import LoadReport
    from vkdiff.reports import render_reports

    index = render_reports(paths, out_dir, coverage_document(tree, paths) if tree is not None else None)
    if index.problems:
        console.print(LoadReport(results=[], problems=index.problems).summary(), markup=False, style="yellow")
    console.print(f"report: {index.index} ({index.results} results, {len(index.devices)} device page(s), "
                  f"{index.seconds:.2f} s)", markup=False)


def print_summary(table: dict, console) -> None:
    from rich.table import Table

    out = Table(title="vkdiff summary")
    out.add_column("device")
    columns = [Status.PASS.name, STALE_PASS] + [s.name for s in Status if s is not Status.PASS] + [
        "KNOWN", "UNEXPECTED_PASS"]
    statuses = [name for name in columns if any(name in c for c in table.values())]
    for name in statuses:
        out.add_column(name, justify="right")
    for device, counts in table.items():
        out.add_row(device, *(str(counts.get(s, 0)) for s in statuses))
    console.print(out)


def explain_no_tree(results: Sequence, tree, console) -> None:
    """Under the summary: why the device rows are NOT_RUN when there is no tree, and how to give one."""
    from vkdiff.datamodel import HOST

    skipped = [r for r in results if r.device != HOST and r.status == Status.NOT_RUN.name]
    if tree.path is None and skipped:
        note = tree.note or "no ExecuTorch tree; pass --et-src PATH (a checkout, REPO@REV or a .tar.* of one)"
        console.print(f"{len(skipped)} device results are NOT_RUN: {note}", markup=False, style="yellow")


def coverage_document(tree: Path, paths: Sequence[Path]) -> dict:
    """``vkdiff coverage --json --results PATHS`` for ``tree`` (its registered ops and the variants dispatched)."""
    from vkdiff.tools import coverage
    from vkdiff.store import load

    return coverage.to_document(tree, coverage.op_coverage(tree), coverage.variant_coverage(tree, load(list(paths))))


def print_sweeps(folder: Path, cases: Sequence, tree, settings, console) -> None:
    """Add the SPIR-V every routing profile asks for to saved artifacts (``save_shaders``) and say what went in."""
    from vkdiff.subjects.artifacts import save_shaders

    if tree.path is None:
        console.print(f"--save-artifacts {folder}: no ExecuTorch tree, so no SPIR-V saved (a runner will need glslc)",
                      markup=False, style="yellow")
        return
    for done in save_shaders(folder, list(cases), tree, settings):
        routes = sorted({route for route, _, _ in done.outcomes})
        console.print(f"artifacts: {done.transport}: {len(done.variants)} variants over routes {', '.join(routes)}"
                      + (f" ({done.problem})" if done.problem else ""), markup=False)
    console.print(f"artifacts: {folder} (check it on a runner: vkdiff check {folder} --et-src TREE)", markup=False)
