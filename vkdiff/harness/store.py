"""The results store: one JSON line per result, appended (and flushed) as it happens.

An interrupted run loses nothing already written; several processes may append to
their own files and ``load`` merges any number of them.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import math
import os
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Iterator

from vkdiff.harness.status import Status

SCHEMA = 1

HOST = "cpu"
"""Device slug of results computed on the host (model cases: lowering, fusion checks, CPU runtime)."""


@dataclasses.dataclass(kw_only=True)
class Result:
    """One verdict: a (case, variant, device) with its evidence."""

    __test__ = False

    case: str
    """Case id, e.g. ``linear_q4gsw[M13-K256-N40-g32-fp16-buffer]``."""
    op: str
    """Operator or model family the case exercises."""
    variant: str
    """Knob set within the case (dtype, storage, ...), also in ``case``."""
    device: str
    """Device slug (``llvmpipe``, ``nvidia-h100``...), or ``cpu`` for host-only checks."""
    status: str
    """A ``Status`` name."""
    reason: str = ""
    """Why the status (error message, missing prerequisite), first and last 200 characters kept."""
    shader: str = ""
    """ET-VK shader variant that produced the output."""
    shaders: list[str] = dataclasses.field(default_factory=list)
    """All variants dispatched (prepack first)."""
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    """``ErrorStatistics`` fields."""
    tolerance: dict[str, float] = dataclasses.field(default_factory=dict)
    """``Tolerance`` fields."""
    flags: list[str] = dataclasses.field(default_factory=list)
    """Qualifiers such as ``polyfilled``."""
    dispatch: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Workgroup sizes and spec constants of the main dispatch."""
    seed: int = 0
    """Seed of the case's inputs."""
    repro: str = ""
    """Command line that reruns just this case on this device."""
    versions: dict[str, str] = dataclasses.field(default_factory=dict)
    """vkdiff, executorch, torch, wgpu versions and the ET tree hash."""
    device_info: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Adapter identity (``DeviceInfo``)."""
    expectation: dict[str, str] = dataclasses.field(default_factory=dict)
    """Known upstream bug this result matches: ``id``, ``link``, ``reason``, ``outcome`` (known/unexpected-pass)."""
    seconds: float = 0.0
    """Wall time of the case on this device."""
    time: str = ""
    """UTC timestamp when recorded."""
    schema: int = SCHEMA

    @property
    def verdict(self) -> Status:
        return Status[self.status]

    def to_json(self) -> str:
        return json.dumps(_finite(dataclasses.asdict(self)), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Result":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def _finite(value: Any) -> Any:
    """JSON has no inf/nan: write them as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def clip(text: str, keep: int = 200) -> str:
    """First and last ``keep`` characters of a long message."""
    return text if len(text) <= 2 * keep + 5 else f"{text[:keep]} … {text[-keep:]}"


@functools.lru_cache(maxsize=None)
def versions() -> dict[str, str]:
    """Installed versions of the packages a verdict depends on."""
    out = {}
    for dist in ("vkdiff", "executorch", "torch", "torchao", "wgpu", "numpy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "absent"
    return out


class ResultStore:
    """Append-only JSON-lines file."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, result: Result) -> None:
        if not result.time:
            result.time = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
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
