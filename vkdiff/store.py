"""The results store: one JSON line per result, appended (and flushed) as it happens.

An interrupted run loses nothing already written; several processes may append to
their own files and ``read`` takes any number of them (``merge`` of the data model
keeps one verdict per key). Files in bad states are handled, never trusted:

* an append always starts on a fresh line: a torn last line (a crash mid-write) is
  kept as it is and reported (``ResultStore.torn_lines``);
* a reader skips lines that are not UTF-8, not JSON or not a JSON object, and says
  how many and why (``LoadReport.problems``);
* a record missing fields is kept, marked ``incomplete-record``, with the missing
  names in its reason.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
from pathlib import Path
from typing import Iterable, Iterator

from vkdiff.datamodel import Result

INCOMPLETE_FLAG = "incomplete-record"
KEY_FIELDS = ("node",)
"""Object fields the merge key reads: a record holding something else there gets the default (and the flag)."""
MISSING_STATUS = "MISSING"


class ResultStore:
    """Append-only JSON-lines file."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.torn_lines: list[int] = []
        """Line numbers of torn lines found at the end of the file before an append."""

    def append(self, result: Result) -> None:
        result.stamp()
        with open(self.path, "a+b") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size:
                handle.seek(size - 1)
                if handle.read(1) != b"\n":
                    handle.seek(0)
                    self.torn_lines.append(handle.read().count(b"\n") + 1)
                    handle.write(b"\n")
            handle.write(result.to_json().encode("utf-8") + b"\n")
            handle.flush()
            os.fsync(handle.fileno())


@dataclasses.dataclass(kw_only=True, frozen=True)
class LineProblem:
    """A line a reader could not take."""

    path: str
    """The results file."""
    line: int
    """1-based line number."""
    why: str
    """``not UTF-8``, ``not JSON (a torn line?)`` or ``not an object``."""


@dataclasses.dataclass(kw_only=True)
class LoadReport:
    """What reading results files gave: the results and the lines that could not be read."""

    results: list[Result]
    problems: list[LineProblem]

    def summary(self) -> str:
        """One line per file with unreadable lines, empty when every line was read.

        Example::

            >>> LoadReport(results=[], problems=[LineProblem(path="r.jsonl", line=3, why="not UTF-8")]).summary()
            '1 line of r.jsonl could not be read: 1 not UTF-8'
        """
        lines = []
        by_path: dict[str, list[LineProblem]] = {}
        for problem in self.problems:
            by_path.setdefault(problem.path, []).append(problem)
        for path, problems in by_path.items():
            counts = collections.Counter(p.why for p in problems)
            whys = ", ".join(f"{n} {why}" for why, n in sorted(counts.items()))
            lines.append(f"{len(problems)} line{'s' if len(problems) != 1 else ''} of {path} could not be read: {whys}")
        return "\n".join(lines)


def _record(data: dict) -> Result:
    """A result from a JSON object; missing or mistyped fields are filled, named and flagged (never a crash)."""
    fields = {f.name: f for f in dataclasses.fields(Result)}
    missing = [name for name, f in fields.items() if name not in data and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    mistyped = [name for name in KEY_FIELDS if name in data and not isinstance(data[name], dict)]
    if not missing and not mistyped:
        return Result.from_dict(data)
    filled = {name: (MISSING_STATUS if name == "status" else "") for name in missing}
    filled.update({name: fields[name].default_factory() for name in mistyped})
    result = Result.from_dict({**data, **filled})
    result.flags = [*(result.flags if isinstance(result.flags, list) else [result.flags]), INCOMPLETE_FLAG]
    notes = ([f"missing fields: {', '.join(missing)}"] if missing else []) + (
        [f"fields of the wrong type dropped: {', '.join(mistyped)}"] if mistyped else [])
    result.reason = f"record {'; '.join(notes)}" + (f"; {result.reason}" if result.reason else "")
    return result


def load(paths: Iterable[str | os.PathLike], problems: list[LineProblem] | None = None) -> Iterator[Result]:
    """Every readable result in the given files, in order; ``problems`` (when given) receives the other lines."""
    for path in paths:
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                why, result = _parse(raw)
                if result is not None:
                    yield result
                elif why and problems is not None:
                    problems.append(LineProblem(path=str(path), line=number, why=why))


def _parse(raw: bytes) -> tuple[str, Result | None]:
    """(why the line is unreadable, or "" for a blank one; the result when readable)."""
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        return "not UTF-8", None
    if not text:
        return "", None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return "not JSON (a torn line?)", None
    if not isinstance(data, dict):
        return "not an object", None
    return "", _record(data)


def read(paths: Iterable[str | os.PathLike]) -> LoadReport:
    """``load`` with the unreadable lines collected."""
    problems: list[LineProblem] = []
    results = list(load(paths, problems))
    return LoadReport(results=results, problems=problems)


def write(path: str | os.PathLike, results: Iterable[Result]) -> None:
    """Write ``results`` as a fresh results file (merged output), replacing it atomically."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as handle:
        for result in results:
            handle.write(result.to_json() + "\n")
    os.replace(tmp, path)
