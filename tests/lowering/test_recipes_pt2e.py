"""PT2E recipes for Vulkan: ``VulkanQuantizer`` (linear only) and ET-VK's static-int8 recipe, and the q8ta model cases.

The model-case tests lower the catalogue cases (cached on disk under the cache dir, shared with the
``vkdiff`` pytest run of the same cases): the first run lowers each in ~15-25 s on 2 cores.
"""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest
import torch
from torch import nn

from vkdiff.capture import quiet_libraries
from vkdiff.cases.catalog import all_model_cases
from vkdiff.cases.vit import ViTTokenPath, image_inputs
from vkdiff.fusions import cat_qparams
from vkdiff.lowering import pt2e
from vkdiff.lowering.edge import call_targets
from vkdiff.lowering.recipes import RECIPES

VULKAN_RECIPES = ("pt2e-vulkan-8w", "pt2e-vulkan-4w", "pt2e-vulkan-8da8w", "pt2e-vulkan-8da4w")
STATIC_INT8 = "pt2e-xnnpack-perchannel"
Q8_CASES = ("mobilenet_q8", "resnet_q8", "vit_token_path_d1")
QDQ = ("quantized_decomposed.quantize_per_tensor.default", "quantized_decomposed.dequantize_per_tensor.default")


class ConvLinear(nn.Module):
    """A conv, a residual add and a linear: what a quantizer must (not) annotate."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 6 * 6, 8)

    def forward(self, x):
        return self.fc(torch.flatten(x + self.conv(x), 1))


def _converted(recipe: str, model: nn.Module | None = None, inputs: tuple | None = None):
    torch.manual_seed(0)
    model = model or ConvLinear().eval()
    inputs = inputs or (torch.randn(1, 4, 6, 6),)
    with quiet_libraries():
        return RECIPES[recipe](model, inputs)


def _ops(graph_module) -> Counter:
    return call_targets(graph_module)


@pytest.mark.parametrize("name", VULKAN_RECIPES + (STATIC_INT8,))
def test_recipes_are_registered_by_name(name):
    assert callable(RECIPES[name])


@pytest.mark.parametrize("recipe, dynamic", [("pt2e-vulkan-8w", False), ("pt2e-vulkan-8da8w", True)])
def test_vulkan_quantizer_annotates_the_linear_only(recipe, dynamic):
    """VulkanQuantizer's one annotator is ``linear``: the conv and the add stay float, the linear weight is
    int8 per channel, and only the dynamic config quantizes (the linear's) activations at run time."""
    ops = _ops(_converted(recipe))
    assert ops["quantized_decomposed.dequantize_per_channel.default"] == 1
    assert "quantized_decomposed.quantize_per_tensor.default" not in ops
    assert ("quantized_decomposed.choose_qparams.tensor" in ops) is dynamic


def test_vulkan_quantizer_4w_keeps_weights_in_the_int4_range():
    converted = _converted("pt2e-vulkan-4w")
    (weight,) = [t for t in converted.state_dict().values() if t.dtype == torch.int8]
    assert weight.min() >= -8 and weight.max() <= 7 and weight.min() < 0 < weight.max()


def test_static_int8_recipe_quantizes_activations_and_per_channel_weights():
    """ET-VK's static-int8 recipe: per-tensor int8 activations around every op, per-channel weights."""
    ops = _ops(_converted(STATIC_INT8))
    assert ops["quantized_decomposed.dequantize_per_channel.default"] == 2  # conv and linear weights
    assert ops["quantized_decomposed.quantize_per_tensor.default"] >= 3  # input, conv, add (and more)


def test_vulkan_quantizer_leaves_the_token_path_float():
    """Under VulkanQuantizer the ViT token path has no qparams at all: nothing to share, the cat is float."""
    torch.manual_seed(0)
    (x,) = image_inputs(32)(torch.Generator().manual_seed(0))
    flow = pt2e.qparam_flow(_converted("pt2e-vulkan-8da8w", ViTTokenPath(depth=1).eval(), (x,)))
    (cat,) = [entry for entry in flow if entry["op"] == "aten.cat.default"]
    assert cat["inputs"] == [None, None] and cat["output"] is None
    assert cat_qparams.check_cat(cat) is None
    token_path = [entry for entry in flow if entry["node"] in ("flatten", "transpose")]
    assert len(token_path) == 2 and all(e["inputs"] == [None] and e["output"] is None for e in token_path)
    static = [e for e in flow for q in (*e["inputs"], e["output"]) if q and q.get("scale") is not None]
    assert static == []  # only the linears' dynamic quantize_per_tensor.tensor (scale from choose_qparams)


def test_memoised_pattern_graphs_quantize_identically():
    """The memoised conv-bn pattern graphs give the same converted module as fresh exports."""
    from executorch.backends.xnnpack.quantizer import xnnpack_quantizer_utils as utils
    from torchao.quantization.pt2e import utils as torchao_utils

    first = _converted(STATIC_INT8)
    assert utils._get_aten_graph_module_for_pattern is not torchao_utils._get_aten_graph_module_for_pattern
    again = _converted(STATIC_INT8)
    assert first.code == again.code
    state = lambda m: hashlib.sha256(b"".join(t.contiguous().view(-1).view(torch.uint8).numpy().tobytes()  # noqa: E731
                                              for t in m.state_dict().values())).hexdigest()
    assert state(first) == state(again)


@pytest.fixture(scope="module")
def q8_lowered():
    from vkdiff.lowering.lower import lower

    cases = {c.name: c for c in all_model_cases(r"\[pt2e-xnnpack-perchannel-vulkan\]$")}
    assert sorted(cases) == sorted(Q8_CASES)
    with quiet_libraries():
        return {name: lower(case) for name, case in cases.items()}


EXPECTED_Q8_OPS = {
    "mobilenet_q8": {"et_vk.q8ta_conv2d.default": 1, "et_vk.q8ta_conv2d_pw.default": 2,
                     "et_vk.q8ta_conv2d_dw.default": 1, "et_vk.q8ta_add.default": 1,
                     "et_vk.q8ta_linear_gemv.default": 1},
    "resnet_q8": {"et_vk.q8ta_conv2d.default": 6, "et_vk.q8ta_add.default": 2, "et_vk.q8ta_linear_gemv.default": 1},
    "vit_token_path_d1": {"et_vk.q8ta_conv2d.default": 1, "et_vk.q8ta_add.default": 3,
                          "et_vk.q8ta_linear.default": 4, "et_vk.q8ta_linear_gemv.default": 1},
}


@pytest.mark.parametrize("name", Q8_CASES)
def test_q8_case_is_one_delegate_of_q8ta_ops(q8_lowered, name):
    """Every conv, add and linear is fused into its q8ta op, in one Vulkan delegate; nothing left on the CPU."""
    lowered = q8_lowered[name]
    assert lowered.partitions == 1 and lowered.undelegated_ops == {}
    counts = lowered.op_counts()
    assert {op: counts[op] for op in EXPECTED_Q8_OPS[name]} == EXPECTED_Q8_OPS[name]
    assert not [op for op in counts if op.startswith(("aten.convolution", "aten.linear", "aten.addmm", "aten.mm"))]
    assert counts["aten.add.Tensor"] == 0


@pytest.mark.parametrize("name", Q8_CASES)
def test_q8_int8_activations_are_packed_int8_buffers(q8_lowered, name):
    """Every int8 activation of a q8 delegate is a buffer in a PACKED_INT8_* layout (the q8ta ops' inputs)."""
    (delegate,) = q8_lowered[name].delegates
    int8 = [t for t in delegate.tensors.values() if t.dtype == "int8" and t.constant_id < 0]
    assert int8 and {t.storage for t in int8} == {"BUFFER"}
    assert all(t.layout.startswith("PACKED_INT8_") for t in int8)
    for conv in ("et_vk.q8ta_conv2d", "et_vk.q8ta_conv2d_dw"):
        layouts = {delegate.tensors[delegate.bind(op).args["x"]].layout for op in delegate.ops_named(conv)}
        assert layouts <= {"PACKED_INT8_CONV2D"}, conv  # serialized unresolved: the runtime makes it 4C1W


def test_fold_qdq_leaves_only_the_fused_boundaries(q8_lowered):
    """FoldQDQPass erases the quantize → dequantize pairs between non-fused ops: the ViT delegate keeps 7 of
    the converted graph's 22 quantizes, so its float ops skip the eager model's roundings."""
    counts = q8_lowered["vit_token_path_d1"].op_counts()
    assert counts[QDQ[0]] == 7 and counts[QDQ[1]] == 9
