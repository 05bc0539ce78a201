"""zero_point_dtype: the per-token zero point dtype a producer allocates matches what its consumer binds.

Invariant: each ``torchao.choose_qparams_affine`` allocates its zero point as int8
(``Int8DynamicActivationIntxWeightConfig``) or float32 (torchao's
``per_token_dynamic_quant(..., zero_point_dtype=torch.float32)``, the TISO-style path);
ET-VK picks ``linear_dq8ca_q4gsw_*_zpint8`` for int8 and ``*_zpinherit`` for
float16/float32 (``add_zp_dtype_mode_suffix``). A tree with only the un-suffixed
variant binds the zero point as an int8 texture: a float32 zero point bound there is
a ``DTYPE_MISMATCH``.
"""

from __future__ import annotations

from vkdiff.fusions.registry import FusionContext, Finding, fail, ok, register_rule
from vkdiff.datamodel import Status

RULE = "zero_point_dtype"
CONSUMER = "et_vk.linear_dq8ca_q4gsw"


def _suffix(dtype: str) -> str:
    return "zpint8" if dtype == "int8" else "zpinherit"


@register_rule(RULE)
def check(ctx: FusionContext) -> list[Finding]:
    findings = []
    for delegate in ctx.delegates:
        producers = {}
        for op in delegate.ops_named("torchao.choose_qparams_affine"):
            outputs = delegate.bind(op).outputs
            if len(outputs) == 2:
                producers[outputs[1]] = op.index
        for op in delegate.ops_named(CONSUMER):
            zp = delegate.bind(op).args["input_zp"]
            dtype = delegate.tensors[zp].dtype
            where = f"op #{op.index} {CONSUMER} zero point %{zp} ({dtype}, from op #{producers.get(zp, '?')})"
            evidence = dict(op=op.index, zero_point=zp, dtype=dtype, producer=producers.get(zp))
            if ctx.shader_variants is None:
                findings.append(fail(RULE, f"{where}: binding not checked without an ExecuTorch tree",
                                     Status.NOT_RUN, **evidence))
                continue
            dq8ca = sorted(v for v in ctx.shader_variants if v.startswith("linear_dq8ca_q4gsw_"))
            suffixed = [v for v in dq8ca if v.endswith(("_zpint8", "_zpinherit"))]
            if suffixed:
                wanted = _suffix(dtype)
                if any(v.endswith("_" + wanted) for v in suffixed):
                    findings.append(ok(RULE, f"{where} binds a *_{wanted} variant", variant_suffix=wanted, **evidence))
                else:
                    findings.append(fail(RULE, f"{where}: the tree has no *_{wanted} variant", Status.DTYPE_MISMATCH,
                                         **evidence))
            elif dtype != "int8":
                findings.append(fail(RULE, f"{where} is bound to the only variant's int8 zero-point texture",
                                     Status.DTYPE_MISMATCH, variants=dq8ca[:4], **evidence))
            else:
                findings.append(ok(RULE, f"{where} matches the tree's int8-only variant", **evidence))
    return findings
