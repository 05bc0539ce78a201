"""``vkdiff`` command line: the parser and the dispatch, driven by ``COMMANDS``; each subcommand is a module of
``vkdiff.entry.commands`` (``add_parser(sub)``, ``run(args) -> int``)."""

from __future__ import annotations

import argparse
import os
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
    """The command line. A reader of stdout that goes away (``vkdiff ... | head``) ends it quietly with SIGPIPE's
    status; SIGPIPE itself stays ignored, so a write to a dead ``--jobs`` worker's pipe is an error the pool
    handles, not the death of the whole run (and of an in-process caller, such as a test session)."""
    try:
        return _main(argv)
    except BrokenPipeError:
        if not _stdout_gone():
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return 128 + signal.SIGPIPE


def _stdout_gone() -> bool:
    """Whether stdout is a pipe with no reader left (the broken pipe was ours to print to, not another's)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows), or no real stdout
        return False


def _main(argv: Sequence[str] | None) -> int:
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
