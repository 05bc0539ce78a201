"""PT2E + XNNPACKQuantizer on the ViT token path: the converted graph's qparam flow."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch

from vkdiff.cases.vit import ViTTokenPath, image_inputs
from vkdiff.datamodel import Status
from vkdiff.fusions import cat_qparams
from vkdiff.lowering import pt2e


def _converted(recipe, depth: int = 1):
    torch.manual_seed(0)
    model = ViTTokenPath(depth=depth).eval()
    (x,) = image_inputs(32)(torch.Generator().manual_seed(0))
    return recipe(model, (x,)), x


@pytest.fixture(scope="module")
def converted():
    return _converted(pt2e.quantize_pt2e_xnnpack)


@pytest.fixture(scope="module")
def unfixed():
    return _converted(pt2e.quantize_pt2e_xnnpack_unfixed)


class Ctx:
    def __init__(self, flow):
        self.qparam_flow = flow
        self.runtime_error = None


def _by_node(flow):
    return {entry["node"]: entry for entry in flow}


def test_flow_has_transposes_and_one_cat(converted):
    flow = pt2e.qparam_flow(converted[0])
    ops = Counter(entry["op"] for entry in flow)
    assert ops["aten.cat.default"] == 1
    assert ops["aten.transpose.int"] == 3  # token path + attention (k^T, heads back)
    assert {"aten.flatten.using_ints", "aten.reshape.default", "aten.permute.default"} <= set(ops)
    assert json.loads(json.dumps(flow)) == flow


def test_cat_sources_name_the_patch_path_and_the_class_token(converted):
    (cat,) = [entry for entry in pt2e.qparam_flow(converted[0]) if entry["op"] == "aten.cat.default"]
    constant, activation = cat["sources"]
    assert constant["kind"] == "constant"
    assert activation["kind"] == "activation" and activation["op"] == "aten.conv2d.default"
    assert activation["via"] == ["transpose", "flatten"]
    assert set(cat["output"]) == {"scale", "zero_point", "quant_min", "quant_max", "dtype", "node"}
    assert cat["output"]["dtype"] == "int8"


def test_installed_quantizer_keeps_token_path_qparams(converted):
    """executorch 1.5.1 has the fix (PR #20280): the token transpose and the cat carry the conv's qparams."""
    flow = pt2e.qparam_flow(converted[0])
    transpose = _by_node(flow)["transpose"]
    assert cat_qparams.same(transpose["inputs"][0], transpose["output"])
    findings = cat_qparams.check(Ctx(flow))
    assert {f.status for f in findings} == {Status.PASS}


def test_unfixed_quantizer_breaks_the_token_transpose(unfixed):
    """Invariant: a token transpose keeps its qparams; the pre-fix cat annotation (class-token anchor) breaks it."""
    flow = pt2e.qparam_flow(unfixed[0])
    transpose = _by_node(flow)["transpose"]
    assert not cat_qparams.same(transpose["inputs"][0], transpose["output"])
    failed = {f.evidence["node"] for f in cat_qparams.check(Ctx(flow)) if f.status is Status.FAIL_CHECK}
    assert {"transpose", "cat"} <= failed


def test_unfixed_annotation_is_restored():
    from executorch.backends.xnnpack.quantizer import xnnpack_quantizer_utils as utils

    before = utils._get_cat_qparam_source, utils._is_share_obs_or_fq_op
    with pt2e.unfixed_cat_annotation() as patched:
        assert patched
        assert not utils._is_share_obs_or_fq_op(torch.ops.aten.transpose.int)
    assert (utils._get_cat_qparam_source, utils._is_share_obs_or_fq_op) == before
    assert utils._is_share_obs_or_fq_op(torch.ops.aten.transpose.int)


def test_output_qparams_are_the_head_dequantize(converted):
    (out,) = pt2e.output_qparams(converted[0])
    assert out["dtype"] == "int8" and 0 < out["scale"] < 1


def test_converted_module_stays_close_to_float(converted):
    """Calibrated on its own input, the converted module is within ~2 output scales of float (8 allowed)."""
    module, x = converted
    torch.manual_seed(0)
    reference = ViTTokenPath(depth=1).eval()(x)
    scale = pt2e.output_qparams(module)[0]["scale"]
    assert torch.allclose(module(x), reference, atol=8 * scale)
