"""transposed_scales: every consumer of a scales constant sees the layout its shader expects.

Invariant: ``linear_q4gsw`` and ``linear_dq8ca_q4gsw`` read scales as ``[K/gs, N4*4]``
(transposed, width padded to 4); ``embedding_q4gsw`` reads ``[V, groups]``. This holds
for each consumer separately, also when one scales tensor feeds several consumers
(a tied embedding/lm_head), where a pass may transpose it for one and break the other.
"""

from __future__ import annotations

from vkdiff.fusions.registry import FusionContext, Finding, fail, ok, register_rule
from vkdiff.datamodel import Delegate, VkOp

RULE = "transposed_scales"

LINEAR_INPUT = {"et_vk.linear_q4gsw.default": "self", "et_vk.linear_dq8ca_q4gsw.default": "input"}
"""Linear consumers of transposed scales → the name of their activation argument."""
EMBEDDING = "et_vk.embedding_q4gsw.default"


def _base(name: str) -> str:
    return name.rsplit(".", 1)[0]


def expected_scales_dims(delegate: Delegate, op: VkOp) -> tuple[list[int], int] | None:
    """(expected dims, scales value id) for a q4gsw consumer, None for other ops."""
    if op.name not in LINEAR_INPUT and op.name != EMBEDDING:
        return None
    args = delegate.bind(op).args
    gs = delegate.value(args["group_size"])
    if op.name in LINEAR_INPUT:
        k = delegate.tensors[args[LINEAR_INPUT[op.name]]].dims[-1]
        n = delegate.tensors[args["weights"]].dims[0]
        return [k // gs, -(-n // 4) * 4], args["weight_scales"]
    vocab, half = delegate.tensors[args["weight"]].dims
    groups = max(1, (half * 2) // gs) if gs > 0 else 1
    return [vocab, groups], args["weight_scales"]


@register_rule(RULE)
def check(ctx: FusionContext) -> list[Finding]:
    findings = []
    consumers: dict[tuple[int, int], list[str]] = {}
    for d_index, delegate in enumerate(ctx.delegates):
        for op in delegate.ops:
            expected = expected_scales_dims(delegate, op)
            if expected is None:
                continue
            dims, sid = expected
            got = delegate.tensors[sid].dims
            consumers.setdefault((d_index, sid), []).append(f"#{op.index} {_base(op.name)}")
            where = f"op #{op.index} {_base(op.name)} reads scales %{sid}"
            if got == dims or (got[:1] == dims[:1] and len(dims) == 2 and dims[1] == 1 and len(got) == 1):
                findings.append(ok(RULE, f"{where} as {got}", op=op.index, scales=sid, dims=got))
            else:
                findings.append(fail(RULE, f"{where} as {got}, its shader expects {dims}", op=op.index,
                                     scales=sid, dims=got, expected=dims))
    shared = {k: v for k, v in consumers.items() if len(v) > 1}
    for (_, sid), ops in shared.items():
        findings.append(ok(RULE, f"scales %{sid} feeds {len(ops)} consumers: {', '.join(ops)}", scales=sid,
                           consumers=ops))
    return findings
