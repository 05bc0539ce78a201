"""cat_qparams in pairs: it passes on a ViT token path with shared qparams and fires on broken ones."""

from __future__ import annotations

import copy
import json
import re

import pytest

from vkdiff.datamodel import Status
from vkdiff.fusions import cat_qparams
from vkdiff.fusions.registry import RULES, FusionContext

PATCH = {"scale": 0.0154, "zero_point": 23, "quant_min": -128, "quant_max": 127, "dtype": "int8"}
"""Conv output (patch tokens): the annotated activation qparams."""
CLS = {"scale": 0.0186, "zero_point": -3, "quant_min": -128, "quant_max": 127, "dtype": "int8"}
"""What the class-token constant alone would be quantized with."""


def qp(base: dict, node: str) -> dict:
    return dict(base, node=node)


def token_path_flow(*, transpose_out: dict = PATCH, cls_in: dict = PATCH, cat_out: dict = PATCH) -> list[dict]:
    """conv → flatten → transpose and the folded class token into a cat, as ``qparam_flow`` reports them."""
    return [
        {"op": "aten.flatten.using_ints", "node": "flatten", "inputs": [qp(PATCH, "dq_8")], "output": qp(PATCH, "q_9")},
        {"op": "aten.transpose.int", "node": "transpose", "inputs": [qp(PATCH, "dq_9")],
         "output": qp(transpose_out, "q_10")},
        {"op": "aten.cat.default", "node": "cat", "inputs": [qp(cls_in, "dq_11"), qp(transpose_out, "dq_10")],
         "output": qp(cat_out, "q_12"),
         "sources": [{"kind": "constant", "node": "_frozen_cls", "op": "get_attr", "via": [],
                      "qparams": qp(cls_in, "dq_11")},
                     {"kind": "activation", "node": "conv2d", "op": "aten.conv2d.default",
                      "via": ["transpose", "flatten"], "qparams": qp(PATCH, "q_8")}]},
        {"op": "aten.transpose.int", "node": "transpose_1", "inputs": [None], "output": None},
    ]


def context(flow, runtime_error=None) -> FusionContext:
    ctx = FusionContext(case_id="vit_token_path_d1[pt2e-xnnpack-xnnpack]", expect_ops=(), delegates=[], partitions=1,
                        delegated_ops={}, undelegated_ops={}, dequantize_dtypes=[])
    ctx.qparam_flow = copy.deepcopy(flow)
    ctx.runtime_error = runtime_error
    return ctx


def check(flow, runtime_error=None):
    return RULES["cat_qparams"](context(flow, runtime_error))


def failures(findings):
    return [f for f in findings if f.status is Status.FAIL_CHECK]


def test_registered():
    assert RULES["cat_qparams"] is cat_qparams.check


class TestPreservingOps:
    def test_identical_transpose_qparams_pass(self):
        findings = check(token_path_flow())
        assert {f.status for f in findings} == {Status.PASS}
        summary = findings[-1]
        assert summary.evidence == {"ok": 2, "float": 1, "partial": 0, "cats": 1}
        assert summary.message == ("2 quantized qparam-preserving ops keep identical qparams "
                                   "(1 float, 0 with one float side; 1 cat)")

    def test_transpose_output_scale_differs_fires(self):
        """Invariant: a qparam-preserving op has identical input and output qparams (XNNPACK static transpose)."""
        findings = failures(check(token_path_flow(transpose_out=dict(PATCH, scale=0.0186))))
        transpose = [f for f in findings if f.evidence["node"] == "transpose"]
        assert len(transpose) == 1
        assert transpose[0].message.startswith(
            "transpose (aten.transpose.int): input qparams (scale=0.0154, zero_point=23, int8) != "
            "output qparams (scale=0.0186, zero_point=23, int8)")

    def test_zero_point_alone_differs_fires(self):
        """Invariant: the zero point is part of the qparams; a shifted one breaks a byte-moving op too."""
        (finding,) = failures(check(token_path_flow()[:2] + [dict(token_path_flow()[1], node="t2",
                                                               output=qp(dict(PATCH, zero_point=0), "q"))]))
        assert finding.evidence["node"] == "t2"

    def test_one_float_side_is_not_checked(self):
        flow = [{"op": "aten.reshape.default", "node": "reshape_1", "inputs": [None], "output": qp(PATCH, "q_21")}]
        (finding,) = check(flow)
        assert finding.status is Status.PASS and finding.evidence["partial"] == 1


class TestCat:
    def test_cat_shares_patch_token_qparams(self):
        findings = check(token_path_flow())
        (cat,) = [f for f in findings if f.evidence.get("node") == "cat"]
        assert cat.status is Status.PASS
        assert cat.message == ("cat (aten.cat.default): 2 inputs and output share the qparams of the activation path "
                               "conv2d → flatten → transpose (input #1) (scale=0.0154, zero_point=23, int8)")

    def test_cat_output_uses_class_token_qparams_fires(self):
        """Invariant: cat inputs and output share the activation (patch-token) path's qparams, not the class token's."""
        findings = failures(check(token_path_flow(cls_in=CLS, cat_out=CLS)))
        (cat,) = findings
        assert cat.evidence["node"] == "cat" and cat.evidence["mismatched"] == ["input #0", "output"]
        assert cat.message == (
            "cat (aten.cat.default): input #0 (scale=0.0186, zero_point=-3, int8); output (scale=0.0186, "
            "zero_point=-3, int8) = constant input #0 (class token); expected the qparams of the activation path "
            "conv2d → flatten → transpose (input #1) (scale=0.0154, zero_point=23, int8)")

    def test_unfixed_quantizer_shape_fires_twice(self):
        """Invariant 1 and 2 together: anchoring on the class token requantizes the patch tokens in the transpose."""
        findings = failures(check(token_path_flow(transpose_out=CLS, cls_in=CLS, cat_out=CLS)))
        assert sorted(f.evidence["node"] for f in findings) == ["cat", "transpose"]
        (cat,) = [f for f in findings if f.evidence["node"] == "cat"]
        assert cat.evidence["mismatched"] == ["input #0", "input #1", "output"]

    def test_float_cat_is_skipped(self):
        flow = [{"op": "aten.cat.default", "node": "cat", "inputs": [None, None], "output": None,
                 "sources": [{"kind": "constant"}, {"kind": "activation"}]}]
        (finding,) = check(flow)
        assert finding.status is Status.PASS and finding.evidence["cats"] == 1


class TestRuntimeAndPrerequisites:
    def test_runtime_init_error_fires(self):
        """Invariant: lowering and runtime init succeed; the XNNCompiler line is the finding's cause."""
        error = ("load_method('forward'): RuntimeError: Failed to load method forward, error: 0x:1\n"
                 "[XNNCompiler.cpp:1182] Failed to create static transpose node 7 with code: "
                 "xnn_status_invalid_parameter\n[XNNPACKBackend.cpp:143] XNNCompiler::compileModel failed: 0x1")
        (finding,) = failures(check(token_path_flow(), runtime_error=error))
        assert finding.message == ("runtime init failed: [XNNCompiler.cpp:1182] Failed to create static transpose "
                                   "node 7 with code: xnn_status_invalid_parameter")
        assert finding.evidence["runtime_error"] == error

    def test_no_flow_is_not_run(self):
        (finding,) = check(None)
        assert finding.status is Status.NOT_RUN
        assert re.search("no qparam flow", finding.message)

    def test_a_context_built_for_another_recipe_is_not_run(self):
        """A non-PT2E case builds its context without the PT2E fields: the rule says NOT_RUN, never PASS."""
        ctx = FusionContext(case_id="x", expect_ops=(), delegates=[], partitions=0, delegated_ops={},
                            undelegated_ops={}, dequantize_dtypes=[])
        assert (ctx.qparam_flow, ctx.runtime_error) == (None, None)
        (finding,) = RULES["cat_qparams"](ctx)
        assert finding.status is Status.NOT_RUN and "no qparam flow" in finding.message

    @pytest.mark.parametrize("broken, statuses", [(False, {Status.PASS}), (True, {Status.PASS, Status.FAIL_CHECK})])
    def test_evidence_is_json(self, broken, statuses):
        """Every finding's evidence (qparams, sources, counts) survives JSON, as the results store writes it."""
        flow = token_path_flow(transpose_out=CLS, cls_in=CLS, cat_out=CLS) if broken else token_path_flow()
        findings = check(flow)
        assert {f.status for f in findings} == statuses
        for finding in findings:
            assert finding.evidence and json.loads(json.dumps(finding.evidence)) == finding.evidence
