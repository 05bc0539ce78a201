"""``et_vk.q8ta_linear`` and ``et_vk.q8ta_linear_gemv``: covered with launcher, reference and suite; both routes of
every case; each edge generator reaches its edge; on a device each case passes or fails as its expectation says."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff import reference
from vkdiff.cases.kernel_suites.quantized import q8ta_linear as suite
from vkdiff.cases.kernels import all_cases, below_bound, load_suites
from vkdiff.datamodel import schema_of
from vkdiff.device.launchers import LAUNCHERS
from vkdiff.executors import references
from vkdiff.harness import kernels
from vkdiff.verdicts import expectations

LINEAR_CASES = all_cases(r"^q8ta_linear\[")
GEMV_CASES = all_cases(r"^q8ta_linear_gemv\[")


def _case(case_id: str):
    (case,) = all_cases("^" + re.escape(case_id) + "$")
    return case


def _args(case_id: str) -> dict:
    case = _case(case_id)
    return load_suites()[case.op].make_args(case, np.random.default_rng(case.seed()))


def _expected(case_id: str) -> np.ndarray:
    return references.prepare_case(_case(case_id)).expected


def test_both_ops_are_registered_upstream_and_covered(et_tree):
    impl = et_tree / "backends/vulkan/runtime/graph/ops/impl"
    registered = set(re.findall(r"VK_REGISTER_OP\(\s*([\w.]+),", (impl / "Q8taLinear.cpp").read_text()
                                + (impl / "Q8taLinearGemv.cpp").read_text()))
    assert registered == {suite.LINEAR, suite.GEMV}
    suites = load_suites()
    for op in registered:
        assert op in LAUNCHERS and op in reference.OPS and op in suites, op


def test_every_case_runs_both_routes_on_its_ops_layout_with_the_schemas_arguments():
    for cases, op in ((LINEAR_CASES, suite.LINEAR), (GEMV_CASES, suite.GEMV)):
        assert 20 <= len(cases) <= 40 and len({c.id for c in cases}) == len(cases)
        assert {(c.dtype, c.storage, c.layout) for c in cases} == {("int8", "buffer", suite.LAYOUTS[op])}
        routes: dict[str, set[str]] = {}
        for case in cases:
            options = dict(case.options)
            routes.setdefault(case.data_id, set()).add(options["route"])
            assert options.get("profile") == suite.ROUTES[options["route"]]
            assert set(_args(case.id)) == set(schema_of(case.op).names), case.id
        wide = [d for d in routes if f"N{suite.WIDE_N}" in d]
        assert len(wide) == 1 and routes.pop(wide[0]) == {"dot"}
        assert all(r == {"dot", "fallback"} for r in routes.values())


def test_shapes_reach_the_tile_edges():
    linear = {(c.size("M"), c.size("K"), c.size("N")) for c in LINEAR_CASES}
    gemv = {(c.size("K"), c.size("N")) for c in GEMV_CASES}
    assert {n % 4 for _, _, n in linear} >= {0, 1, 2} and any(n % 8 == 4 for _, _, n in linear)
    assert any(m == 1 for m, _, _ in linear) and any(m % 4 == 3 for m, _, _ in linear)
    assert any(m > 8 * 4 and n > 8 * 8 for m, _, n in linear) and any(k == 4 for _, k, _ in linear)
    assert {k // 4 for k, _ in gemv} >= {1, 65, 257} and {n for _, n in gemv} >= {1, 6, 13, 20}
    assert {c.size("M") for c in GEMV_CASES} == {1}
    for cases in (LINEAR_CASES, GEMV_CASES):
        assert {c.size("B") for c in cases if "B" in c.sizes} == {1, 2}
        assert -(-max(c.size("N") for c in cases) // 4) > 16384


def test_data_edges():
    plain = _args("q8ta_linear[M13-K100-N20-int8-buffer-int8x4_4h4w-dot-bias]")
    x, w = plain["x"], plain["weights"]
    assert x.min() == -128 and x.max() == 127 and w.min() == -127 and w.max() == 127 and w.dtype == np.int8
    np.testing.assert_array_equal(plain["weight_sums"][:20], w.astype(np.int32).sum(axis=1))
    assert plain["weight_sums"].dtype == np.int32 and plain["weight_scales"].shape == plain["bias"].shape == (20,)
    odd = _args("q8ta_linear[M3-K4-N13-int8-buffer-int8x4_4h4w-dot-bias]")
    assert odd["weight_scales"].shape == (16,) and (odd["weight_scales"][13:] == 0).all()
    assert (odd["bias"][13:] == 0).all() and (odd["weight_sums"][13:] == 0).all()
    assert (plain["input_zero_point"], plain["output_zero_point"], plain["activation"]) == (-9, 5, "none")
    low = _args("q8ta_linear[M13-K100-N20-int8-buffer-int8x4_4h4w-dot-bias-zp_lo-relu]")
    assert (low["input_zero_point"], low["output_zero_point"], low["activation"]) == (-128, -128, "relu")
    high = _args("q8ta_linear_gemv[M1-K260-N20-int8-buffer-int8x4_4w-dot-bias-zp_hi]")
    assert (high["input_zero_point"], high["output_zero_point"]) == (127, 127)
    extreme = _args("q8ta_linear_gemv[M1-K1028-N20-int8-buffer-int8x4_4w-dot-bias-extreme]")["weights"]
    assert (np.abs(extreme.astype(np.int32)) == 127).all() and np.unique(extreme).size == 2
    assert _args("q8ta_linear[M13-K100-N20-int8-buffer-int8x4_4h4w-dot]")["bias"] is None
    assert _args("q8ta_linear[B2-M5-K32-N20-int8-buffer-int8x4_4h4w-dot-bias]")["x"].shape == (2, 5, 32)


def test_requantization_edges_show_in_the_reference():
    for case_id in ("q8ta_linear[M13-K100-N20-int8-buffer-int8x4_4h4w-dot-bias-saturate]",
                    "q8ta_linear_gemv[M1-K260-N20-int8-buffer-int8x4_4w-dot-bias-saturate]"):
        out = _expected(case_id)
        assert (out == -128).mean() >= 0.25 and (out == 127).mean() >= 0.25, case_id
    plain = _expected("q8ta_linear[M40-K260-N68-int8-buffer-int8x4_4h4w-dot-bias]")
    assert ((plain == -128) | (plain == 127)).mean() < 0.02 and np.unique(plain).size > 100
    relu = _expected("q8ta_linear[M13-K100-N20-int8-buffer-int8x4_4h4w-dot-bias-zp_lo-relu]")
    assert relu.min() == -128 and (relu == -128).mean() > 0.2 and np.unique(relu).size > 20
    assert _expected("q8ta_linear_gemv[M1-K260-N20-int8-buffer-int8x4_4w-dot-bias-zp_hi]").max() == 127


def test_below_the_bound_shrinks_rows_and_keeps_the_graphs_scalars():
    case = _case("q8ta_linear[M13-K100-N20-int8-buffer-int8x4_4h4w-dot-bias-saturate]")
    smaller = below_bound(case)
    assert [c.size("M") for c in smaller] == [7, 12, 1]
    built = _args(case.id)
    for small in smaller:
        args = load_suites()[case.op].make_args(small, np.random.default_rng(small.seed()))
        assert args["x"].shape == (small.size("M"), 100)
        for name in ("input_scale", "input_zero_point", "output_scale", "output_zero_point", "activation"):
            assert args[name] == built[name], name
    assert all(not below_bound(c) for c in GEMV_CASES)


DEVICE_CASES = [c for c in LINEAR_CASES + GEMV_CASES
                if any(key in c.id for key in ("M13-K100-N20", "M1-K260-N20", "B2-", "N131076", "K1028-N68", "K4-"))]


@requires_tree
@requires_vulkan
@pytest.mark.parametrize("case", DEVICE_CASES, ids=lambda c: c.id)
def test_case_passes_or_is_a_known_bug(et_ctx, case):
    """PASS with the variant its route names (and every smaller run passing), or the failure an entry explains."""
    result = expectations.annotate(kernels.run_case(et_ctx, case))
    assert not expectations.counts_as_failure(result), result.reason
    stem = "q8ta_linear_gemv" if case.op == suite.GEMV else "q8ta_linear"
    fallback = "_fallback" if dict(case.options)["route"] == "fallback" else ""
    if result.status in ("PASS", "FAIL_NUMERIC"):
        assert result.shader == f"{stem}{fallback}_float"
    if result.status == "PASS" and case.op == suite.LINEAR and case.size("M") > 1:
        runs = result.metrics["below_bound"]
        assert [r["sizes"]["M"] for r in runs] == [c.size("M") for c in below_bound(case)]
        assert all(r["status"] == "PASS" for r in runs)
