"""``vkdiff report``: results files of several runners merged into HTML reports."""

from __future__ import annotations

import argparse
from pathlib import Path

from vkdiff.entry.terminal import UsageError, check_outputs, write_report
from vkdiff.entry.terminal import console as terminal_console


def add_parser(sub) -> None:
    report = sub.add_parser("report", help="Merge results files (several runners) into HTML reports")
    report.add_argument("results", metavar="RESULTS.jsonl", nargs="+", help="Results files from vkdiff run or pytest")
    report.add_argument("-o", "--output", metavar="DIR", required=True, help="Folder for the HTML pages")
    report.add_argument("--et-src", metavar="PATH", default=None,
                        help="The ExecuTorch tree the results ran: the index then shows its op and shader coverage")


def run(args: argparse.Namespace) -> int:
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
