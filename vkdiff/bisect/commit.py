"""``vkdiff bisect commit``: the first ExecuTorch commit at which a case's verdict becomes the ``--bad`` one.

Candidates are the first-parent commits of ``GOOD..BAD`` that touch ``backends/vulkan``
(no other commit can change what vkdiff runs); the search is binary over them. At each
revision, ``backends/vulkan`` is read straight from the repository (``git archive``, no
checkout; a checkout or a bare repository both work) into vkdiff's cache, and shaders
are built from it and cached per (revision, variant) like any tree.

A kernel case runs on the device with that revision's shaders and launchers. A model
case is also lowered with that revision's Vulkan Python package (partitioner, passes,
patterns) when it differs from the installed one: in a subprocess
(``vkdiff.bisect.shim``) that imports it in place of the installed package. When
a revision does not import against the installed executorch, the step says so and
lowers with the installed package (its shaders are still the revision's).

A verdict is the case's signature: the status of a kernel case; for a model case the
status of every host rule and of the device run, ``rule=STATUS`` joined.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from vkdiff.datamodel.settings import RunSettings
from vkdiff.device.shaders.trees import EtSourceError


@dataclasses.dataclass(kw_only=True)
class Step:
    commit: str
    subject: str
    verdict: str
    note: str = ""


@dataclasses.dataclass(kw_only=True)
class CommitBisect:
    good: Step
    bad: Step
    steps: list[Step] = dataclasses.field(default_factory=list)
    """Revisions evaluated between the ends, in the order the search visited them."""
    first_bad: Step | None = None
    candidates: int = 0
    """Commits in ``GOOD..BAD`` that touch ``backends/vulkan``."""
    note: str = ""

    def lines(self) -> list[str]:
        show = lambda s: f"{s.commit[:10]} {s.verdict:<40} {s.subject}" + (f"  [{s.note}]" if s.note else "")
        out = [f"good {show(self.good)}", f"bad  {show(self.bad)}",
               f"{self.candidates} commits in between touch backends/vulkan"]
        out += [f"step {i + 1}: {show(s)}" for i, s in enumerate(self.steps)]
        if self.first_bad is not None:
            out.append(f"first commit with the --bad verdict: {self.first_bad.commit} {self.first_bad.subject}")
        if self.note:
            out.insert(0, self.note)
        return out


def git(repo: str, *args: str) -> str:
    done = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
    if done.returncode:
        raise EtSourceError(f"git {' '.join(args[:2])} in {repo}: {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout.strip()


def resolve(repo: str, rev: str) -> str:
    """A full commit hash for a hash, tag, branch, ``REV^`` or ``REV~N``."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except EtSourceError:
        raise EtSourceError(f"no revision {rev!r} in {repo}") from None


def is_ancestor(repo: str, old: str, new: str) -> bool:
    return subprocess.run(["git", "-C", repo, "merge-base", "--is-ancestor", old, new]).returncode == 0


def candidates(repo: str, good: str, bad: str) -> list[str]:
    """First-parent commits after ``good`` up to ``bad`` touching ``backends/vulkan``, oldest first."""
    listed = git(repo, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}", "--", "backends/vulkan")
    return listed.split() if listed else []


def bisect_commits(repo: str, good: str, bad: str, verdict: Callable[[str], tuple[str, str]]) -> CommitBisect:
    """Binary search for the first candidate whose verdict is the bad end's; ``verdict(commit) -> (verdict, note)``."""
    good, bad = resolve(repo, good), resolve(repo, bad)
    moved = ""
    if not is_ancestor(repo, good, bad):
        base = git(repo, "merge-base", good, bad)
        if not base:
            raise EtSourceError(f"--good {good[:10]} and --bad {bad[:10]} share no history")
        moved = f"--good {good[:10]} is not an ancestor of --bad (a release branch?): searching from their merge " \
                f"base {base[:10]}"
        good = base
    subject = lambda c: git(repo, "log", "-1", "--format=%s (%cs)", c)
    ends = [Step(commit=c, subject=subject(c), verdict=v, note=n) for c in (good, bad) for v, n in [verdict(c)]]
    found = CommitBisect(good=ends[0], bad=ends[1], note=moved)
    commits = candidates(repo, good, bad)
    found.candidates = len(commits)
    if ends[0].verdict == ends[1].verdict:
        found.note = " ".join(filter(None, [moved, f"the verdict is {ends[0].verdict} at both ends: nothing "
                                                   f"changed it"]))
        return found
    if not commits or commits[-1] != bad:
        commits.append(bad)
    lo, hi = -1, len(commits) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        v, n = verdict(commits[mid])
        found.steps.append(Step(commit=commits[mid], subject=subject(commits[mid]), verdict=v, note=n))
        if v == ends[1].verdict:
            hi = mid
        else:
            lo = mid
    first = next((s for s in found.steps if s.commit == commits[hi]), ends[1])
    found.first_bad = first
    return found


def tree_at(repo: str, commit: str) -> Path:
    from vkdiff.device.shaders.trees import checkout_revision

    return checkout_revision(repo, commit)


def signature(results) -> str:
    """A kernel case's status; for a model case ``rule=STATUS`` of every result, in a fixed order."""
    if len(results) == 1 and not results[0].rule:
        return results[0].status
    return " ".join(f"{r.rule}={r.status}" for r in sorted(results, key=lambda r: (r.device == "cpu", r.rule)))


def relower_in_subprocess(tree: Path, case_id: str, device: str | None, settings: RunSettings) -> tuple[list, str]:
    """Run a model case with the revision's Vulkan Python package (``shim``), in a process that takes the run's
    settings from its environment; (results, note)."""
    import re

    from vkdiff.bisect.shim import IMPORT_FAILED
    from vkdiff.store import read

    with tempfile.TemporaryDirectory(prefix="vkdiff-bisect-") as tmp:
        out = Path(tmp) / "results.jsonl"
        argv = [sys.executable, "-m", "vkdiff.bisect.shim", str(tree), "run", "--suite", "models",
                "--cases", "^" + re.escape(case_id) + "$", "--et-src", str(tree), "--results", str(out),
                "--seed", str(settings.seed), "--allow-empty", *(["--device", device] if device else [])]
        done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **settings.environment(), "PYTHONWARNINGS": "ignore"})
        if done.returncode == IMPORT_FAILED:
            return [], done.stderr.strip().splitlines()[-1]
        if not out.exists():
            return [], f"the re-lowering run wrote no results (exit {done.returncode}): {done.stderr[-300:]}"
        return read([out]).results, "re-lowered with this revision's backends/vulkan Python"

