"""vk_cat_qparams in pairs: on ET-VK's static-int8 ViT delegate it passes; mutated or mis-annotated, it fires."""

from __future__ import annotations

import copy
import json

from vkdiff.datamodel import Delegate, Status
from vkdiff.fusions import FusionContext, vk_cat_qparams
from vkdiff.fusions.registry import RULES


def context(delegates) -> FusionContext:
    return FusionContext(case_id="t", expect_ops=(), delegates=delegates, partitions=len(delegates), delegated_ops={},
                         undelegated_ops={}, dequantize_dtypes=[])


def check(delegates):
    return RULES["vk_cat_qparams"](context(delegates))


def failures(findings):
    return [f for f in findings if f.status is Status.FAIL_CHECK]


def delegate_of(lowered) -> Delegate:
    (delegate,) = lowered.delegates
    return copy.deepcopy(delegate)


def set_arg(delegate: Delegate, node: str, name: str, value: dict) -> None:
    """Point argument ``name`` of the op ``node`` (``quantize_per_tensor#10``) at a new value (others keep theirs)."""
    op = delegate.ops[int(node.split("#")[1])]
    assert node.startswith(op.name.split(".")[-2])
    delegate.values.append(value)
    op.args[delegate.bind(op).schema.names.index(name)] = len(delegate.values) - 1


def test_registered():
    assert RULES["vk_cat_qparams"] is vk_cat_qparams.check


class TestOnTheLoweredViT:
    def test_token_cat_shares_the_patch_conv_qparams(self, vit_q8):
        """The installed quantizer: class token, patch tokens and the cat output carry the patch conv's qparams."""
        findings = check([delegate_of(vit_q8[1])])
        assert {f.status for f in findings} == {Status.PASS}
        (cat,) = [f for f in findings if f.evidence.get("op") == "aten.cat.default"]
        assert "activation path q8ta_conv2d#4 → view_copy#6 → permute_copy#7 (input #1)" in cat.message
        assert findings[-1].evidence == {"chains": 0, "cats": 1}

    def test_cat_entry_names_the_class_token_constant(self, vit_q8):
        (entry,) = vk_cat_qparams.cat_entries(delegate_of(vit_q8[1]))
        constant, activation = entry["sources"]
        assert constant["kind"] == "constant" and constant["via"] == []
        assert activation["op"] == "et_vk.q8ta_conv2d.default"
        assert activation["via"] == ["permute_copy#7", "view_copy#6"]
        assert entry["output"]["node"].startswith("quantize_per_tensor#") and entry["output"]["dtype"] == "int8"
        assert json.loads(json.dumps(entry)) == entry

    def test_class_token_dequantized_with_other_qparams_fires(self, vit_q8):
        """Invariant: every cat input is dequantized with the patch tokens' qparams."""
        delegate = delegate_of(vit_q8[1])
        (entry,) = vk_cat_qparams.cat_entries(delegate)
        set_arg(delegate, entry["inputs"][0]["node"], "scale", {"kind": "Double", "double_val": 0.5})
        (finding,) = failures(check([delegate]))
        assert finding.evidence["mismatched"] == ["input #0"]
        assert finding.message.startswith("cat#9 (aten.cat.default): input #0 (scale=0.5, ")

    def test_cat_output_requantized_fires(self, vit_q8):
        """Invariant: the cat's output is quantized with the same qparams (a shifted zero point is a requantize)."""
        delegate = delegate_of(vit_q8[1])
        (entry,) = vk_cat_qparams.cat_entries(delegate)
        zero = entry["output"]["zero_point"]
        set_arg(delegate, entry["output"]["node"], "zero_point", {"kind": "Int", "int_val": zero + 1})
        (finding,) = failures(check([delegate]))
        assert finding.evidence["mismatched"] == ["output"]

    def test_pre_fix_quantizer_requantizes_the_patch_tokens(self, vit_q8, vit_q8_unfixed):
        """The real mutation: with the cat anchored on the class token (before executorch PR #20280), ET-VK lowers
        the patch tokens dequantized with the conv's qparams into a cat quantized with the class token's."""
        (finding,) = failures(check([delegate_of(vit_q8_unfixed[1])]))
        assert finding.evidence["mismatched"] == ["input #0", "output"]
        assert "= constant input #0 (class token)" in finding.message
        (fixed,) = vk_cat_qparams.cat_entries(delegate_of(vit_q8[1]))
        assert finding.evidence["anchor"]["scale"] != fixed["output"]["scale"]


class TestRequantizingChains:
    def test_relu6_chains_keep_their_qparams(self, mobilenet_q8):
        """dequantize → hardtanh → quantize (relu6 is not fused into the q8ta convs) keeps one set of qparams."""
        delegate = delegate_of(mobilenet_q8[1])
        chains = vk_cat_qparams.requantizations(delegate)
        assert len(chains) == 3 and all(c["via"][0].startswith("hardtanh#") for c in chains)
        (finding,) = check([delegate])
        assert finding.status is Status.PASS and finding.evidence == {"chains": 3, "cats": 0}

    def test_requantized_chain_fires(self, mobilenet_q8):
        """Invariant: a chain of data-movement/clamp ops between dequantize and quantize does not change qparams."""
        delegate = delegate_of(mobilenet_q8[1])
        chain = vk_cat_qparams.requantizations(delegate)[0]
        set_arg(delegate, chain["node"], "scale", {"kind": "Double", "double_val": 2 * chain["output"]["scale"]})
        (finding,) = failures(check([delegate]))
        assert finding.message.startswith(f"{chain['input']['node']} → {chain['via'][0]} → {chain['node']}: "
                                          f"dequantized with (scale=")
        assert "across data-movement ops only" in finding.message


def test_no_static_int8_delegate_is_not_run():
    (finding,) = check([])
    assert finding.status is Status.NOT_RUN and "not a static-int8 lowering" in finding.message
