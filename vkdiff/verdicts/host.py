"""The verdicts on a model case's host results: its lowering, each fusion rule, the fused program's numerics and
ExecuTorch's CPU runtime.

A lowering that raised is ``LOWER_FAIL``, unless the case expects that refusal
(``accept_refusal``: a pattern its message matches), which passes. Each rule of the case
gives findings (``vkdiff.fusions``); a rule's status is its worst finding's. ``numerics``
holds the fused program evaluated with the references to eager PyTorch; ``cpu_runtime``
holds ExecuTorch's XNNPACK runtime to eager and (where it could be evaluated) to the
reference program.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from vkdiff import fusions
from vkdiff.datamodel import Status, Tolerance
from vkdiff.fusions import Finding, FusionContext
from vkdiff.verdicts.compare import ErrorStatistics
from vkdiff.verdicts.statuses import status_of_exception


def lowering_outcome(message: str, accept_refusal: str | None) -> tuple[Status, str]:
    """A lowering that raised ``message``: refused as the case intends (``PASS``), or ``LOWER_FAIL``."""
    refused = bool(accept_refusal) and re.search(accept_refusal, message) is not None
    return (Status.PASS, f"refused as intended: {message}") if refused else (Status.LOWER_FAIL, message)


def not_lowered(message: str) -> tuple[Status, str]:
    """A model case's device result when its lowering failed (the host's ``lower`` result says how)."""
    return Status.NOT_RUN, f"lowering failed (see the cpu results): {message}"


def no_delegate(expected: bool) -> tuple[Status, str]:
    """A model case's device result when the lowered program has no Vulkan delegate (``expected``: one was)."""
    why = (": the partitioner kept every node on the CPU" if expected
           else " (as the test expects: expect_no_delegates)")
    return Status.NOT_RUN, f"the lowered program has no Vulkan delegate{why}"


def unprepared(exc: Exception) -> tuple[Status, str]:
    """A model case's device result when lowering or eager raised in a way the host results also show."""
    status, reason = status_of_exception(exc)
    return status, f"preparing the case failed: {reason}"


def rule_outcome(items: Sequence[Finding]) -> tuple[Status, str]:
    """A rule's status (its worst finding's) and reason (every finding that did not pass)."""
    worst = max(items, key=lambda f: (f.status.is_failure(), f.status))
    return worst.status, "; ".join(f.message for f in items if f.status is not Status.PASS) or worst.message


def judge_rules(rules: Sequence[str], ctx: FusionContext, stats: ErrorStatistics | str,
                runtime: Finding | None) -> dict[str, list[Finding]]:
    """Each rule's findings: ``numerics`` from the fused program against eager, ``cpu_runtime`` as given, the
    fusion rules from ``ctx``."""
    out: dict[str, list[Finding]] = {}
    for rule in rules:
        if rule == "numerics":
            out[rule] = [numerics_finding(stats)]
        elif rule == "cpu_runtime":
            out[rule] = [runtime]
        else:
            out[rule] = fusions.RULES[rule](ctx) or [Finding(rule=rule, status=Status.PASS, message="nothing to check")]
    return out


def numerics_finding(stats: ErrorStatistics | str) -> Finding:
    """The fused program against eager (a string: why the references could not evaluate it)."""
    if isinstance(stats, str):
        return Finding(rule="numerics", status=Status.NOT_RUN, message=stats)
    status = stats.status()
    summary = f"fused program vs eager: max abs {stats.max_abs:.3g}, SQNR {stats.sqnr_db:.1f} dB"
    return Finding(rule="numerics", status=status, message=summary if status is Status.PASS else
                   f"{summary}; {stats.message().splitlines()[0]}", evidence=stats.to_dict())


def xnnpack_lowering_failed(message: str) -> Finding:
    return Finding(rule="cpu_runtime", status=Status.LOWER_FAIL, message=f"XNNPACK lowering: {message}")


def runtime_failed(message: str) -> Finding:
    """ExecuTorch's CPU runtime refused to load or run the program."""
    return Finding(rule="cpu_runtime", status=Status.FAIL_CHECK, message=f"ExecuTorch CPU runtime: {message}")


def cpu_runtime_finding(out: np.ndarray, expected: np.ndarray, tolerance: Tolerance,
                        reference: np.ndarray | None = None) -> Finding:
    """ExecuTorch's CPU runtime output against eager and (when the fused program could be evaluated) the reference."""
    if out.shape != expected.shape:
        return Finding(rule="cpu_runtime", status=Status.FAIL_CHECK, message=f"ExecuTorch CPU runtime returned "
                       f"{out.size} output elements, eager {expected.size}")
    oracles = {"eager": expected} | ({"reference": reference} if reference is not None else {})
    parts, statuses, evidence = [], [], {}
    for name, oracle in oracles.items():
        stats = ErrorStatistics.from_arrays(out, oracle, tolerance)
        statuses.append(stats.status())
        evidence[name] = stats.to_dict()
        text = f"vs {name}: max abs {stats.max_abs:.3g}, SQNR {stats.sqnr_db:.1f} dB"
        parts.append(text if stats.status() is Status.PASS else f"{text} ({stats.message().splitlines()[0]})")
    status = max(statuses, key=lambda s: (s.is_failure(), s))
    return Finding(rule="cpu_runtime", status=status, message="ExecuTorch CPU runtime (XNNPACK) " + "; ".join(parts),
                   evidence=evidence)


def findings_evidence(items: Sequence[Finding]) -> list[dict[str, Any]]:
    """Every finding as a metrics entry (arrays as lists)."""
    return [dict(status=f.status.name, message=f.message,
                 **{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in f.evidence.items()})
            for f in items]
