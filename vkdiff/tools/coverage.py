"""What vkdiff covers of an ExecuTorch tree: the ops it registers against launchers, references and kernel
suites, and its shader variants against those a results file shows dispatched.

The registered ops are read from the tree's ``VK_REGISTER_OP(name, fn)`` lines
(``runtime/graph/ops/impl/*.cpp``), and checked against the ops its partitioner accepts
(``vkdiff.tools.registrations``). Families outside the op-coverage target are named
(``static-int8``, ``training``, ``test-only``) so the percentage is over the rest.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from vkdiff.cases.kernels import all_cases
from vkdiff.datamodel import Result
from vkdiff.device.launchers import LAUNCHERS
from vkdiff.device.runtime.registrations import registered_ops
from vkdiff.device.shaders.trees import GLSL_SUBDIR
from vkdiff import reference
from vkdiff.tools.registrations import TEST_ONLY, registration_document

FAMILIES = (
    ("test-only", TEST_ONLY),
    ("training", re.compile(r"adamw_step|linear_dW|_backward|fused_ce")),
    ("static-int8", re.compile(r"q8ta|q8csw|qcs4w|int8pack|quantize_per_tensor|dequantize_per_tensor")),
)
"""Families outside the op-coverage target (issue #22), by op-name pattern; every other op is ``in scope``."""
IN_SCOPE = "in scope"


@dataclasses.dataclass(kw_only=True, frozen=True)
class OpCoverage:
    """One op the tree registers."""

    op: str
    file: str
    """The ``impl/*.cpp`` that registers it."""
    family: str
    launcher: bool
    reference: bool
    cases: int
    """Kernel cases of its suite."""

    @property
    def covered(self) -> bool:
        """A launcher and a reference: it runs and is judged inside a delegate."""
        return self.launcher and self.reference


def family_of(op: str) -> str:
    return next((name for name, pattern in FAMILIES if pattern.search(op)), IN_SCOPE)


def _known(op: str, table: Iterable[str]) -> bool:
    """``op`` in ``table``, or registered without its namespace (``sdpa_with_kv_cache.default`` for
    ``llama.sdpa_with_kv_cache.default``; a SymInt operator ``add`` for ``_operator.add.default``)."""
    names = set(table)
    if op in names:
        return True
    if op.count(".") == 1:
        return any(name.endswith("." + op) for name in names)
    return "." not in op and f"_operator.{op}.default" in names


def op_coverage(tree: Path) -> list[OpCoverage]:
    """Every op the tree registers, with what vkdiff has for it."""
    cases = collections.Counter(case.op for case in all_cases("."))
    return [OpCoverage(op=op, file=file, family=family_of(op), launcher=_known(op, LAUNCHERS),
                       reference=_known(op, reference.OPS),
                       cases=sum(n for name, n in cases.items() if _known(op, [name])))
            for op, file in registered_ops(tree).items()]


def summary(ops: list[OpCoverage]) -> dict[str, Any]:
    """Counts per family and the in-scope share with launcher and reference."""
    by_family: dict[str, dict[str, int]] = {}
    for row in ops:
        counts = by_family.setdefault(row.family, {"ops": 0, "launcher": 0, "reference": 0, "both": 0, "suite": 0})
        counts["ops"] += 1
        counts["launcher"] += row.launcher
        counts["reference"] += row.reference
        counts["both"] += row.covered
        counts["suite"] += row.cases > 0
    scope = by_family.get(IN_SCOPE, {"ops": 0, "both": 0})
    return {"registered": len(ops), "families": by_family,
            "in_scope_covered_percent": round(100.0 * scope["both"] / max(scope["ops"], 1), 1)}


def variant_coverage(tree: Path, results: Iterable[Result]) -> dict[str, Any]:
    """Shader templates and variants of the tree, and how many of them the results dispatched."""
    from vkdiff.device.shaders.build import ShaderBuilder

    template_of = ShaderBuilder(tree).templates()
    dispatched = {shader for result in results for shader in (result.shaders or [result.shader]) if shader}
    dispatched &= set(template_of)
    templates = set(template_of.values())
    hit = {template_of[name] for name in dispatched}
    return {"templates": len(templates), "variants": len(template_of), "dispatched_variants": len(dispatched),
            "dispatched_templates": len(hit), "templates_never_dispatched": sorted(templates - hit)}


def to_document(tree: Path, ops: list[OpCoverage], variants: Mapping[str, Any] | None) -> dict[str, Any]:
    return {"tree": str(tree), "glsl": str(tree / GLSL_SUBDIR), "summary": summary(ops),
            "ops": [dataclasses.asdict(row) for row in ops], "registration": registration_document(tree),
            "variants": variants}
