"""Each fusion rule in pairs: it passes on what ExecuTorch produced and fires on a deliberately broken program."""

from __future__ import annotations

import copy

import numpy as np

from vkdiff import fusions, reference
from vkdiff.datamodel import Delegate, Status, Tolerance, VkOp, VkTensorInfo
from vkdiff.fusions import FusionContext
from vkdiff.verdicts.compare import ErrorStatistics


def context(case, lowered, **overrides) -> FusionContext:
    fields = dict(case_id=case.id, expect_ops=case.expect_ops, delegates=copy.deepcopy(lowered.delegates),
                  partitions=lowered.partitions, delegated_ops=lowered.delegated_ops,
                  undelegated_ops=lowered.undelegated_ops, dequantize_dtypes=list(lowered.dequantize_dtypes))
    fields.update(overrides)
    return FusionContext(**fields)


def statuses(findings) -> set[Status]:
    return {f.status for f in findings}


def tensor(vid: int, dtype: str, dims: list[int], constant: bool = False) -> VkTensorInfo:
    return VkTensorInfo(id=vid, dtype=dtype, dims=dims, constant_id=vid if constant else -1, storage="DEFAULT_STORAGE",
                        layout="DEFAULT_LAYOUT")


def shared_weight_delegate(rng) -> Delegate:
    """An embedding and an lm_head reading one packed 4-bit constant: what tied-weight dedup should produce.

    Built by hand from the data model's records (executorch 1.5.1 itself serializes two constants).
    """
    vocab, dim, group = 64, 32, 16
    codes = rng.integers(-8, 8, (vocab, dim))
    packed = reference.pack_int4_linear(codes)
    values = [{"kind": "VkTensor"}, {"kind": "VkTensor"}, {"kind": "VkTensor"}, {"kind": "Int", "int_val": group},
              {"kind": "VkTensor"}, {"kind": "Bool", "bool_val": True}, {"kind": "VkTensor"}, {"kind": "Null"},
              {"kind": "VkTensor"}]
    tensors = {0: tensor(0, "uint8", [vocab, dim // 2], True), 1: tensor(1, "float32", [vocab, dim // group], True),
               2: tensor(2, "float32", [dim // group, vocab], True), 4: tensor(4, "int32", [1, 3]),
               6: tensor(6, "float32", [1, 3, dim]), 8: tensor(8, "float32", [1, 3, vocab])}
    scales = rng.uniform(0.5, 1.5, (vocab, dim // group)).astype(np.float32)
    ops = [VkOp(index=0, name="et_vk.embedding_q4gsw.default", args=[0, 1, 3, 4, 5, 6]),
           VkOp(index=1, name="et_vk.linear_q4gsw.default", args=[6, 0, 2, 3, 7, 8])]
    return Delegate(ops=ops, values=values, tensors=tensors, constant_keys={0: "k0", 1: "k1", 2: "k2"},
                    constants={0: packed, 1: scales, 2: np.ascontiguousarray(scales.T)}, input_ids=[4],
                    output_ids=[8], blob_size=0)


class TestExpectedFusions:
    def test_fused_linear_is_found(self, linear_4w):
        """linear_q4gsw is in the delegate, in one partition."""
        findings = fusions.RULES["expected_fusions"](context(*linear_4w))
        assert statuses(findings) == {Status.PASS}
        assert findings[0].evidence["count"] == 1

    def test_unfused_linear_is_named(self, linear_4w):
        """Invariant: a case's expected op is present; when missing, the finding names what was left."""
        ctx = context(*linear_4w)
        for op in ctx.delegates[0].ops:
            if op.name.startswith("et_vk.linear_q4gsw"):
                op.name = "aten.mm.default"
        (finding,) = fusions.RULES["expected_fusions"](ctx)
        assert finding.status is Status.FAIL_CHECK
        assert "et_vk.linear_q4gsw missing: left unfused as aten.mm.default ×1" in finding.message


class TestTransposedScales:
    def test_linear_reads_transposed_scales(self, linear_4w):
        findings = fusions.RULES["transposed_scales"](context(*linear_4w))
        assert statuses(findings) == {Status.PASS}
        assert findings[0].evidence["dims"] == [4, 96]

    def test_untransposed_scales_fire(self, linear_4w):
        """Invariant: linear_q4gsw reads [K/gs, N4*4]; scales left as [N, K/gs] break it."""
        ctx = context(*linear_4w)
        delegate = ctx.delegates[0]
        (op,) = delegate.ops_named("et_vk.linear_q4gsw")
        delegate.tensors[delegate.bind(op).args["weight_scales"]].dims = [96, 4]
        (finding,) = fusions.RULES["transposed_scales"](ctx)
        assert finding.status is Status.FAIL_CHECK
        assert "as [96, 4], its shader expects [4, 96]" in finding.message

    def test_shared_scales_are_checked_per_consumer(self, tied):
        """One scales tensor feeding the embedding and the lm_head must suit both (it cannot: rule fires)."""
        ctx = context(*tied)
        delegate = ctx.delegates[0]
        (emb,) = delegate.ops_named("et_vk.embedding_q4gsw")
        head = delegate.ops_named("et_vk.linear_q4gsw")[-1]
        position = delegate.bind(head).schema.names.index("weight_scales")
        head.args[position] = delegate.bind(emb).args["weight_scales"]
        findings = fusions.RULES["transposed_scales"](ctx)
        assert Status.FAIL_CHECK in statuses(findings)
        assert any("feeds 2 consumers" in f.message for f in findings)


class TestTiedWeights:
    def test_weight_shared_by_one_constant_passes(self, rng):
        """Both consumers reading one constant: packed once, and both consumers are named."""
        ctx = FusionContext(case_id="shared", expect_ops=(), delegates=[shared_weight_delegate(rng)], partitions=1,
                            delegated_ops={}, undelegated_ops={}, dequantize_dtypes=[],
                            tied_groups=[["embed.weight", "lm_head.weight"]])
        findings = fusions.RULES["tied_weight_dedup"](ctx)
        assert statuses(findings) == {Status.PASS}
        assert findings[0].message == ("weight %0 packed once, shared by #0 et_vk.embedding_q4gsw, "
                                       "#1 et_vk.linear_q4gsw")

    def test_weight_packed_twice_fires(self, tied):
        """Invariant: a tied weight is one constant; two constants with equal codes mean a second repack."""
        ctx = context(*tied)
        delegate = ctx.delegates[0]
        head = delegate.ops_named("et_vk.linear_q4gsw")[-1]
        (emb,) = delegate.ops_named("et_vk.embedding_q4gsw")
        emb_args = delegate.bind(emb).args
        copy_id = max(delegate.tensors) + 1
        delegate.tensors[copy_id] = copy.deepcopy(delegate.tensors[emb_args["weight"]])
        delegate.constants[copy_id] = delegate.constants[emb_args["weight"]].copy()
        head.args[delegate.bind(head).schema.names.index("weights")] = copy_id
        if not delegate.value(emb_args["is_linear_weight"]):
            c = delegate.constants[copy_id]
            delegate.constants[copy_id] = ((c >> 4) | (c << 4)).astype(np.uint8)
        findings = fusions.RULES["tied_weight_dedup"](ctx)
        assert any(f.status is Status.FAIL_CHECK and "packed 2 times" in f.message for f in findings)


class TestZeroPointDtype:
    def test_float_zero_point_binds_zpinherit(self, linear_8da4w_fp32zp):
        ctx = context(*linear_8da4w_fp32zp, shader_variants=frozenset({
            "linear_dq8ca_q4gsw_tiled_texture3d_texture2d_float_zpint8",
            "linear_dq8ca_q4gsw_tiled_texture3d_texture2d_float_zpinherit"}))
        (finding,) = fusions.RULES["zero_point_dtype"](ctx)
        assert finding.status is Status.PASS and finding.evidence["dtype"] == "float32"

    def test_float_zero_point_on_int8_only_tree_is_dtype_mismatch(self, linear_8da4w_fp32zp):
        """Invariant: a tree whose only dq8ca variant binds int8 cannot take the float32 zero point."""
        ctx = context(*linear_8da4w_fp32zp, shader_variants=frozenset({"linear_dq8ca_q4gsw_tiled_texture3d_texture2d_float"}))
        (finding,) = fusions.RULES["zero_point_dtype"](ctx)
        assert finding.status is Status.DTYPE_MISMATCH
        assert "int8 zero-point texture" in finding.message

    def test_without_tree_the_binding_is_not_run(self, linear_8da4w_fp32zp):
        (finding,) = fusions.RULES["zero_point_dtype"](context(*linear_8da4w_fp32zp))
        assert finding.status is Status.NOT_RUN


class TestWeightZeroPoints:
    @staticmethod
    def _stats(error: float) -> ErrorStatistics:
        expected = np.linspace(-1, 1, 16)
        return ErrorStatistics.from_arrays(expected + error, expected, Tolerance(atol=1e-3))

    def test_honoured_zero_points_pass(self, linear_4w):
        ctx = context(*linear_4w, weight_qparams={"proj": {"zero_point_nonzero": True}}, numerics=self._stats(0.0))
        (finding,) = fusions.RULES["weight_zero_points"](ctx)
        assert finding.status is Status.PASS

    def test_dropped_zero_points_fire(self, linear_4w):
        """Invariant: non-zero weight zero points fused into linear_q4gsw must not change the output."""
        ctx = context(*linear_4w, weight_qparams={"proj": {"zero_point_nonzero": True}}, numerics=self._stats(0.3))
        (finding,) = fusions.RULES["weight_zero_points"](ctx)
        assert finding.status is Status.FAIL_CHECK and "dropped silently" in finding.message


class TestBf16Export:
    def test_float32_dequantize_single_partition_passes(self, linear_4w):
        stats = ErrorStatistics.from_arrays(np.ones(4), np.ones(4), Tolerance())
        findings = fusions.RULES["bf16_export"](context(*linear_4w, numerics=stats, bf16_scales=True))
        assert statuses(findings) == {Status.PASS}

    def test_bf16_dequantize_fires(self, linear_4w):
        """Invariant: with dtype fp32 every dequantize_affine outputs float32."""
        stats = ErrorStatistics.from_arrays(np.ones(4), np.ones(4), Tolerance())
        ctx = context(*linear_4w, numerics=stats, dequantize_dtypes=["bfloat16"], partitions=2)
        messages = [f.message for f in fusions.RULES["bf16_export"](ctx) if f.status is Status.FAIL_CHECK]
        assert any("['bfloat16'], expected float32" in m for m in messages)
        assert any("2 partitions" in m for m in messages)
