"""expected_fusions: every fused op a case must contain is in the delegate; else name what was left unfused.

Invariant: for each op in ``ModelCase.expect_ops`` the Vulkan delegate contains at least
one call, and no quantize/dequantize of a weight is left to run un-fused.
"""

from __future__ import annotations

from collections import Counter

from vkdiff.fusions.registry import FusionContext, Finding, fail, ok, register_rule

RULE = "expected_fusions"
UNFUSED_HINTS = ("dequantize_affine", "quantize_affine", "aten.mm", "aten.linear", "aten.embedding",
                 "aten.index_select", "aten.addmm")


@register_rule(RULE)
def check(ctx: FusionContext) -> list[Finding]:
    fused = Counter()
    for delegate in ctx.delegates:
        fused.update(delegate.op_counts())
    findings = []
    for op in ctx.expect_ops:
        count = sum(n for name, n in fused.items() if name.startswith(op + "."))
        if count:
            findings.append(ok(RULE, f"{op} ×{count} in the delegate", op=op, count=count))
            continue
        leftovers = {name: n for name, n in {**dict(fused), **ctx.undelegated_ops}.items()
                     if any(h in name for h in UNFUSED_HINTS)}
        where = ", ".join(f"{k} ×{v}" for k, v in sorted(leftovers.items())) or "no quantized op at all"
        findings.append(fail(RULE, f"{op} missing: left unfused as {where}", op=op, leftovers=leftovers))
    if ctx.partitions != 1:
        findings.append(fail(RULE, f"expected one Vulkan partition, got {ctx.partitions}",
                             partitions=ctx.partitions, undelegated=ctx.undelegated_ops))
    return findings
