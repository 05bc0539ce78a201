"""transposed_scales: every consumer of a scales constant sees the layout its shader expects.

Invariant: ``linear_q4gsw`` and ``linear_dq8ca_q4gsw`` read scales as ``[K/gs, N4*4]``
(transposed, width padded to 4); ``embedding_q4gsw`` reads ``[V, groups]``. This holds
for each consumer separately, also when one scales tensor feeds several consumers
(a tied embedding/lm_head), where a pass may transpose it for one and break the other.
"""

from __future__ import annotations

from vkdiff.fusions.registry import FusionContext, Finding, fail, ok, register_rule
from vkdiff.harness.delegate import Delegate, VkOp

RULE = "transposed_scales"

LINEAR_ARGS = {"et_vk.linear_q4gsw": (0, 1, 2, 3), "et_vk.linear_dq8ca_q4gsw": (0, 3, 5, 6)}
"""op → positions of (input, packed weight, scales, group_size)."""
EMBEDDING_ARGS = (0, 1, 2)
"""embedding_q4gsw: positions of (packed weight, scales, group_size)."""


def _base(name: str) -> str:
    return name.rsplit(".", 1)[0]


def expected_scales_dims(delegate: Delegate, op: VkOp) -> tuple[list[int], int] | None:
    """(expected dims, scales value id) for a q4gsw consumer, None for other ops."""
    base = _base(op.name)
    if base in LINEAR_ARGS:
        x, w, s, g = (op.args[i] for i in LINEAR_ARGS[base])
        k = delegate.tensors[x].dims[-1]
        n = delegate.tensors[w].dims[0]
        gs = delegate.value(g)
        return [k // gs, -(-n // 4) * 4], s
    if base == "et_vk.embedding_q4gsw":
        w, s, g = (op.args[i] for i in EMBEDDING_ARGS)
        vocab, half = delegate.tensors[w].dims
        gs = delegate.value(g)
        groups = max(1, (half * 2) // gs) if gs > 0 else 1
        return [vocab, groups], s
    return None


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
