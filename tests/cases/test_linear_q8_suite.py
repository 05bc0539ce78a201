"""The float-activation quantized linears (issue 23): every op ``QuantizedLinearQCSNW.cpp``, ``QuantizedLinear.cpp``
and ``QuantizedLinearRequant.cpp`` register has a launcher, a reference and a suite; every case's declared route is
the one the ported C++ picks and every route is reached in both storages; each edge generator reaches its edge."""

from __future__ import annotations

import dataclasses
import re
from types import SimpleNamespace

import numpy as np
import pytest

from tests.testutils import coverage_gaps
from vkdiff.cases.kernel_suites.quantized import linear_q8
from vkdiff.cases.kernels import all_cases, below_bound, suite_of
from vkdiff.device.graph.vtensor import TensorSpec
from vkdiff.device.launchers.quantized_linear_qcsnw import can_use_tiled_impl, tile_rows
from vkdiff.device.runtime.routing import profiles

QCSNW = r"^(weight_int8pack_mm|linear_qcs4w)\["
Q8 = r"^(linear_q8csw|linear_q8ta_q8csw)\["
REQUANT = r"^q4gsw_requant\["
ALL = r"^(weight_int8pack_mm|linear_qcs4w|linear_q8csw|linear_q8ta_q8csw|q4gsw_requant)\["


def _args(case) -> dict:
    return suite_of(case).make_args(case, np.random.default_rng(case.seed()))


def _case(case_id: str):
    return next(c for c in all_cases("^" + re.escape(case_id) + "$"))


def _spec(sizes, case) -> SimpleNamespace:
    return SimpleNamespace(spec=TensorSpec(tuple(sizes), "float32", case.storage, case.layout))


@pytest.mark.parametrize("cpp,count", [("QuantizedLinearQCSNW.cpp", 2), ("QuantizedLinear.cpp", 3),
                                       ("QuantizedLinearRequant.cpp", 1)])
def test_every_op_the_cpp_registers_is_covered(et_tree, cpp, count):
    registered, gaps = coverage_gaps(et_tree, cpp)
    assert len(registered) == count and not gaps


def _qcsnw_pick(case) -> str | None:
    """The route the ported ``can_use_tiled_impl`` / ``can_use_coop_impl`` / tile-row choice give (no device)."""
    args = _args(case)
    x = _spec(args["self"].shape, case)
    out = _spec((*args["self"].shape[:-1], case.size("N")), case)
    if not can_use_tiled_impl(x, out):
        return "fallback" if case.name == "weight_int8pack_mm" else None
    m = case.size("M")
    return "coop" if m == 1 else f"tiled_o4x{tile_rows(m)}"


def test_every_declared_qcsnw_route_is_the_ported_pick():
    wrong = {c.id: _qcsnw_pick(c) for c in all_cases(QCSNW) if dict(c.options).get("route") != _qcsnw_pick(c)}
    assert not wrong


def test_every_declared_q8_route_is_the_ported_pick():
    for case in all_cases(Q8):
        options = dict(case.options)
        if case.size("K") % 4:
            assert "route" not in options, case.id  # refused by quantized_linear_impl
            continue
        dot = profiles()[options.get("profile", "native")]["int8_dot_product"]
        expected = "int8" if case.name == "linear_q8ta_q8csw" and dot else "tiled"
        assert options["route"] == expected, case.id


def test_every_route_is_reached_in_both_storages():
    routes = {(c.name, dict(c.options).get("route"), c.storage) for c in all_cases(ALL)}
    for storage in ("buffer", "texture3d"):
        for name in ("weight_int8pack_mm", "linear_qcs4w"):
            assert {(name, f"tiled_o4x{r}", storage) for r in (1, 2, 3, 4)} | {(name, "coop", storage)} <= routes
        assert {("weight_int8pack_mm", "fallback", storage), ("linear_q8csw", "tiled", storage),
                ("linear_q8ta_q8csw", "int8", storage), ("linear_q8ta_q8csw", "tiled", storage)} <= routes
        assert any(c.layout == "channels" for c in all_cases(QCSNW) if c.storage == "texture3d")
    wide = {c.name for c in all_cases(ALL) if ("weight_storage", "buffer") in c.options}
    assert wide == {"weight_int8pack_mm", "linear_q8csw", "linear_q8ta_q8csw"}
    assert {c.storage for c in all_cases(REQUANT)} == {"buffer", "texture3d"}


def test_sizes_reach_unaligned_k_and_n_one_row_and_full_tiles():
    for pattern in (QCSNW, Q8):
        cases = all_cases(pattern)
        assert {c.size("K") % 4 for c in cases} >= {0, 2} and {c.size("N") % 4 for c in cases} >= {0, 1}
        assert {c.size("N") % 8 for c in cases} >= {0, 4}
        assert min(c.size("M") for c in cases) == 1 and max(c.size("M") for c in cases) >= 40
    assert any(c.sizes.get("B", 1) > 1 for c in all_cases(Q8))
    assert {c.size("N") % 8 for c in all_cases(REQUANT)} >= {0, 4}


def test_int8_weights_hold_the_extreme_codes():
    plain = _args(_case("weight_int8pack_mm[M4-K64-N16-fp32-buffer-tiled_o4x4]"))["mat2"]
    assert all({-128, -127, 127} <= set(row.tolist()) for row in plain)
    extreme = _args(_case("weight_int8pack_mm[M4-K64-N16-fp32-buffer-tiled_o4x4-extreme]"))["mat2"]
    assert set(np.unique(extreme).tolist()) == {-128, -127, 127}
    q8 = _args(_case("linear_q8ta_q8csw[M8-K64-N16-fp32-buffer-int8-extreme]"))["weights"]
    assert set(np.unique(q8).tolist()) == {-127, 127}
    packed = _args(_case("linear_qcs4w[M4-K64-N16-fp32-buffer-tiled_o4x4]"))["weight"].astype(int)
    for column, (high, low) in ((0, (0, 15)), (-1, (15, 0))):  # codes -8 and 7 in both nibbles of every row
        assert set((packed[:, column] >> 4).tolist()) == {high} and set((packed[:, column] & 0xF).tolist()) == {low}


@pytest.mark.parametrize("edge,zero", [("zp_lo", -128), ("zp_hi", 127)])
def test_zero_points_reach_the_int8_extremes(edge, zero):
    args = _args(_case(f"linear_q8ta_q8csw[M8-K64-N16-fp32-buffer-int8-{edge}]"))
    assert args["input_zero_point"] == zero
    from vkdiff.reference.quantized.quant import quantize_per_tensor

    q = quantize_per_tensor(args["x"], args["input_scale"], zero)
    assert ((args["x"] >= 0).all() and q.min() == -128) if edge == "zp_lo" else ((args["x"] <= 0).all() and
                                                                               q.max() == 127)


def test_saturating_scales_clip_most_activation_codes():
    from vkdiff.reference.quantized.quant import quantize_per_tensor

    args = _args(_case("linear_q8ta_q8csw[M8-K64-N16-fp32-buffer-int8-saturate]"))
    q = quantize_per_tensor(args["x"], args["input_scale"], args["input_zero_point"]).astype(int)
    assert ((q == -128) | (q == 127)).mean() > 0.5


def test_requant_edges_clamp_zero_and_stay_off_ties():
    base = _args(_case("q4gsw_requant[N32-K64-g32-int32-buffer]"))
    quotient = base["latent"] / base["scales"].T[:, np.arange(64) // 32]
    assert (np.abs(quotient - np.floor(quotient) - 0.5) >= 0.19).all() and np.abs(quotient).max() > 8.5
    saturated = _args(_case("q4gsw_requant[N32-K64-g32-int32-buffer-saturate]"))
    ratio = saturated["latent"] / saturated["scales"].T[:, np.arange(64) // 32]
    assert (np.abs(ratio) > 40).all()
    assert (_args(_case("q4gsw_requant[N32-K64-g32-int32-buffer-zero_scale]"))["scales"] == 0).any()
    assert _args(_case("q4gsw_requant[N16-K32-g32-int32-buffer-half]"))["latent"].dtype == np.float16


def test_below_the_bound_runs_over_m_where_the_cpp_resizes():
    case = _case("weight_int8pack_mm[M13-K64-N64-fp32-buffer-tiled_o4x1]")
    assert [c.size("M") for c in below_bound(case)] == [7, 12, 1]  # 12: a 3-row global size, a 1-row shader
    assert suite_of(case).resizable_of(case) == ("M",)
    q8ta = {c.id: suite_of(c).resizable_of(c) for c in all_cases(r"^linear_q8ta_q8csw\[")}
    assert sum(1 for r in q8ta.values() if r) == 6  # one int8-route case per storage, the weight-only route
    assert not suite_of(_case("q4gsw_requant[N16-K32-g32-int32-buffer]")).resizable_of(
        _case("q4gsw_requant[N16-K32-g32-int32-buffer]"))


def test_q8ta_qparams_are_fixed_per_case_so_smaller_runs_keep_them():
    case = _case("linear_q8ta_q8csw[M8-K64-N16-fp32-buffer-int8-saturate]")
    smaller = dataclasses.replace(case, shape=(("M", 3), ("K", 64), ("N", 16)))
    assert _args(case)["input_scale"] == _args(smaller)["input_scale"] == linear_q8.input_qparams(case)[0]


def test_inputs_vary_and_storages_share_them():
    for case in all_cases(ALL)[::5]:
        arrays = [v for v in _args(case).values() if isinstance(v, np.ndarray)]
        assert all(np.unique(a).size > 1 for a in arrays if a.size > 1), case.id
    one = _args(_case("linear_q8csw[M4-K64-N16-fp32-buffer-tiled]"))
    other = _args(_case("linear_q8csw[M4-K64-N16-fp32-texture3d-tiled]"))
    np.testing.assert_array_equal(one["x"], other["x"])


def test_case_counts_stay_within_budget():
    counts = {name: len(all_cases(rf"^{name}\[")) for name in ("weight_int8pack_mm", "linear_qcs4w", "linear_q8csw",
                                                                "linear_q8ta_q8csw", "q4gsw_requant")}
    assert all(10 <= n <= 50 for n in counts.values()), counts
