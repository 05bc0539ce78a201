"""``vkdiff bisect liberty``: the smallest set of the Vulkan spec's liberties (the strict profile's rules) under which a
case fails as it does under its device profile.

With no liberty taken (the device as it is) the case must PASS (or be a portability finding,
which any device gives), and with every rule of the profile it fails with some other status:
the failure the search keeps, which a device taking those liberties shows. Each rule is first tried
alone (the smallest answer is one rule); where none fails alone, rules are taken out of the
full set one at a time while the failure stays (delta debugging to a 1-minimal set: every
rule left is needed). A set under which the case cannot run (NOT_SUPPORTED: the device lacks
what a rule needs, such as ``shaderFloat64`` for contraction) says nothing either way.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

from vkdiff.datamodel import Status

Evaluate = Callable[[tuple[str, ...]], Status]


@dataclasses.dataclass(kw_only=True)
class LibertyBisect:
    """What the liberty search found."""

    profile: str
    status: str
    """The status under every rule of the profile (the failure the search keeps)."""
    baseline: str
    """The status with no rule: PASS for there to be anything to find."""
    culprit: tuple[str, ...] = ()
    """The smallest set of rules found under which the case fails so; each one needed."""
    alone: tuple[str, ...] = ()
    """Every rule under which, alone, the case fails so."""
    trials: list[tuple[tuple[str, ...], str]] = dataclasses.field(default_factory=list)
    note: str = ""

    def lines(self) -> list[str]:
        out = [f"{self.status} under --device-profile {self.profile}; {self.baseline} with no liberty taken"]
        turns = f"{self.baseline} into {self.status}"
        if self.note:
            return [*out, self.note]
        out.append(f"smallest set of liberties that turns {turns}: {' + '.join(self.culprit)}")
        if len(self.alone) > 1:
            out.append(f"each alone does: {', '.join(self.alone)}")
        return [*out, f"{len(self.trials)} rule sets evaluated"]


class _Search:
    def __init__(self, evaluate: Evaluate):
        self.evaluate = evaluate
        self.seen: dict[tuple[str, ...], Status] = {}
        self.trials: list[tuple[tuple[str, ...], str]] = []

    def status(self, rules: tuple[str, ...]) -> Status:
        if rules not in self.seen:
            self.seen[rules] = self.evaluate(rules)
            self.trials.append((rules, self.seen[rules].name))
        return self.seen[rules]


def bisect_liberties(profile: str, rules: Sequence[str], evaluate: Evaluate) -> LibertyBisect:
    """The smallest subset of ``rules`` (in their order) under which ``evaluate`` gives the full set's failure."""
    search, rules = _Search(evaluate), tuple(rules)
    full, none = search.status(rules), search.status(())
    found = LibertyBisect(profile=profile, status=full.name, baseline=none.name, trials=search.trials)
    if full is Status.PASS:
        found.note = "nothing to find: the case passes under every liberty of the profile"
    elif none is Status.FAIL_PORTABILITY and full is Status.FAIL_PORTABILITY:
        found.note = ("nothing to find: the case is FAIL_PORTABILITY on any device, whatever it computes; its verdict "
                      "names the rule and the liberty")
    elif none not in (Status.PASS, Status.FAIL_PORTABILITY):
        found.note = f"nothing to find: the case is {none.name} without any liberty (not a portability failure)"
    else:
        found.alone = tuple(rule for rule in rules if search.status((rule,)) is full)
        found.culprit = found.alone[:1] or _one_minimal(search, rules, full)
    return found


def _one_minimal(search: _Search, rules: tuple[str, ...], failure: Status) -> tuple[str, ...]:
    kept = list(rules)
    for rule in rules:
        trial = tuple(r for r in kept if r != rule)
        if search.status(trial) is failure:
            kept = list(trial)
    return tuple(kept)
