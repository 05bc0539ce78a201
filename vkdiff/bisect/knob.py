"""``vkdiff bisect knob``: the smallest set of a failing case's knob values that turns PASS into the failure.

A *space* says which knobs a case has and which values each can take (the values the
catalogue's cases of the same op or model use, every routing and limits profile) and
evaluates a configuration to a status (None when no such case exists). Only PASS and
the failing status itself count: a configuration that cannot run there (NOT_SUPPORTED,
NOT_RUN) or errs says nothing either way.

The search: every knob is flipped alone to each other value; a flip that turns the
failure into PASS marks the knob as needed. A passing baseline is the failing
configuration with every needed knob flipped to its curing value and every other knob
to another value where one evaluates. From that baseline, knob values of the failure are
put back as a set and taken out one at a time while the failure stays (delta debugging
to a 1-minimal set), then each remaining value is checked to be needed on its own. The
answer holds for the values tried; knobs the space cannot vary are named as such.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from vkdiff.datamodel import Status

Config = dict[str, Any]


class KnobSpace(Protocol):
    """The knobs of one case and how to evaluate a configuration of them."""

    def config(self) -> Config:
        """The failing case's own knob values."""

    def alternatives(self, knob: str) -> list[Any]:
        """Other values ``knob`` can take."""

    def evaluate(self, config: Config) -> Status | None:
        """The verdict of the case with these knob values; None when there is no such case."""


@dataclasses.dataclass(kw_only=True)
class KnobBisect:
    """What the knob search found."""

    failing: Config
    status: str
    """The failing configuration's status (the failure the search keeps)."""
    baseline: Config | None = None
    """A passing configuration, None when none was found among the values tried."""
    culprit: Config = dataclasses.field(default_factory=dict)
    """The knob values that, put on the baseline, make it fail: each one needed."""
    trials: list[tuple[Config, str]] = dataclasses.field(default_factory=list)
    """Every configuration evaluated and its status (``-`` when no such case)."""
    note: str = ""

    def lines(self) -> list[str]:
        out = [f"{self.status} at {_show(self.failing)}"]
        if self.baseline is None:
            return [*out, self.note]
        out.append(f"baseline PASS at {_show(self.baseline)}")
        out.append(f"smallest set of knob values that turns PASS into {self.status}: {_show(self.culprit)}")
        out.append(f"{len(self.trials)} configurations evaluated")
        return out


def _show(config: Config) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())


class _Search:
    def __init__(self, space: KnobSpace):
        self.space = space
        self.seen: dict[tuple, Status | None] = {}
        self.trials: list[tuple[Config, str]] = []

    def status(self, config: Config) -> Status | None:
        key = tuple(sorted((k, repr(v)) for k, v in config.items()))
        if key not in self.seen:
            self.seen[key] = self.space.evaluate(dict(config))
            self.trials.append((dict(config), "-" if self.seen[key] is None else self.seen[key].name))
        return self.seen[key]


def bisect_knobs(space: KnobSpace) -> KnobBisect:
    """Search ``space`` from its failing configuration (see the module docstring)."""
    search = _Search(space)
    failing = space.config()
    failure = search.status(failing)
    if failure is None or not failure.is_failure():
        return KnobBisect(failing=failing, status="-" if failure is None else failure.name, trials=search.trials,
                          note="the case does not fail here: nothing to bisect")
    curing: Config = {}
    other: Config = {}
    for knob in failing:
        for value in space.alternatives(knob):
            found = search.status({**failing, knob: value})
            if found is Status.PASS:
                curing.setdefault(knob, value)
            elif found is not None and not found.is_skip() and found is not Status.ERROR:
                other.setdefault(knob, value)
    baseline = _baseline(search, failing, curing, other)
    result = KnobBisect(failing=failing, status=failure.name, trials=search.trials)
    if baseline is None:
        result.note = (f"no passing configuration among the {len(search.trials)} tried (every single flip and the "
                       f"flip of all): the failure does not hinge on these knobs' values")
        return result
    result.baseline, result.culprit = baseline, _minimise(search, baseline, failing, failure)
    return result


def _baseline(search: _Search, failing: Config, curing: Config, other: Config) -> Config | None:
    """A passing configuration as far from the failing one as the values allow."""
    for candidate in ({**failing, **other, **curing}, {**failing, **curing}):
        if search.status(candidate) is Status.PASS:
            return candidate
    return None


def _minimise(search: _Search, baseline: Config, failing: Config, failure: Status) -> Config:
    """Delta debugging from the baseline: drop failing values while the failure stays; then each must be needed."""
    kept = [k for k in failing if baseline[k] != failing[k]]
    changed = True
    while changed:
        changed = False
        for knob in list(kept):
            trial = [k for k in kept if k != knob]
            if search.status({**baseline, **{k: failing[k] for k in trial}}) is failure:
                kept, changed = trial, True
    return {k: failing[k] for k in kept}
