"""One verdict with its evidence, and the one rule for merging verdicts from many files."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import math
from importlib import metadata
from typing import Any, Iterable

from vkdiff.datamodel.status import Status
from vkdiff.datamodel.text import printable

SCHEMA = 2
"""Version of the record layout (2: structured ``rule``, ``knobs``, ``shape`` and ``node``)."""

HOST = "cpu"
"""Device slug of results computed on the host (model cases: lowering, fusion checks, CPU runtime)."""

CRASH_FLAG = "crash"
"""Flag of the record a pytest controller writes for an item whose worker died."""
HANG_FLAG = "hang"
"""Flag of an ``ERROR``: a wait on the device outlasted ``--timeout`` (``vkdiff.executors.isolate``)."""
BARE_COLUMN = "wgpu"
"""The transport whose results keep the bare device slug as their column (the default one; results written before
transports were recorded are its)."""
DEVICE_LOST_FLAG = "device-lost"
"""Flag of an ``ERROR``: the device was lost, or its worker process died; the next case gets a fresh device."""


@dataclasses.dataclass(kw_only=True)
class Result:
    """One verdict: a (case, rule, node, device) with its evidence."""

    __test__ = False

    case: str
    """Case id, e.g. ``linear_q4gsw[M13-K256-N40-g32-fp16-buffer]``."""
    op: str
    """Operator (``et_vk.linear_q4gsw.default``) or model family the case exercises."""
    device: str
    """Device slug (``llvmpipe``, ``nvidia-h100``...), or ``cpu`` for host-only checks."""
    status: str
    """A ``Status`` name."""
    variant: str = ""
    """Display label of the knob set (``fp16-buffer``, ``8da4w-vulkan``); never parsed: see ``knobs``."""
    rule: str = ""
    """Fusion rule or check of a model case (``numerics``, ``tied_weight_dedup``); empty for a kernel case."""
    knobs: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The case's knobs by name (``dtype``, ``storage``, ``recipe``, ``partitioner``...)."""
    shape: dict[str, int] = dataclasses.field(default_factory=dict)
    """Named sizes of a kernel case (``M``, ``K``, ``N``, ``g``); empty for model cases."""
    node: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The graph node a per-node verdict is about (``index``, ``op``); empty for a whole case."""
    reason: str = ""
    """Why the status (error message, missing prerequisite), whole (screens and report cards abbreviate it)."""
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
    """Known upstream bug this result matches: ``id``, ``link``, ``reason``, ``outcome`` (known/unexpected-pass/racy-pass)."""
    traceback: str = ""
    """The Python traceback of an ``ERROR`` (a harness bug), kept for whoever fixes it."""
    bucket: str = ""
    """Failure signature shared by results that likely have one cause (``bucket_of``); empty unless failing."""
    seconds: float = 0.0
    """Wall time of the case on this device (a kernel case run overlapped with others: its own host time plus a share
    of each wait for the device it took part in)."""
    time: str = ""
    """UTC timestamp when recorded."""
    schema: int = SCHEMA

    def __post_init__(self) -> None:
        """Names and reasons can come from a crafted file: every string a terminal, a pytest report or a page shows
        has its control characters escaped (``printable``)."""
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, (str, dict, list)):
                setattr(self, field.name, _printable(value))

    @property
    def verdict(self) -> Status:
        return Status[self.status]

    @property
    def column(self) -> str:
        """The device as merges and reports tell runs apart: its slug, with ``+vulkan`` when the raw Vulkan transport
        reached it (so one device through both transports is two columns: the cross-transport differential)."""
        transport = (self.device_info or {}).get("transport", BARE_COLUMN) if isinstance(self.device_info, dict) \
            else BARE_COLUMN
        return self.device if transport == BARE_COLUMN or not self.device else f"{self.device}+{transport}"

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What one verdict stands for: (case, rule, node index, device column); merging keeps one per key."""
        return (self.case, self.rule, str(self.node.get("index", "")), self.column)

    def stamp(self) -> None:
        """Set ``time`` to now (UTC) unless already set."""
        if not self.time:
            self.time = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")

    def to_json(self) -> str:
        return json.dumps(_finite(dataclasses.asdict(self)), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Result":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def bucket_of(result: Result) -> str:
    """Status, where (the failing node's op and shader, or the kernel's shader variant), device vendor and profiles.

    Failures with one bucket usually have one cause: the same shader wrong on the same
    vendor under the same profiles, whichever case or node index it showed in.

    Example::

        >>> bucket_of(Result(case="c", op="aten.add.Tensor", device="llvmpipe", status="FAIL_NUMERIC",
        ...                  shader="add_buffer_float", device_info={"vendor": "Mesa"}, knobs={"route": "mali"}))
        'FAIL_NUMERIC | add_buffer_float | Mesa | route=mali limits=native'
    """
    where = result.shader or result.op
    if result.node.get("op"):
        where = f"{result.node['op']} {result.shader}".strip()
    vendor = (result.device_info or {}).get("vendor") or result.device
    knobs = result.knobs or {}
    return (f"{result.status} | {where} | {vendor} | route={knobs.get('route', 'native')} "
            f"limits={knobs.get('limits') or 'native'}")


def _printable(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_printable(v) for v in value]
    return value


def _finite(value: Any) -> Any:
    """JSON has no inf/nan: write them as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def clip(text: Any, keep: int = 200) -> str:
    """First and last ``keep`` characters of a long message (robust to non-strings).

    Example::

        >>> clip("a" * 300 + "b" * 300, keep=3)
        'aaa … bbb'
    """
    text = "" if text is None else str(text)
    return text if len(text) <= 2 * keep + 5 else f"{text[:keep]} … {text[-keep:]}"


def parse_time(text: Any) -> datetime.datetime:
    """UTC timestamp of a result; missing or unparsable sorts first."""
    try:
        stamp = datetime.datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        return datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=datetime.timezone.utc)


def merge(results: Iterable[Result]) -> list[list[Result]]:
    """Group results by ``Result.key``, each group oldest first; the last of a group is its verdict.

    Order is the recorded ``time``, ties broken by reading order (later read wins). A
    ``crash`` record of a (case, device) supersedes every group of that (case, device)
    whose latest record is no later than it (by time alone: a worker that died mid-item may
    have left partial results within the same second).

    Example::

        >>> a = Result(case="c", op="o", device="d", status="PASS", time="2026-01-01T00:00:00+00:00")
        >>> b = Result(case="c", op="o", device="d", status="ERROR", time="2026-01-02T00:00:00+00:00")
        >>> [r.status for r in merge([b, a])[0]]
        ['PASS', 'ERROR']
    """
    groups: dict[tuple, list[tuple[datetime.datetime, int, Result]]] = {}
    for order, result in enumerate(results):
        groups.setdefault(result.key, []).append((parse_time(result.time), order, result))
    crashes: dict[tuple[str, str], datetime.datetime] = {}
    for found in groups.values():
        found.sort(key=lambda item: (item[0], item[1]))
        for when, _, result in found:
            if CRASH_FLAG in (result.flags or []):
                crashes[(result.case, result.column)] = max(when, crashes.get((result.case, result.column), when))
    merged = []
    for key, found in groups.items():
        crash = crashes.get((key[0], key[3]))
        when, _, latest = found[-1]
        if crash is not None and CRASH_FLAG not in (latest.flags or []) and when <= crash:
            continue
        merged.append([item[2] for item in found])
    return merged


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
