"""``vkdiff coverage``: registered ops against launchers, references and suites, and against the ops the partitioner
accepts; variants against the results' dispatches."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from vkdiff.entry.terminal import UsageError
from vkdiff.entry.terminal import console as terminal_console


def add_parser(sub) -> None:
    coverage = sub.add_parser("coverage", help="The ops and shader variants of a tree that vkdiff covers, and the "
                                                "ops its partitioner accepts but its runtime does not register")
    coverage.add_argument("--et-src", metavar="TREE", default=None,
                          help="ExecuTorch tree: checkout, REPO@REV or tarball (default: as vkdiff run chooses)")
    coverage.add_argument("--results", metavar="RESULTS.jsonl", nargs="*", default=(),
                          help="Results files: count the shader variants they dispatched")
    coverage.add_argument("--json", action="store_true", help="Print JSON instead of tables")
    coverage.add_argument("-v", "--verbose", action="store_true", help="List every registered op")


def run(args: argparse.Namespace) -> int:
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
    _print_registration(console, tree.path)
    if variants:
        console.print(f"shader variants dispatched by the results: {variants['dispatched_variants']} of "
                      f"{variants['variants']} ({variants['dispatched_templates']} of {variants['templates']} "
                      f"templates)", markup=False)
    return 0


def _print_registration(console, tree: Path) -> None:
    """The ops the partitioner accepts that the runtime does not register, and the reverse, each with its fate."""
    from rich.table import Table

    from vkdiff.tools import registrations

    accepted = registrations.accepted_not_registered(tree)
    reverse = registrations.registered_not_accepted(tree)
    unloadable = sum(row.cannot_load for row in accepted)
    titles = (f"accepted by the partitioner (op_registry.py), not registered by the runtime (VK_REGISTER_OP): "
              f"{len(accepted)}, {unloadable} of them can reach a delegate ET-VK cannot load",
              f"registered by the runtime, never accepted by the partitioner: {len(reverse)}")
    for title, rows, column in zip(titles, (accepted, reverse), ("accepted at", "registered in")):
        table = Table(title=title, title_justify="left")
        for name in ("op", column, "fate"):
            table.add_column(name, no_wrap=name == "op")
        for row in rows:
            table.add_row(row.op, row.where, row.fate)
        console.print(table)
