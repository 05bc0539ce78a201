"""``et_vk.apply_rotary_emb_interleaved`` and ``etvk.choose_qparams_per_row``: covered with launcher, reference and
suite; every storage, dtype and zero-point route reached; the edge inputs are where the suites say; on a device
each case passes or fails as its ``expectations.yaml`` entry says."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff import reference
from vkdiff.cases.kernel_suites.quantized import choose_qparams
from vkdiff.cases.kernel_suites.nn import rotary_interleaved
from vkdiff.cases.kernels import all_cases, below_bound, load_suites
from vkdiff.datamodel import schema_of
from vkdiff.device.launchers import LAUNCHERS
from vkdiff.harness import kernels
from vkdiff.verdicts import expectations

INTERLEAVED = "et_vk.apply_rotary_emb_interleaved.default"
PER_ROW = "etvk.choose_qparams_per_row.default"
ROPE_CASES = all_cases(r"^apply_rotary_emb_interleaved\[")
ROW_CASES = all_cases(r"^choose_qparams_per_row\[")


def _args(case_id: str) -> dict:
    (case,) = all_cases("^" + re.escape(case_id) + "$")
    return load_suites()[case.op].make_args(case, np.random.default_rng(case.seed()))


def test_both_ops_are_registered_upstream_and_covered(et_tree):
    impl = et_tree / "backends/vulkan/runtime/graph/ops/impl"
    registered = set(re.findall(r"VK_REGISTER_OP\(\s*([\w.]+),", (impl / "RotaryEmbedding.cpp").read_text()
                                + (impl / "ChooseQParams.cpp").read_text()))
    assert {INTERLEAVED, PER_ROW} <= registered
    suites = load_suites()
    for op in registered:
        assert op in LAUNCHERS and op in reference.OPS and op in suites, op


def test_cases_reach_every_storage_dtype_and_zero_point_route():
    for cases in (ROPE_CASES, ROW_CASES):
        assert 10 <= len(cases) <= 40
        assert {(c.dtype, c.storage) for c in cases} == {(d, s) for d in ("fp32", "fp16")
                                                          for s in ("buffer", "texture3d")}
        for case in cases:
            assert set(_args(case.id)) == set(schema_of(case.op).names), case.id
    fpzp = [c for c in ROW_CASES if c.has("fpzp")]
    assert {c.dtype for c in fpzp} == {"fp32", "fp16"}
    assert all(_args(c.id)["input_zps"].dtype == c.np_dtype for c in fpzp)
    assert _args("choose_qparams_per_row[M7-K64-fp32-buffer]")["input_zps"].dtype == np.int8


def test_rope_edges():
    sizes = {(c.size("T"), c.size("C")) for c in ROPE_CASES}
    assert any(t == 1 for t, _ in sizes) and any(c % 8 == 4 for _, c in sizes) and (9, 4) in sizes
    plain = _args("apply_rotary_emb_interleaved[B1-T7-C16-fp32-buffer]")
    x = plain["x"]
    assert (x[0, 0] == 0).all() and (x[-1, -1] == x[-1, -1, 0]).all() and np.ptp(x[0, 1]) > 0
    assert plain["freqs_cis"].shape == (7, 16)
    freqs = _args("apply_rotary_emb_interleaved[B2-T5-C12-fp16-buffer-f4d]")["freqs_cis"]
    assert freqs.shape == (1, 5, 6, 2)
    np.testing.assert_allclose(np.hypot(freqs[..., 0], freqs[..., 1]), 1.0, atol=1e-3)
    big = _args("apply_rotary_emb_interleaved[B3-T4-C36-fp16-buffer-big]")["x"].astype(np.float64)
    norms = np.hypot(big[..., 0::2], big[..., 1::2])
    live = norms[norms > 0]
    assert live.min() >= rotary_interleaved.BIG_NORM[0] * 0.99 and live.max() > 3.0e4 and np.isfinite(big).all()


def test_per_row_edges():
    x = _args("choose_qparams_per_row[M7-K64-fp32-buffer]")["input"]
    assert (x[0] > 0).all() and (x[1] < 0).all() and (x[2] == 0).all() and (x[3] == x[3, 0]).all() and x[3, 0] < 0
    assert np.ptp(x[4]) < 255 * 6.1e-5 and np.abs(x[5]).min() >= 256 and np.abs(x[5]).max() > 3.0e4
    assert np.ptp(x[6]) > 0
    tail = _args("choose_qparams_per_row[M7-K18-fp16-texture3d]")["input"]
    assert tail[-1, -1] == tail[-1].max() and tail[-1, -1] > tail[-1, :16].max()
    assert _args("choose_qparams_per_row[M1-K64-fp16-buffer]")["input"].shape == (1, 64)
    assert (_args("choose_qparams_per_row[M7-K64-fp32-buffer-q4]")["quant_min"],
            _args("choose_qparams_per_row[M13-K256-fp32-buffer-qnone]")["quant_max"]) == (-8, None)


def test_below_the_bound_shrinks_tokens_and_rows():
    (rope,) = all_cases(r"^apply_rotary_emb_interleaved\[B1-T7-C16-fp32-buffer\]$")
    assert [c.size("T") for c in below_bound(rope)] == [4, 6, 1]
    (rows,) = all_cases(r"^choose_qparams_per_row\[M13-K256-fp32-buffer\]$")
    assert [c.size("M") for c in below_bound(rows)] == [7, 12, 1]
    small = load_suites()[PER_ROW].make_args(below_bound(rows)[0], np.random.default_rng(0))
    assert small["input"].shape == (7, 256) and (small["input"][2] == 0).all()


DEVICE_CASES = [c for c in ROPE_CASES + ROW_CASES if c.has("big") or c.has("fpzp") or "K18" in c.id
                or c.id.startswith("apply_rotary_emb_interleaved[B2-T5-C12")]


@requires_tree
@requires_vulkan
@pytest.mark.parametrize("case", DEVICE_CASES, ids=lambda c: c.id)
def test_case_passes_or_is_a_known_bug(et_ctx, case):
    """PASS with every element written and the variant the C++ names, or the failure an entry explains."""
    result = expectations.annotate(kernels.run_case(et_ctx, case))
    assert not expectations.counts_as_failure(result), result.reason
    dtype = "half" if case.dtype == "fp16" else "float"
    if case.op == INTERLEAVED:
        assert result.shader == f"apply_rotary_emb_interleaved_{case.storage}_{dtype}"
    else:
        zp = "zpinherit" if case.has("fpzp") else "zpint8"
        assert result.shader == f"choose_qparams_per_row_{case.storage}_{dtype}_{zp}"
    if result.status == "PASS":
        assert all(o["unwritten"] == 0 for o in result.metrics.get("outputs") or [result.metrics])
        assert result.metrics.get("below_bound")
