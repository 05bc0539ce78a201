"""tied_weight_dedup: a weight shared by several consumers is packed once.

Invariant: when the eager model ties a weight (an embedding and an lm_head sharing one
tensor), every 4-bit consumer in the delegate reads the *same* packed constant; two
constants that unpack to identical int4 codes mean the weight was repacked twice
(twice the memory, and a chance for the two copies to diverge). A tied weight that
was left unfused is reported by ``expected_fusions``; each consumer's own result is
checked by ``numerics``.
"""

from __future__ import annotations

import numpy as np

from vkdiff import reference
from vkdiff.fusions.registry import FusionContext, Finding, fail, ok, register_rule
from vkdiff.datamodel import Delegate, VkOp, content_hash

RULE = "tied_weight_dedup"


LINEAR_CONSUMERS = ("et_vk.linear_q4gsw.default", "et_vk.linear_dq8ca_q4gsw.default")
EMBEDDING = "et_vk.embedding_q4gsw.default"


def canonical_codes(delegate: Delegate, op: VkOp) -> tuple[int, np.ndarray] | None:
    """(weight value id, int4 codes [N, K]) of a q4gsw consumer, whichever nibble convention it uses."""
    if op.name in LINEAR_CONSUMERS:
        wid = delegate.bind(op).args["weights"]
        linear_convention = True
    elif op.name == EMBEDDING:
        args = delegate.bind(op).args
        wid = args["weight"]
        linear_convention = bool(delegate.value(args["is_linear_weight"]))
    else:
        return None
    packed = delegate.constants.get(wid)
    if packed is None or packed.dtype != np.uint8 or packed.ndim != 2:
        return None
    if not linear_convention:
        packed = ((packed >> 4) | (packed << 4)).astype(np.uint8)
    return wid, reference.unpack_int4_linear(packed)


@register_rule(RULE)
def check(ctx: FusionContext) -> list[Finding]:
    findings = []
    for delegate in ctx.delegates:
        by_codes: dict[str, dict[int, list[str]]] = {}
        for op in delegate.ops:
            found = canonical_codes(delegate, op)
            if found is None:
                continue
            wid, codes = found
            by_codes.setdefault(content_hash(codes), {}).setdefault(wid, []).append(
                f"#{op.index} {op.name.rsplit('.', 1)[0]}")
        for digest, constants in by_codes.items():
            users = [u for us in constants.values() for u in us]
            if len(constants) > 1:
                keys = {w: delegate.constant_keys.get(w, "")[:12] for w in constants}
                same_bytes = len(set(keys.values())) == 1
                findings.append(fail(RULE, f"one weight packed {len(constants)} times (constants "
                                     f"{', '.join('%' + str(w) for w in constants)}, "
                                     f"{'identical bytes under one key' if same_bytes else 'different bytes'}) "
                                     f"for {', '.join(users)}",
                                     codes_hash=digest, constants=list(constants), consumers=users, keys=keys))
            elif len(users) > 1:
                findings.append(ok(RULE, f"weight %{next(iter(constants))} packed once, shared by "
                                   f"{', '.join(users)}", codes_hash=digest, consumers=users))
    if ctx.tied_groups and not any(f.status.name == "PASS" and len(f.evidence.get("consumers", [])) > 1
                                   for f in findings):
        if not any(f.status.name != "PASS" for f in findings):
            findings.append(fail(RULE, f"tied parameters {ctx.tied_groups} are not shared by any two fused "
                                 f"consumers in the delegate", tied=ctx.tied_groups))
    return findings
