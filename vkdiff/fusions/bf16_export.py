"""bf16_export: a bf16 checkpoint exported with dtype fp32 lowers to one fp32 program equal to the model.

Invariant (export_llama's path: load bf16, quantize in bf16, ``.to(torch.float32)``): every
``dequantize_affine`` outputs float32 (a bfloat16 one means the subclass kept its bf16
dtype through export), the delegate is a single partition (the unwrap_tensor_subclass
regression split it), the weight scales are bf16-representable (quantization happened in
bf16), and the fused program computes the eager model (``numerics``).
"""

from __future__ import annotations

from vkdiff.fusions.registry import FusionContext, Finding, fail, ok, register_rule
from vkdiff.datamodel import Status

RULE = "bf16_export"


@register_rule(RULE)
def check(ctx: FusionContext) -> list[Finding]:
    findings = []
    wrong = [d for d in ctx.dequantize_dtypes if d != "float32"]
    if wrong:
        findings.append(fail(RULE, f"{len(wrong)} of {len(ctx.dequantize_dtypes)} dequantize_affine output "
                             f"{sorted(set(wrong))}, expected float32", dtypes=ctx.dequantize_dtypes))
    else:
        findings.append(ok(RULE, f"all {len(ctx.dequantize_dtypes)} dequantize_affine output float32"))
    if ctx.partitions != 1:
        findings.append(fail(RULE, f"{ctx.partitions} partitions, expected 1 (undelegated: {ctx.undelegated_ops})",
                             partitions=ctx.partitions))
    else:
        findings.append(ok(RULE, "one Vulkan partition"))
    if ctx.bf16_scales is False:
        findings.append(fail(RULE, "weight scales are not bfloat16-representable: quantization did not run in bf16"))
    elif ctx.bf16_scales:
        findings.append(ok(RULE, "weight scales are bfloat16-representable"))
    if ctx.numerics is None:
        findings.append(fail(RULE, "numerics not run", Status.NOT_RUN))
    elif ctx.numerics.status() is not Status.PASS:
        findings.append(fail(RULE, f"fused program differs from the model: max abs {ctx.numerics.max_abs:.3g}",
                             Status.FAIL_NUMERIC, max_abs=ctx.numerics.max_abs))
    return findings
