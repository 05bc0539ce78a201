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
    status: tuple[str, ...] = ()
    """Statuses the bug produces."""
    signature: str = ""
    """Regex that the result's reason must contain."""
    link: str = ""
    reason: str = ""

    def applies_to(self, result: Result) -> bool:
        """Same case, rule and device: the bug's territory, whatever the outcome."""
        devices = (self.device,) if isinstance(self.device, str) else self.device
        return (re.search(self.case, result.case) is not None
                and (not self.rule or result.rule in self.rule)
                and ("all" in devices or result.device in devices))

    def explains(self, result: Result) -> bool:
        return (self.applies_to(result) and result.status in self.status
                and re.search(self.signature, result.reason or "") is not None)


@functools.lru_cache(maxsize=None)
def load(path: Path = DATA) -> tuple[Expectation, ...]:
    """Every expectation of the data file."""
    entries = yaml.safe_load(path.read_text()) or []
    return tuple(Expectation(**{**e, "status": tuple(e.get("status", ())), "rule": tuple(e.get("rule", ())),
                                "device": e["device"] if isinstance(e.get("device", "all"), str) else tuple(e["device"])})
                 for e in entries)


def annotate(result: Result, expectations: Sequence[Expectation] | None = None) -> Result:
    """Attach the matching expectation: ``known`` when it explains the failure, ``unexpected-pass`` when fixed."""
    for exp in load() if expectations is None else expectations:
        if exp.explains(result):
            result.expectation = {"id": exp.id, "link": exp.link, "reason": exp.reason, "outcome": "known"}
            return result
        if exp.applies_to(result) and Status[result.status] is Status.PASS:
            result.expectation = {"id": exp.id, "link": exp.link, "reason": exp.reason, "outcome": "unexpected-pass"}
            return result
    return result


def counts_as_failure(result: Result) -> bool:
    """A failure that no expectation explains, or an unexpected pass (the expectation file needs updating)."""
    outcome = (result.expectation or {}).get("outcome")
    if outcome == "known":
        return False
    return outcome == "unexpected-pass" or Status[result.status].is_failure()
