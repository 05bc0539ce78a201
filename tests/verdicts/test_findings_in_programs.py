"""Known ET-VK bugs matched inside any program by the first diverging node's op, arguments, shader and error shape
(#34): the program's failure stands, and its result names the bug and its minimal shape."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.datamodel import Result
from vkdiff.verdicts import expectations
from vkdiff.verdicts.expectations import KNOWN_IN_PROGRAM, ExpectationFileError


def _program(op: str, args: dict, shader: str, status: str = "FAIL_NUMERIC", max_abs: float = 4.5e-4,
             case: str = "user.model[fp32-vulkan]") -> Result:
    node = {"index": 4, "op": op, "delegate": 0, "args": args}
    record = {"index": 4, "delegate": 0, "outputs": [{"max_abs": max_abs, "mismatches": 625}]}
    return Result(case=case, op="", variant="", device="gpu-1", rule="device", status=status, shader=shader,
                  node=node, metrics={"nodes": [record]},
                  reason=f"first diverging node 4 ({op}, {shader}): value %19 max abs {max_abs:.3g}, 625 elements "
                         f"over tolerance on its own inputs; model output vs eager max abs 0.000134")


def _annotated(result: Result) -> Result:
    return expectations.annotate(dataclasses.replace(result, expectation={}))


def test_a_users_exact_gelu_names_the_finding_and_still_fails():
    found = _annotated(_program("aten.gelu.default", {"approximate": "none"}, "gelu_float_texture3d"))
    assert found.expectation["id"] == "etvk-gelu-ignores-approximate-none"
    assert found.expectation["outcome"] == KNOWN_IN_PROGRAM and "approximate='none'" in found.expectation["minimal"]
    assert expectations.counts_as_failure(found), "a user's program that hits a known bug still fails"


@pytest.mark.parametrize("result", [
    _program("aten.gelu.default", {"approximate": "tanh"}, "gelu_float_texture3d"),          # another argument
    _program("aten.gelu.default", {"approximate": "none"}, "gelu_float_texture3d", max_abs=0.02),  # a larger error
    _program("aten.gelu.default", {"approximate": "none"}, "gelu_float_texture3d", status="FAIL_NAN"),
    _program("aten.convolution.default", {"padding": "[0, 0]", "groups": "8"}, "conv2d_dw_float", max_abs=2.2),
    _program("aten.convolution.default", {"padding": "[3, 3]", "groups": "1"}, "conv2d_float", max_abs=2.2),
], ids=["tanh", "too-large", "nan", "no-padding", "not-depthwise"])
def test_another_argument_shader_or_error_shape_is_not_the_finding(result):
    assert not _annotated(result).expectation


def test_a_clipped_depthwise_window_is_matched_by_its_padding():
    found = _annotated(_program("aten.convolution.default", {"padding": "[3, 3]", "groups": "8"}, "conv2d_dw_float",
                                max_abs=2.2))
    assert found.expectation["id"] == "etvk-conv2d-dw-base-clipped-window"


def test_a_catalogue_cases_own_expectation_comes_first():
    vit = _program("aten.gelu.default", {"approximate": "none"}, "gelu_float_texture3d", max_abs=2.3e-4,
                   case="vit_token_path_d1[pt2e-xnnpack-perchannel-vulkan]")
    vit = dataclasses.replace(vit, node={**vit.node, "index": 45}, metrics={"nodes": [{"index": 45, "delegate": 0,
                              "outputs": [{"max_abs": 2.3e-4, "mismatches": 9}]}]},
                              reason=vit.reason.replace("node 4 ", "node 45 "))
    found = _annotated(vit)
    assert found.expectation == {**found.expectation, "id": "etvk-gelu-ignores-approximate-none-vit-q8",
                                 "outcome": "known"}


def test_a_finding_in_programs_needs_its_node_op_and_minimal_shape(tmp_path):
    path = tmp_path / "expectations.yaml"
    path.write_text("- id: vague\n  status: [FAIL_NUMERIC]\n  shader: '^gelu_'\n")
    with pytest.raises(ExpectationFileError, match="node_op and minimal shape"):
        expectations.load(path)


def test_an_id_is_shared_only_by_a_catalogue_entry_and_its_finding_in_programs():
    by_id: dict[str, list] = {}
    for exp in expectations.load():
        by_id.setdefault(exp.id, []).append(exp)
    for name, entries in by_id.items():
        assert len(entries) == 1 or sorted(e.in_programs for e in entries) == [False, True], name


class Block(nn.Module):
    """A ConvNeXt block's depthwise 7x7 conv (padding 3): ET-VK's conv2d_dw shader."""

    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(4, 4, 7, padding=3, groups=4)

    def forward(self, x):
        return self.dw(x)


def convnext_block():
    torch.manual_seed(0)
    return Block().eval(), (torch.randn(1, 4, 9, 9),)


@requires_tree
@requires_vulkan
def test_a_users_convnext_block_names_the_clipped_window(et_tree, tmp_path):
    from vkdiff.entry.api import check

    report = check(convnext_block, recipe="fp32", et_src=str(et_tree), results=tmp_path / "r.jsonl")
    (device,) = [r for r in report.results if r.rule == "device"]
    assert device.status == "FAIL_NUMERIC" and device.node["args"]["padding"] == "[3, 3]", device.reason
    assert device.expectation["id"] == "etvk-conv2d-dw-base-clipped-window"
    assert device.expectation["outcome"] == KNOWN_IN_PROGRAM and expectations.counts_as_failure(device)
