"""The quantized convolutions of ``QuantizedConvolution.cpp``: every op it registers (the test-only
``etvk.test_conv2d_q8ta_q8csw_q8to`` aside) has a launcher, a reference and a suite; every route the C++ takes has
cases; the route pickers follow the C++; each edge generator reaches its edge."""

from __future__ import annotations

import re

import numpy as np
import pytest

from vkdiff import reference
from vkdiff.cases.kernel_suites.quantized import quantized_conv as qc
from vkdiff.cases.kernels import below_bound, load_suites, suite_of
from vkdiff.datamodel import schema_of
from vkdiff.device.launchers import LAUNCHERS
from vkdiff.device.launchers.quantized_convolution import (create_conv2d_params, is_s1p0d1_pointwise,
                                                          should_use_im2col, spec_constants)
from vkdiff.reference.quantized.quant import quantize_per_tensor

OPS = (qc.Q8CSW, qc.Q8TA, qc.Q8TO, qc.Q8TO_DW)
TEST_ONLY = "etvk.test_conv2d_q8ta_q8csw_q8to.default"


def _cases(op: str) -> list:
    return list(load_suites()[op].cases())


def _args(case) -> dict:
    return suite_of(case).make_args(case, np.random.default_rng(case.seed()))


def _route(case) -> str | None:
    return dict(case.options).get("route")


def test_every_op_the_file_registers_has_a_launcher_a_reference_and_a_suite(et_tree):
    text = (et_tree / "backends/vulkan/runtime/graph/ops/impl/QuantizedConvolution.cpp").read_text()
    registered = set(re.findall(r"VK_REGISTER_OP\(\s*([\w.]+),", text))
    assert registered == {*OPS, TEST_ONLY}
    for op in OPS:
        assert op in LAUNCHERS and op in reference.OPS, op
        assert len(_cases(op)) >= 6 and set(_args(_cases(op)[0])) == set(schema_of(op).names), op


def test_every_route_has_cases():
    routes = {op: {_route(c) for c in _cases(op)} for op in OPS}
    assert routes[qc.Q8CSW] == {"weight_only", None}
    assert routes[qc.Q8TA] == {"int8", "weight_only"}
    assert routes[qc.Q8TO] == {"pw", "im2col", "direct", "dw", "general", None}
    assert routes[qc.Q8TO_DW] == {"dw", "im2col"}
    no_dot = [c for c in _cases(qc.Q8TA) if _route(c) == "weight_only"]
    assert no_dot and all(dict(c.options)["profile"] == "no-dot-product" and c.has("ongrid") for c in no_dot)
    layouts = {c.layout for c in _cases(qc.Q8TO)}
    assert layouts == {"int8x4_4w4c", "int8x4_4c", "int8x4_4c1w", "int8x4_4w"}
    assert any(dict(c.options).get("weight_storage") == "buffer" for c in _cases(qc.Q8CSW))
    assert any(c.sizes["C"] == qc.WIDE_C for c in _cases(qc.Q8TO))


def test_route_pickers_follow_the_cpp():
    assert should_use_im2col([1, 1], 4) and should_use_im2col([3, 3], 1) and should_use_im2col([2, 5], 1)
    assert not should_use_im2col([3, 3], 2) and not should_use_im2col([1, 11], 1) and not should_use_im2col([5, 5], 1)
    pw = {"kernel_size": [1, 1], "stride": [1, 1], "padding": [0, 0], "dilation": [1, 1]}
    assert is_s1p0d1_pointwise(pw) and not is_s1p0d1_pointwise({**pw, "kernel_size": [3, 3]})
    assert not is_s1p0d1_pointwise({**pw, "stride": [2, 2]}) and not is_s1p0d1_pointwise({**pw, "padding": [1, 1]})
    assert is_s1p0d1_pointwise({**pw, "stride": [1, 2]}) and is_s1p0d1_pointwise({**pw, "padding": [0, 1]})


def test_conv2d_params_and_spec_constants_follow_create_conv2d_params():
    args = {"kernel_size": [3, 5], "stride": [2, 1], "padding": [1, 2], "dilation": [1, 3], "groups": 2}
    p = create_conv2d_params((1, 6, 9, 11), (1, 8, 5, 3), args)
    assert (p.kernel_size, p.stride, p.padding, p.dilation) == ((5, 3), (1, 2), (2, 1), (3, 1))
    assert (p.in_channels_per_group, p.out_channels_per_group, p.logical_K_per_group, p.K_per_group) == (3, 4, 45, 48)
    assert (p.K4_per_group, p.logical_K, p.K, p.K4) == (12, 90, 96, 24)
    spec = spec_constants(p, apply_bias=0)
    assert list(spec) == list(range(3, 20)) and spec[3] == 0 and spec[19] == 2 and spec[17] == 90


def test_zero_points_saturation_and_extreme_weights_reach_their_edges():
    cases = [c for op in OPS for c in _cases(op)]
    for case in cases:
        args = _args(case)
        if case.has("zp_lo") or case.has("zp_hi"):
            assert args["input_zero_point"] == (-128 if case.has("zp_lo") else 127), case.id
        if case.has("ozp_lo") or case.has("ozp_hi"):
            assert args["output_zero_point"] == (-128 if case.has("ozp_lo") else 127), case.id
        w = args["weights"].astype(np.int64)
        if case.has("extreme"):
            assert set(np.unique(w)) <= {-127, 0, 127} and (np.abs(w) == 127).mean() > 0.5, case.id
        elif case.sizes["C"] < qc.WIDE_C:
            assert w.min() == -127 and w.max() == 127 and w.min() > -128, case.id
    assert any(c.has("zp_lo") for c in cases) and any(c.has("zp_hi") for c in cases)
    assert any(c.has("ozp_lo") for c in cases) and any(c.has("ozp_hi") for c in cases)
    saturated = [reference.evaluate(c.op, _args(c)) for c in cases if c.has("saturate")]
    assert saturated and all(np.isin(out, (-128, 127)).mean() > 0.5 for out in saturated)
    plain = [reference.evaluate(c.op, _args(c)) for c in _cases(qc.Q8TO) if set(c.flags) <= {"bias"}][:6]
    assert all(np.isin(out, (-128, 127)).mean() < 0.2 and np.unique(out).size > 10 for out in plain if out.size > 64)


def test_weights_are_padded_as_the_pattern_pads_and_sums_match():
    for case in (c for op in OPS for c in _cases(op) if c.sizes["C"] < qc.WIDE_C):
        args = _args(case)
        w, z = args["weights"], case.sizes
        if w.ndim == 3:
            assert w.shape == (z["K"], z["K"], -(-z["C"] // 4) * 4) and not w[..., z["C"]:].any(), case.id
            sums = w.sum(axis=(0, 1), dtype=np.int64)
        else:
            logical = z["K"] * z["K"] * z["C"] // z["g"]
            assert w.shape == (z["O"], -(-logical // 4) * 4) and not w[:, logical:].any(), case.id
            sums = w.sum(axis=1, dtype=np.int64)
        if "weight_sums" in args:
            assert args["weight_sums"].dtype == np.int32 and args["weight_sums"].size % 4 == 0
            np.testing.assert_array_equal(args["weight_sums"][: sums.size], sums)
        oc = z["C"] if w.ndim == 3 else z["O"]
        assert args["weight_scales"].size % 4 == 0 and (args["weight_scales"][:oc] > 0).all()


def test_channels_geometry_groups_and_sizes_cover_the_edges():
    cases = [c for op in OPS for c in _cases(op)]
    sizes = [c.sizes for c in cases]
    assert {z["C"] % 4 for z in sizes} == {0, 1, 2, 3} and {z["O"] % 4 for z in sizes} == {0, 1, 2, 3}
    assert {z["K"] for z in sizes} == {1, 3, 5}
    assert any(z["s"] > 1 for z in sizes) and any(z["p"] > 0 for z in sizes) and any(z["d"] > 1 for z in sizes)
    assert any(z.get("sw", z["s"]) != z["s"] for z in sizes)
    kinds = {"dw" if z["g"] == z["C"] > 1 else "grouped" if z["g"] > 1 else "one" for z in sizes}
    assert kinds == {"dw", "grouped", "one"}
    assert any(z["g"] > 1 and (z["C"] // z["g"]) % 4 for z in sizes if z["g"] != z["C"])
    assert any(z["H"] == z["W"] == 1 for z in sizes) and any(z.get("N") == 2 for z in sizes)
    assert {c.has("bias") for c in cases} == {True, False}


def test_inputs_are_never_degenerate_and_on_grid_inputs_round_trip():
    for case in (c for op in OPS for c in _cases(op) if c.sizes["C"] < qc.WIDE_C):
        x = _args(case)["x"]
        assert np.unique(x).size > min(x.size // 2, 100), case.id
        if case.op in (qc.Q8TO, qc.Q8TO_DW):
            assert x.dtype == np.int8 and x.min() == -128 and x.max() == 127, case.id
    for case in (c for c in _cases(qc.Q8TA) if c.has("ongrid")):
        args = _args(case)
        q = quantize_per_tensor(args["x"], args["input_scale"], args["input_zero_point"]).astype(np.float64)
        back = ((q - args["input_zero_point"]) * np.float32(args["input_scale"])).astype(np.float32)
        np.testing.assert_array_equal(back, args["x"])


@pytest.mark.parametrize("op", OPS)
def test_below_the_bound_keeps_the_built_scalars_and_shrinks_valid_sizes(op):
    resizable = [c for c in _cases(op) if suite_of(c).resizable_of(c)]
    assert resizable
    for case in resizable:
        z = case.sizes
        assert 2 * z["p"] >= z["d"] * (z["K"] - 1)
        big = _args(case)
        for small in below_bound(case):
            args = _args(small)
            scalars = {k: v for k, v in args.items() if not isinstance(v, np.ndarray)}
            assert scalars == {k: v for k, v in big.items() if not isinstance(v, np.ndarray)}, small.id
            reference.evaluate(op, args)
    fixed = [c for c in _cases(op) if not suite_of(c).resizable_of(c)]
    assert all(2 * c.sizes["p"] < c.sizes["d"] * (c.sizes["K"] - 1) or c.sizes["H"] == c.sizes["W"] == 1
               or c.sizes["C"] == qc.WIDE_C for c in fixed)
