"""The results store: one JSON line per result, appended (and flushed) as it happens.

An interrupted run loses nothing already written; several processes may append to
their own files and ``load`` reads any number of them (``merge`` of the data model
keeps one verdict per key).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Iterator

from vkdiff.harness.datamodel import Result


class ResultStore:
    """Append-only JSON-lines file."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, result: Result) -> None:
        result.stamp()
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(result.to_json() + "\n")
            handle.flush()
            os.fsync(handle.fileno())


def load(paths: Iterable[str | os.PathLike]) -> Iterator[Result]:
    """Every result in the given files, in order; a torn last line (crash mid-write) is skipped."""
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                line = line.strip()
                if not line:
                    continue
                try:
                    yield Result.from_dict(json.loads(line))
                except json.JSONDecodeError:
                    continue


def write(path: str | os.PathLike, results: Iterable[Result]) -> None:
    """Write ``results`` as a fresh results file (merged output), replacing it atomically."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as handle:
        for result in results:
            handle.write(result.to_json() + "\n")
    os.replace(tmp, path)
