"""vk_cat_qparams: in a Vulkan delegate, a ViT token path keeps one set of qparams through the cat.

The Vulkan counterpart of ``cat_qparams``, read off the serialized ``VkGraph`` rather than the
PT2E-converted graph. ET-VK's ``FoldQDQPass`` erases every quantize → dequantize pair left after
its fusions, so the token path runs in float between the patch conv's ``dequantize_per_tensor``
and the ``quantize_per_tensor`` after the cat; ``flatten``/``transpose`` become ``view_copy``/
``permute_copy`` on float tensors. Nothing at runtime checks the qparams (XNNPACK refuses a
mismatch at init; ET-VK silently requantizes), so the rule does. Invariants, per delegate:

1. Every ``cat`` fed by ``dequantize_per_tensor`` (through data-movement ops) and feeding a
   ``quantize_per_tensor`` dequantizes all inputs and quantizes its output with the qparams of
   the input whose int8 values an op computed (the patch tokens: ``q8ta_conv2d`` → view_copy →
   permute_copy), not those of a prepacked constant (the class token).
2. Every ``dequantize_per_tensor`` → data-movement/clamp ops → ``quantize_per_tensor`` chain keeps
   its qparams: a difference is a requantization the model did not ask for.

``NOT_RUN`` when no delegate holds a ``dequantize_per_tensor`` (not a static-int8 lowering).
Qparams are compared exactly.
"""

from __future__ import annotations

from typing import Any

from vkdiff.datamodel import Delegate, Status
from vkdiff.datamodel.vkgraph import VkOp
from vkdiff.fusions.cat_qparams import check_cat, fmt, same
from vkdiff.fusions.registry import Finding, FusionContext, fail, ok, register_rule

RULE = "vk_cat_qparams"

QUANTIZE = "quantized_decomposed.quantize_per_tensor.default"
DEQUANTIZE = "quantized_decomposed.dequantize_per_tensor.default"
CAT = "aten.cat.default"
PRESERVING_OPS: frozenset[str] = frozenset({
    "aten.view_copy.default", "aten.permute_copy.default", "aten.clone.default", "aten.squeeze_copy.dims",
    "aten.unsqueeze_copy.default", "aten.slice_copy.Tensor", "aten.expand_copy.default",
    "aten.max_pool2d.default", "aten.max_pool2d_with_indices.default", "aten.relu.default",
    "aten.hardtanh.default", "aten.clamp.default", "aten.upsample_bilinear2d.vec", "aten.pixel_shuffle.default",
})
"""Delegate ops whose output values are input values moved or clamped: the qparams across them must not change
(edge names of ``vkdiff.lowering.pt2e.QPARAM_PRESERVING_OPS``)."""


class _Graph:
    """Producers and consumers of a delegate's values."""

    def __init__(self, delegate: Delegate, index: int):
        self.delegate, self.index = delegate, index
        self.producer: dict[int, VkOp] = {}
        self.consumers: dict[int, list[VkOp]] = {}
        for op in delegate.ops:
            *inputs, out = op.args
            for vid in self._expand(out):
                self.producer[vid] = op
            for vid in {v for arg in inputs for v in self._expand(arg)}:
                self.consumers.setdefault(vid, []).append(op)

    def _expand(self, vid: int) -> list[int]:
        value = self.delegate.values[vid]
        return list(value["items"]) if value.get("kind") == "ValueList" else [vid]

    def name(self, op: VkOp) -> str:
        """``permute_copy#7`` (``#1.7`` in a program's second delegate)."""
        short = op.name.split(".")[-2] if op.name.count(".") >= 2 else op.name
        return f"{short}#{op.index}" if self.index == 0 else f"{short}#{self.index}.{op.index}"

    def qparams(self, op: VkOp) -> dict[str, Any]:
        """Scale, zero point and int8 dtype of a (de)quantize_per_tensor call."""
        call = self.delegate.bind(op)
        int8 = call.args["input"] if op.name == DEQUANTIZE else call.out
        value = self.delegate.value
        return {"scale": value(call.args["scale"]), "zero_point": value(call.args["zero_point"]),
                "dtype": self.delegate.tensors[int8].dtype, "node": self.name(op)}

    def _tensor_input(self, op: VkOp) -> int:
        """The tensor a data-movement op reads (its schema's first argument: ``self`` or ``input``)."""
        call = self.delegate.bind(op)
        return call.args[call.schema.names[0]]

    def back(self, vid: int) -> tuple[VkOp | None, list[str]]:
        """The op producing ``vid`` once data-movement ops are walked back, and the ops walked through."""
        via = []
        op = self.producer.get(vid)
        while op is not None and op.name in PRESERVING_OPS:
            via.append(self.name(op))
            op = self.producer.get(self._tensor_input(op))
        return op, via

    def forward(self, vid: int) -> tuple[VkOp | None, list[str]]:
        """The single consumer of ``vid`` once data-movement ops are walked forward (None: several or none)."""
        via = []
        while len(users := self.consumers.get(vid, [])) == 1 and users[0].name in PRESERVING_OPS:
            via.append(self.name(users[0]))
            vid = self.delegate.bind(users[0]).outputs[0]  # max_pool2d_with_indices: the values, not the indices
        return (users[0] if len(users) == 1 else None), via

    def source(self, dequantize: VkOp) -> dict[str, Any]:
        """Whether a dequantize reads a constant (prepacked or not) or an op's int8 output."""
        int8 = self.delegate.bind(dequantize).args["input"]
        op = self.producer.get(int8)
        if op is not None and op.name.startswith("et_vk.prepack"):
            int8, op = self.delegate.bind(op).args["x"], None
        if op is None:
            kind = "constant" if self.delegate.tensors[int8].constant_id >= 0 else "input"
            return {"kind": kind, "node": f"value {int8}", "op": kind}
        return {"kind": "activation", "node": self.name(op), "op": op.name}


def cat_entries(delegate: Delegate, index: int = 0) -> list[dict[str, Any]]:
    """Every cat of a delegate as ``cat_qparams.check_cat`` reads one (``vkdiff.lowering.pt2e.qparam_flow``'s shape)."""
    graph, entries = _Graph(delegate, index), []
    for op in delegate.ops_named(CAT):
        call = delegate.bind(op)
        inputs, sources = [], []
        for vid in delegate.value(call.args["tensors"]):
            origin, via = graph.back(vid)
            qparams = graph.qparams(origin) if origin is not None and origin.name == DEQUANTIZE else None
            source = graph.source(origin) if qparams else {"kind": "float", "node": None, "op": None}
            inputs.append(qparams)
            sources.append(dict(source, via=via, qparams=qparams))
        user, _ = graph.forward(call.out)
        output = graph.qparams(user) if user is not None and user.name == QUANTIZE else None
        entries.append({"op": CAT, "node": graph.name(op), "inputs": inputs, "output": output, "sources": sources})
    return entries


def requantizations(delegate: Delegate, index: int = 0) -> list[dict[str, Any]]:
    """Every dequantize → data-movement ops → quantize chain: its ops and both qparams."""
    graph, chains = _Graph(delegate, index), []
    for op in delegate.ops_named(QUANTIZE):
        origin, via = graph.back(delegate.bind(op).args["input"])
        if via and origin is not None and origin.name == DEQUANTIZE:
            chains.append({"node": graph.name(op), "via": list(reversed(via)), "input": graph.qparams(origin),
                           "output": graph.qparams(op)})
    return chains


def _check_chain(chain: dict[str, Any]) -> Finding | None:
    if same(chain["input"], chain["output"]):
        return None
    path = " → ".join([chain["input"]["node"], *chain["via"], chain["node"]])
    return fail(RULE, f"{path}: dequantized with {fmt(chain['input'])}, requantized with {fmt(chain['output'])} "
                      f"across data-movement ops only", **chain)


@register_rule(RULE)
def check(ctx: FusionContext) -> list[Finding]:
    quantized = [(i, d) for i, d in enumerate(ctx.delegates) if d.ops_named(DEQUANTIZE)]
    if not quantized:
        return [Finding(rule=RULE, status=Status.NOT_RUN,
                        message="no dequantize_per_tensor in any Vulkan delegate: not a static-int8 lowering")]
    findings: list[Finding] = []
    cats = chains = 0
    for index, delegate in quantized:
        for entry in cat_entries(delegate, index):
            cats += 1
            finding = check_cat(entry)
            if finding is not None:
                finding.rule = RULE
                findings.append(finding)
        for chain in requantizations(delegate, index):
            chains += 1
            finding = _check_chain(chain)
            if finding is not None:
                findings.append(finding)
    if not any(f.status is Status.FAIL_CHECK for f in findings):
        findings.append(ok(RULE, f"{chains} dequantize → data movement → quantize chains keep their qparams; "
                                 f"{cats} cat", chains=chains, cats=cats))
    return findings
