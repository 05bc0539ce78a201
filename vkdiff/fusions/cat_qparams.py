"""cat_qparams: a ViT token path keeps one set of qparams from the patch tokens through the cat.

Invariants (on the PT2E-converted graph, read through ``harness.pt2e.qparam_flow``):

1. Every qparam-preserving op (transpose/permute, flatten/view/reshape, slice, clamp,
   max-pool...) has identical input and output qparams (scale, zero point, dtype)
   wherever both sides are quantized: XNNPACK's static transpose/reshape/slice nodes
   only move bytes and reject a mismatch (``xnn_subgraph_check_quantization_parameter_matches``).
2. All inputs of a ``cat`` and its output share the qparams of the input path that
   carries annotated activation qparams (the patch tokens: conv → flatten → transpose,
   anchored at the conv output), not those of the class-token constant path
   (``cls_token.expand``). A quantizer that anchors them on the class token breaks 1
   on the transpose, and the cat output follows the class token.
3. Lowering and runtime initialisation succeed (``runtime_error`` is None); otherwise
   the C++ runtime's message (e.g. ``[XNNCompiler.cpp] Failed to create static
   transpose node ... xnn_status_invalid_parameter``) is the finding.

``NOT_RUN`` when the case has no qparam flow (not a PT2E recipe). Qparams are compared
exactly, as XNNPACK compares them.
"""

from __future__ import annotations

from typing import Any

from vkdiff.fusions.registry import Finding, FusionContext, fail, ok, register_rule
from vkdiff.datamodel import Status

RULE = "cat_qparams"

CAT_OPS = ("aten.cat.default", "aten.concat.default")
KEYS = ("scale", "zero_point", "dtype")
"""Fields that must be equal; ``quant_min``/``quant_max`` follow from the dtype."""


def fmt(qparams: dict[str, Any] | None) -> str:
    """``(scale=0.0154, zero_point=23, int8)``; ``float`` for an unquantized side."""
    if qparams is None:
        return "float"
    dtype = f", {qparams['dtype']}" if qparams.get("dtype") is not None else ""
    return f"(scale={qparams.get('scale'):.6g}, zero_point={qparams.get('zero_point')}{dtype})"


def same(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Exact equality of scale, zero point and dtype (a field missing on one side is not compared)."""
    if a is None or b is None:
        return a is b
    return all(a.get(k) == b.get(k) for k in KEYS if a.get(k) is not None and b.get(k) is not None)


def _strip(qparams: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if qparams is None else {k: qparams.get(k) for k in ("scale", "zero_point", "dtype", "node")}


def check_preserving(entry: dict[str, Any]) -> Finding | str:
    """A finding for a violation, else ``"ok"``, ``"float"`` or ``"partial"`` (one side not quantized)."""
    (inp,) = entry["inputs"][:1] or [None]
    out = entry["output"]
    if inp is None or out is None:
        return "float" if inp is None and out is None else "partial"
    if same(inp, out):
        return "ok"
    return fail(RULE, f"{entry['node']} ({entry['op']}): input qparams {fmt(inp)} != output qparams {fmt(out)}; "
                      f"a qparam-preserving op must keep them (XNNPACK rejects it at runtime init)",
                node=entry["node"], op=entry["op"], input=_strip(inp), output=_strip(out))


def _anchor(entry: dict[str, Any]) -> tuple[int, dict[str, Any] | None, dict[str, Any] | None]:
    """(index, source, qparams) of the input whose path carries annotated activation qparams (else input 0)."""
    inputs = entry["inputs"]
    sources = entry.get("sources") or [None] * len(inputs)
    for index, source in enumerate(sources):
        if source and source.get("kind") == "activation":
            return index, source, source.get("qparams") or inputs[index]
    return 0, sources[0] if sources else None, inputs[0] if inputs else None


def _describe(source: dict[str, Any] | None, index: int) -> str:
    if not source or not source.get("node"):
        return f"input #{index}"
    path = " → ".join([source["node"], *reversed(source.get("via") or [])])
    return f"the {source.get('kind', 'input')} path {path} (input #{index})"


def check_cat(entry: dict[str, Any]) -> Finding | None:
    """One finding per cat: all inputs and the output must carry the activation path's qparams."""
    inputs, out = entry["inputs"], entry["output"]
    sources = entry.get("sources") or [None] * len(inputs)
    index, source, anchor = _anchor(entry)
    if anchor is None and out is None and all(q is None for q in inputs):
        return None  # a float cat
    where = f"{entry['node']} ({entry['op']})"
    anchor_text = f"{_describe(source, index)} {fmt(anchor)}"
    bad = [(i, f"input #{i}", q) for i, q in enumerate(inputs) if not same(q, anchor)]
    if not same(out, anchor):
        bad.append((None, "output", out))
    evidence = dict(node=entry["node"], op=entry["op"], anchor_index=index, anchor=_strip(anchor),
                    inputs=[_strip(q) for q in inputs], output=_strip(out))
    if not bad:
        return ok(RULE, f"{where}: {len(inputs)} inputs and output share the qparams of {anchor_text}", **evidence)
    parts = []
    for own, name, got in bad:
        text = f"{name} {fmt(got)}"
        followed = [i for i, s in enumerate(sources) if i != own and s and s.get("kind") == "constant"
                    and got is not None and (same(got, s.get("qparams")) or same(got, inputs[i]))]
        if followed:
            text += f" = constant input #{followed[0]} (class token)"
        parts.append(text)
    return fail(RULE, f"{where}: {'; '.join(parts)}; expected the qparams of {anchor_text}",
                mismatched=[name for _, name, _ in bad], **evidence)


@register_rule(RULE)
def check(ctx: FusionContext) -> list[Finding]:
    flow, runtime_error = ctx.qparam_flow, ctx.runtime_error
    findings: list[Finding] = []
    if runtime_error:
        lines = [line for line in str(runtime_error).splitlines() if line.strip()]
        cause = next((line for line in lines if "XNNCompiler" in line or "Failed to create" in line), lines[-1])
        findings.append(fail(RULE, f"runtime init failed: {cause}", runtime_error=str(runtime_error)))
    if flow is None:
        findings.append(Finding(rule=RULE, status=Status.NOT_RUN,
                                message="no qparam flow: not a PT2E recipe, or the converted graph was not kept"))
        return findings
    counts = {"ok": 0, "float": 0, "partial": 0}
    cats = 0
    for entry in flow:
        if entry["op"] in CAT_OPS:
            cats += 1
            finding = check_cat(entry)
            if finding is not None:
                findings.append(finding)
            continue
        result = check_preserving(entry)
        if isinstance(result, Finding):
            findings.append(result)
        else:
            counts[result] += 1
    if counts["ok"] or not any(f.status is Status.FAIL_CHECK for f in findings):
        findings.append(ok(RULE, f"{counts['ok']} quantized qparam-preserving ops keep identical qparams "
                                 f"({counts['float']} float, {counts['partial']} with one float side; {cats} cat)",
                           **counts, cats=cats))
    return findings
