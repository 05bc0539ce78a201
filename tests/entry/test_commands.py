"""One convention for ``vkdiff`` subcommands: each is a module of ``vkdiff.entry.commands`` named as the command, with
``add_parser(sub)`` and ``run(args) -> int`` as its only public names; ``cli`` builds the parser and dispatches from
its table of those modules, nothing else."""

from __future__ import annotations

import argparse
import ast
import importlib
from pathlib import Path

import pytest

from vkdiff.entry import cli, commands

FOLDER = Path(commands.__file__).parent
MODULES = sorted(p.stem for p in FOLDER.glob("*.py") if p.name != "__init__.py")

HELP_ORDER = ["devices", "run", "cache", "bisect", "repro", "check", "load", "lint", "coverage", "report"]
"""The order ``vkdiff --help`` lists the commands in (as before the commands had modules of their own)."""

SMALLEST = {"devices": ["devices"], "run": ["run"], "cache": ["cache", "clear"], "bisect": ["bisect", "node", "C"],
            "repro": ["repro", "C", "-o", "out"], "check": ["check", "model.pte", "--seed", "3", "--device", "x"],
            "load": ["load"], "lint": ["lint"], "coverage": ["coverage"], "report": ["report", "r.jsonl", "-o", "out"]}
"""Each command's shortest valid command line (a new command adds its own here)."""


def _subcommands(parser: argparse.ArgumentParser) -> list[str]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return list(action.choices)


def _public_names(module: str) -> set[str]:
    """Names a module defines at its top level (functions, classes, assignments) that do not start with ``_``."""
    tree = ast.parse((FOLDER / f"{module}.py").read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return {n for n in names if not n.startswith("_")}


def test_the_commands_folder_holds_the_commands():
    assert set(HELP_ORDER) <= set(MODULES), sorted(set(HELP_ORDER) - set(MODULES))


@pytest.mark.parametrize("module", MODULES)
def test_each_command_module_defines_add_parser_and_run_and_nothing_else_public(module):
    loaded = importlib.import_module(f"vkdiff.entry.commands.{module}")
    assert callable(getattr(loaded, "add_parser", None)) and callable(getattr(loaded, "run", None)), module
    assert _public_names(module) == {"add_parser", "run"}, f"{module}: make helpers private (a leading _)"


@pytest.mark.parametrize("module", MODULES)
def test_each_module_adds_one_subcommand_named_as_the_module(module):
    sub = argparse.ArgumentParser(prog="vkdiff").add_subparsers(dest="command")
    importlib.import_module(f"vkdiff.entry.commands.{module}").add_parser(sub)
    assert list(sub.choices) == [module]


def test_every_subcommand_maps_to_exactly_one_module_and_back():
    known = _subcommands(cli.build_parser())
    assert sorted(known) == MODULES
    assert list(cli.COMMANDS) == known == HELP_ORDER
    assert [m.__name__ for m in cli.COMMANDS.values()] == [f"vkdiff.entry.commands.{name}" for name in known]


def test_main_runs_the_named_command_with_its_settings_and_its_words(monkeypatch):
    assert sorted(SMALLEST) == MODULES, "give the new command its shortest command line in SMALLEST"
    ran = []
    for name, module in cli.COMMANDS.items():
        monkeypatch.setattr(module, "run", lambda args, name=name: ran.append((name, args)) or 7)
    for name, argv in SMALLEST.items():
        assert cli.main(argv) == 7
        got, args = ran.pop()
        assert (got, args.command, args.argv) == (name, name, argv[1:])
        assert args.settings is not None
    assert not ran


def test_a_command_is_required(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([])
    assert exit_info.value.code == 2
    assert "the following arguments are required: command" in capsys.readouterr().err


def test_errors_of_a_command_are_one_line_and_exit_2(monkeypatch, capsys):
    from vkdiff.entry.terminal import UsageError

    def fails(args):
        raise UsageError("no such thing")

    monkeypatch.setattr(cli.COMMANDS["lint"], "run", fails)
    assert cli.main(["lint"]) == cli.EXIT_USAGE
    assert capsys.readouterr().err == "vkdiff: error: no such thing\n"
