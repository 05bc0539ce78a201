"""Fusion rules: one module per rule, registered by name (as ET-VK registers one module per pattern)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from vkdiff.datamodel import Delegate, Status


@dataclasses.dataclass(kw_only=True)
class Finding:
    """What one rule concluded about one lowered case."""

    rule: str
    """Rule name."""
    status: Status
    """``PASS``, ``FAIL_CHECK``, ``DTYPE_MISMATCH``, ``FAIL_NUMERIC``, ``NOT_RUN``..."""
    message: str
    """One line a person can act on (names the op, the tensor and what was expected)."""
    evidence: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Numbers and names behind the message (dims, dtypes, op indices, metrics)."""


@dataclasses.dataclass(kw_only=True)
class FusionContext:
    """Everything a rule may look at: the lowered program and what executors computed from it."""

    case_id: str
    expect_ops: tuple[str, ...]
    delegates: list[Delegate]
    """Decoded Vulkan delegates (as the runtime sees them)."""
    partitions: int
    delegated_ops: dict[str, int]
    undelegated_ops: dict[str, int]
    dequantize_dtypes: list[str]
    weight_qparams: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """Per quantized eager module (fqn): ``{"zero_point_nonzero": bool, "mapping": str, ...}``."""
    tied_groups: list[list[str]] = dataclasses.field(default_factory=list)
    """Groups of eager parameter names that share one tensor (tied weights)."""
    shader_variants: frozenset[str] | None = None
    """Variant names of the ExecuTorch tree, when one is given."""
    numerics: Any = None
    """``ErrorStatistics`` of the reference-interpreted delegate against the eager model, when run."""
    qparam_flow: list[dict[str, Any]] | None = None
    """PT2E recipes: input/output qparams of every qparam-preserving op and every cat (``harness.pt2e``)."""
    runtime_error: str | None = None
    """Why ExecuTorch's CPU runtime could not load or run the program (C++ message included), when it ran."""
    bf16_scales: bool | None = None
    """Whether every weight scale constant is exactly bfloat16-representable (bf16 checkpoint recipes)."""


Rule = Callable[[FusionContext], list[Finding]]
RULES: dict[str, Rule] = {}


def register_rule(name: str) -> Callable[[Rule], Rule]:
    """Register a rule under ``name`` (cases list rule names in ``ModelCase.rules``)."""
    def wrap(fn: Rule) -> Rule:
        RULES[name] = fn
        return fn
    return wrap


def ok(rule: str, message: str, **evidence: Any) -> Finding:
    return Finding(rule=rule, status=Status.PASS, message=message, evidence=evidence)


def fail(rule: str, message: str, status: Status = Status.FAIL_CHECK, **evidence: Any) -> Finding:
    return Finding(rule=rule, status=status, message=message, evidence=evidence)
