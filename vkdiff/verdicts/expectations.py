"""Known upstream bugs as expectations: matched to results, shown as known, fixed ones as unexpected passes."""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path
from typing import Sequence

import yaml

from vkdiff.datamodel import Result, Status

DATA = Path(__file__).parents[1] / "cases" / "expectations.yaml"


@dataclasses.dataclass(kw_only=True, frozen=True)
class Expectation:
    """One known bug and the results it explains."""

    id: str
    case: str
    """Regex over case ids."""
    rule: tuple[str, ...] = ()
    """Rules of a model case the bug shows in (empty: any, and every kernel case)."""
    device: str | tuple[str, ...] = "all"
    """Device slugs, or ``all``."""
    transport: tuple[str, ...] = ()
    """Transports the bug shows through (``wgpu``, ``vulkan``; empty: both): a naga translation bug, or one only
    the exact SPIR-V or a real blit reaches."""
    validation: tuple[str, ...] = ()
    """Validation that must be on for the bug to show (``gpu``: only the layer's GPU-assisted validation sees it,
    an access robustBufferAccess hides); empty: any run."""
    status: tuple[str, ...] = ()
    """Statuses the bug produces."""
    signature: str = ""
    """Regex that the result's reason must contain."""
    shader: str = ""
    """Regex the result's shader must match (a kernel's variant, a model's failing node's shader); empty: any."""
    node: int | None = None
    """Index of the first diverging node of a model result; None: any."""
    max_abs: float | None = None
    """The largest error the bug makes (``error_of``): a larger one is a different failure."""
    mismatches: int | None = None
    """The most elements over tolerance (or unwritten) the bug leaves (where the result counts them)."""
    racy: bool = False
    """A data race: the bug shows on some runs and devices only, so a PASS is ``racy-pass``, not an unexpected
    pass (``--repeat`` is the way to see it flip)."""
    link: str = ""
    reason: str = ""

    def applies_to(self, result: Result) -> bool:
        """Same case, rule and device: the bug's territory, whatever the outcome."""
        devices = (self.device,) if isinstance(self.device, str) else self.device
        return (re.search(self.case, result.case) is not None
                and (not self.rule or result.rule in self.rule)
                and ("all" in devices or result.device in devices)
                and (not self.transport or transport_of(result) in self.transport)
                and (not self.validation or validation_of(result) in self.validation))

    def explains(self, result: Result) -> bool:
        """The bug's territory, one of its statuses and signature, and its shape: the shader or node it shows in,
        no larger an error and no more elements than it makes (so a new failure of the same case is not absorbed)."""
        if not (self.applies_to(result) and result.status in self.status
                and re.search(self.signature, result.reason or "") is not None):
            return False
        if self.shader and re.search(self.shader, result.shader or "") is None:
            return False
        if self.node is not None and (result.node or {}).get("index") != self.node:
            return False
        if result.status in UNMEASURED:
            return True
        error, count = error_of(result)
        return ((self.max_abs is None or (error is not None and error <= self.max_abs))
                and (self.mismatches is None or count is None or count <= self.mismatches))


UNMEASURED = frozenset({Status.FAIL_OOB.name, Status.FAIL_SYNC.name})
"""Statuses whose result holds no error size: the signature alone pins them (which tensor, which bytes)."""


def transport_of(result: Result) -> str:
    """The transport a device result ran through (results from before transports existed: wgpu)."""
    return (result.device_info or {}).get("transport", "wgpu")


def validation_of(result: Result) -> str:
    """``gpu`` for a device result run with the layer's GPU-assisted validation, else ``""``."""
    features = (result.device_info or {}).get("features") or ()
    return "gpu" if "layer:gpu-assisted" in features else ""


_MAX_ABS = re.compile(r"max abs ([0-9.eE+-]+)")
_COUNT = re.compile(r"(?:Mismatched|Unwritten) elements: (\d+)")


def error_of(result: Result) -> tuple[float | None, int | None]:
    """(largest error, elements over tolerance) of a failing result: a kernel's metrics, a model's first diverging
    node, its output against eager, or what its reason says."""
    metrics = result.metrics or {}
    if metrics.get("max_abs") is not None:
        return float(metrics["max_abs"]), int(metrics.get("mismatches") or 0) + int(metrics.get("unwritten") or 0)
    where = result.node or {}
    for record in metrics.get("nodes") or []:
        if record.get("index") == where.get("index") and record.get("delegate", 0) == where.get("delegate", 0):
            worst = max(record["outputs"], key=lambda o: o.get("max_abs") or 0.0)
            return worst.get("max_abs"), worst.get("mismatches")
    found = _MAX_ABS.search(result.reason or "")
    count = _COUNT.search(result.reason or "")
    eager = (metrics.get("vs_eager") or {}).get("max_abs")
    return (float(eager) if eager is not None else float(found.group(1)) if found else None,
            int(count.group(1)) if count else None)


@functools.lru_cache(maxsize=None)
def load(path: Path = DATA) -> tuple[Expectation, ...]:
    """Every expectation of the data file."""
    entries = yaml.safe_load(path.read_text()) or []
    return tuple(Expectation(**{**e, "status": tuple(e.get("status", ())), "rule": tuple(e.get("rule", ())),
                                "transport": tuple(e.get("transport", ())),
                                "validation": tuple(e.get("validation", ())),
                                "device": e["device"] if isinstance(e.get("device", "all"), str) else tuple(e["device"])})
                 for e in entries)


def annotate(result: Result, expectations: Sequence[Expectation] | None = None) -> Result:
    """Attach the matching expectation: ``known`` when it explains the failure, ``unexpected-pass`` when fixed."""
    for exp in load() if expectations is None else expectations:
        if exp.explains(result):
            result.expectation = {"id": exp.id, "link": exp.link, "reason": exp.reason, "outcome": "known"}
            return result
        if exp.applies_to(result) and Status[result.status] is Status.PASS:
            outcome = "racy-pass" if exp.racy else "unexpected-pass"
            result.expectation = {"id": exp.id, "link": exp.link, "reason": exp.reason, "outcome": outcome}
            return result
    return result


def counts_as_failure(result: Result) -> bool:
    """A failure that no expectation explains, or an unexpected pass (the expectation file needs updating)."""
    outcome = (result.expectation or {}).get("outcome")
    if outcome == "known":
        return False
    return outcome == "unexpected-pass" or Status[result.status].is_failure()
