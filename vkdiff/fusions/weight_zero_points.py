"""weight_zero_points: asymmetric weight quantization is honoured or refused, never dropped silently.

Invariant: when the eager model's 4-bit weights carry non-zero zero points, either the
lowering fails with a clear error, or the fused program computes the same function
(``numerics`` within tolerance). A fused ``linear_q4gsw``/``embedding_q4gsw`` (which
have no zero-point input) whose output disagrees with the eager model means the zero
points disappeared silently: ``FAIL_CHECK``.
"""

from __future__ import annotations

from vkdiff.fusions.registry import FusionContext, Finding, fail, ok, register_rule
from vkdiff.datamodel import Status

RULE = "weight_zero_points"
NO_ZP_OPS = ("et_vk.linear_q4gsw", "et_vk.embedding_q4gsw")


@register_rule(RULE)
def check(ctx: FusionContext) -> list[Finding]:
    asym = {fqn: q for fqn, q in ctx.weight_qparams.items() if q.get("zero_point_nonzero")}
    if not asym:
        return [ok(RULE, "no weight carries a non-zero zero point")]
    fused = [op.name.rsplit(".", 1)[0] for d in ctx.delegates for op in d.ops
             if op.name.rsplit(".", 1)[0] in NO_ZP_OPS]
    if not fused:
        return [ok(RULE, f"asymmetric weights of {sorted(asym)} were not fused into a zero-point-free op")]
    stats = ctx.numerics
    if stats is None:
        return [fail(RULE, f"{sorted(asym)} have zero points, fused into {sorted(set(fused))}; numerics not run",
                     Status.NOT_RUN, modules=sorted(asym))]
    if stats.status() is Status.PASS:
        return [ok(RULE, f"zero points of {sorted(asym)} honoured: fused output matches eager", modules=sorted(asym))]
    return [fail(RULE, f"zero points of {sorted(asym)} dropped silently: {sorted(set(fused))} has no zero-point "
                 f"input and the fused output differs from eager (max abs {stats.max_abs:.3g}, SQNR "
                 f"{stats.sqnr_db:.1f} dB)", modules=sorted(asym), max_abs=stats.max_abs, sqnr_db=stats.sqnr_db)]
