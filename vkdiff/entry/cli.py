"""``vkdiff`` command line: the parser and the dispatch, driven by ``COMMANDS``; each subcommand is a module of
``vkdiff.entry.commands`` (``add_parser(sub)``, ``run(args) -> int``)."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Sequence

from vkdiff.datamodel.settings import SettingsError
from vkdiff.entry.commands import bisect, cache, check, coverage, devices, lint, load, report, repro, run
from vkdiff.entry.options import route_transport_problem, run_settings
from vkdiff.entry.terminal import EXIT_EMPTY, EXIT_FAIL, EXIT_USAGE, UsageError, error_line
from vkdiff.harness.selection import SelectionError

__all__ = ["COMMANDS", "EXIT_EMPTY", "EXIT_FAIL", "EXIT_USAGE", "build_parser", "main"]

COMMANDS = {module.__name__.rpartition(".")[2]: module
            for module in (devices, run, cache, bisect, repro, check, load, lint, coverage, report)}
"""Command name (its module's name) → its module, in the order ``vkdiff --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vkdiff", description="Differential tester for ExecuTorch's Vulkan backend")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS.values():
        command.add_parser(sub)
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
        args.argv = argv[argv.index(args.command) + 1:]
        return COMMANDS[args.command].run(args)
    except UsageError as exc:
        print(error_line(exc), file=sys.stderr)
        return EXIT_USAGE
    except (SelectionError, SettingsError) as exc:
        print(error_line(exc), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("vkdiff: interrupted; results already written are kept", file=sys.stderr)
        return 128 + signal.SIGINT


if __name__ == "__main__":
    sys.exit(main())
