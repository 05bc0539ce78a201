"""The static-int8 convolutions (``Q8taConv2d*.cpp``): every op the files register has a launcher, a reference and a
suite; every route and int8x4 layout the C++ accepts has cases; the edge generators reach their edges; a zero point
off by one in what the launcher passes to the shader is caught."""

from __future__ import annotations

import re
import types

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff import reference
from vkdiff.cases.kernel_suites.quantized import q8ta_conv as suite
from vkdiff.cases.kernels import below_bound, load_suites, suite_of
from vkdiff.datamodel import Status, schema_of
from vkdiff.device.launchers import LAUNCHERS, q8ta_conv2d, q8ta_conv2d_dw, q8ta_conv2d_transposed
from vkdiff.harness import kernels
from vkdiff.reference.quantized import q8ta_conv as ref

FILES = ("Q8taConv2d.cpp", "Q8taConv2dPW.cpp", "Q8taConv2dIm2Col.cpp", "Q8taConv2dDW.cpp", "Q8taConv2dTransposed.cpp")
OPS = (suite.CONV, suite.GENERAL, suite.IM2COL, suite.PW, suite.DW, suite.TRANSPOSED)


def _cases(op: str | None = None) -> list:
    return [c for o in ([op] if op else OPS) for c in load_suites()[o].cases()]


def _args(case) -> dict:
    return suite_of(case).make_args(case, np.random.default_rng(case.seed()))


def _option(case, name: str, default=None):
    return dict(case.options).get(name, default)


def test_every_op_the_files_register_has_a_launcher_a_reference_and_a_suite(et_tree):
    impl = et_tree / "backends/vulkan/runtime/graph/ops/impl"
    registered = {op for name in FILES for op in re.findall(r"VK_REGISTER_OP\(([\w.]+),", (impl / name).read_text())}
    assert registered == set(OPS)
    for op in registered:
        assert op in LAUNCHERS and op in reference.OPS, op
        assert len(_cases(op)) >= 6, op


def test_every_route_has_cases_with_and_without_int8_dot_product():
    routes = {(c.op, _option(c, "route")) for c in _cases()}
    for op, route in ((suite.CONV, "general"), (suite.CONV, "im2col"), (suite.GENERAL, "general"),
                      (suite.IM2COL, "im2col"), (suite.PW, "pw"), (suite.TRANSPOSED, "transposed")):
        assert {(op, route), (op, f"{route}_fallback")} <= routes, (op, route)
    assert (suite.DW, "dw") in routes
    for case in _cases():
        fallback = _option(case, "route").endswith("_fallback")
        assert fallback == (_option(case, "profile") == suite.NO_DOT), case.id
    mali = [c for c in _cases(suite.CONV) if _option(c, "profile") == "mali"]
    assert mali and all(c.sizes["g"] > 1 and _option(c, "route") == "im2col" for c in mali)


def test_every_int8x4_layout_the_cpp_accepts_is_covered_on_both_sides():
    for op in OPS:
        cases = _cases(op)
        inputs = {c.layout for c in cases}
        outputs = {_option(c, "out_layout", c.layout) for c in cases}
        assert outputs == set(suite.LAYOUTS), op
        assert inputs == ({"int8x4_4w4c"} if op == suite.PW else set(suite.LAYOUTS)), op
    assert all(c.dtype == "int8" and c.storage == "buffer" for c in _cases())


def test_route_pickers_follow_the_cpp():
    graph = lambda vendor: types.SimpleNamespace(route=types.SimpleNamespace(vendor=vendor))  # noqa: E731
    tensor = lambda *sizes: types.SimpleNamespace(spec=types.SimpleNamespace(sizes=sizes))  # noqa: E731
    desktop, mali = graph("nvidia"), graph("arm")
    assert q8ta_conv2d.use_im2col(desktop, tensor(1, 8, 9, 11), tensor(1, 12, 9, 11), 1)
    assert not q8ta_conv2d.use_im2col(desktop, tensor(1, 8, 65, 65), tensor(1, 8, 65, 65), 1)
    assert q8ta_conv2d.use_im2col(desktop, tensor(1, 32, 66, 66), tensor(1, 8, 66, 66), 1)
    assert not q8ta_conv2d.use_im2col(desktop, tensor(1, 8, 9, 7), tensor(1, 8, 9, 7), 2)
    assert q8ta_conv2d.use_im2col(mali, tensor(1, 8, 9, 7), tensor(1, 8, 9, 7), 2)
    assert not q8ta_conv2d.use_im2col(mali, tensor(1, 6, 9, 7), tensor(1, 8, 9, 7), 1)
    for case in _cases(suite.CONV):
        z = case.sizes
        h, w = (ref._out_size(z[d], z[f"K{d}"], *_hw_geometry(z, d)) for d in ("H", "W"))
        expected = ref.uses_im2col(z["C"], z["g"], (h, w), mali=_option(case, "profile") == "mali")
        assert _option(case, "route").startswith("im2col" if expected else "general"), case.id


def _hw_geometry(z: dict, dim: str) -> tuple[int, int, int]:
    """(stride, padding, dilation) of a case along ``dim``."""
    return (z.get("sw", z["s"]), z.get("pw", z["p"]), z["d"]) if dim == "W" else (z["s"], z["p"], z["d"])


def test_local_sizes_follow_the_cpp():
    out = lambda h: types.SimpleNamespace(spec=types.SimpleNamespace(sizes=(1, 96, h, 96)))  # noqa: E731
    pick = q8ta_conv2d.pick_q8ta_conv2d_local_wg_size
    assert pick(out(100), (24, 100, 24)) == (8, 1, 8) and pick(out(99), (24, 99, 24)) == (4, 2, 8)
    assert pick(out(1), (6, 1, 6)) == (8, 1, 8) and pick(out(4), (1, 4, 3)) == (1, 1, 64)
    assert pick(out(4), (3, 4, 1)) == (64, 1, 1) and pick(out(4), (3, 4, 3)) == (16, 1, 4)
    assert q8ta_conv2d_dw.pick_q8ta_conv2d_dw_local_wg_size((1, 4, 3)) == (16, 1, 4)
    assert q8ta_conv2d_transposed.pick_q8ta_conv2d_transposed_local_wg_size((1, 4, 3)) == (1, 1, 64)
    global_wgs = {q8ta_conv2d.pick_q8ta_conv2d_global_wg_size(
        types.SimpleNamespace(spec=types.SimpleNamespace(sizes=(1, c.sizes["O"], c.sizes["H"], c.sizes["W"]))))
        for c in _cases(suite.CONV) if _option(c, "route").startswith("general")}
    assert any(x >= 4 and y >= 2 and z >= 8 for x, y, z in global_wgs)


def test_arguments_follow_the_schemas_and_the_pattern():
    for case in _cases():
        args = _args(case)
        assert set(args) == set(schema_of(case.op).names), case.id
        assert args["x"].dtype == np.int8 and {-128, 127} <= set(args["x"].reshape(-1)[:2].tolist())
        assert np.unique(args["x"]).size > min(8, args["x"].size // 2), case.id
        weights = args["weights"]
        assert weights.dtype == np.int8 and weights.min() >= -127 and 127 in np.abs(weights)
        sums = ref.dw_weight_sums(weights) if case.op == suite.DW else ref.weight_sums_of(weights)
        np.testing.assert_array_equal(args["weight_sums"], sums)
        assert args["weight_scales"].size % 4 == 0 and args["weight_sums"].size % 4 == 0
        assert (args["bias"] is not None) == case.has("bias")
        assert args["activation"] == ("relu" if case.has("relu") else "none")


def test_the_suites_pattern_layouts_are_the_references():
    """The suite writes weights as ``vkdiff.reference.quantized.q8ta_conv`` does (which is checked against the pattern)."""
    rng = np.random.default_rng(5)
    for op in OPS:
        case = next(c for c in _cases(op) if c.sizes["g"] > 1 or op == suite.DW)
        z = case.sizes
        if op == suite.DW:
            weight = rng.integers(-127, 128, (z["C"], 1, z["KH"], z["KW"])).astype(np.int8)
            expected = ref.dw_weight(weight)
        elif op == suite.TRANSPOSED:
            weight = rng.integers(-127, 128, (z["C"], z["O"] // z["g"], z["KH"], z["KW"])).astype(np.int8)
            expected = ref.transposed_weight_matrix(weight, z["g"])
        else:
            weight = rng.integers(-127, 128, (z["O"], z["C"] // z["g"], z["KH"], z["KW"])).astype(np.int8)
            expected = ref.conv_weight_matrix(weight)
        np.testing.assert_array_equal(suite.pattern_weight(case, weight), expected)


def test_zero_points_reach_both_int8_extremes_and_the_weights_127():
    z_in = {(_args(c)["input_zero_point"], _args(c)["output_zero_point"]) for c in _cases()}
    assert {(-128, -128), (127, 127), (3, -5)} <= z_in
    for case in (c for c in _cases() if c.has("w127")):
        assert set(np.unique(_args(case)["weights"]).tolist()) <= {-127, 0, 127}


def test_saturation_flags_saturate():
    for case in (c for c in _cases() if c.has("sat") or c.has("sat32")):
        args = _args(case)
        out = reference.evaluate(case.op, args)
        assert np.mean((out == 127) | (out == -128)) > 0.5, case.id
    for case in (c for c in _cases() if c.has("sat32")):
        args = _args(case)
        coarse = reference.evaluate(case.op, {**args, "output_scale": args["output_scale"] * 2.0**32})
        assert (coarse != args["output_zero_point"]).any(), case.id  # some |y / s_o| is past 2**31


def test_channel_groups_geometry_and_size_edges():
    sizes = [c.sizes for c in _cases()]
    assert {z["C"] % 4 for z in sizes} == {0, 1, 2, 3} and {z["O"] % 4 for z in sizes} == {0, 1, 2, 3}
    assert {z["C"] % 4 for c in _cases(suite.DW) for z in [c.sizes]} >= {1, 2, 3}
    assert {(z["KH"], z["KW"]) for z in sizes} >= {(1, 1), (3, 3), (5, 5), (1, 3), (3, 1), (2, 2), (4, 4)}
    assert any(z["s"] > 1 for z in sizes) and any(z.get("sw", z["s"]) != z["s"] for z in sizes)
    assert any(z["p"] > 0 for z in sizes) and any(z.get("pw", z["p"]) != z["p"] for z in sizes)
    assert any(z["d"] > 1 for z in sizes) and any(z["g"] > 1 and z["g"] != z["C"] for z in sizes)
    assert any(z["H"] == 1 and z["W"] == 1 for z in sizes) and any(z["H"] == 1 and z["W"] > 1 for z in sizes)
    assert {z.get("N", 1) for c in _cases() for z in [c.sizes]} == {1, 2}
    assert {c.op for c in _cases() if c.sizes.get("N", 1) == 2} == {suite.CONV, suite.PW, suite.DW, suite.TRANSPOSED}
    assert any(z.get("op", 0) > 0 for z in sizes)


def test_below_the_bound_shrinks_h_and_w_to_valid_geometries():
    shrunk = 0
    for case in _cases():
        names = suite_of(case).resizable_of(case)
        assert "N" in names
        for small in below_bound(case):
            out = reference.evaluate(small.op, _args(small))
            assert out.shape[0] == small.sizes.get("N", 1) and out.size > 0
            shrunk += small.sizes["H"] == 1 or small.sizes["W"] == 1
    assert shrunk > 40
    blocked = [c for c in _cases() if "H" not in suite_of(c).resizable_of(c)]
    assert all(2 * c.sizes["p"] < c.sizes["d"] * (c.sizes["KH"] - 1) for c in blocked if c.op != suite.TRANSPOSED)


def test_scalars_do_not_depend_on_the_spatial_sizes():
    """Below-the-bound runs keep the built scalars: qparams come from the flags and the fan-in only."""
    for case in _cases():
        for small in below_bound(case):
            big, little = _args(case), _args(small)
            for name in ("input_scale", "input_zero_point", "output_scale", "output_zero_point", "groups"):
                assert big[name] == little[name], (case.id, name)


def test_the_mali_grouped_case_does_not_depend_on_the_epilogue():
    """``q8ta_conv2d``'s reference follows the desktop route (general: separate epilogue); on ``profile=mali`` a
    grouped conv takes im2col (fused epilogue). For these cases' data the two give the same codes."""
    for case in (c for c in _cases(suite.CONV) if _option(c, "profile") == "mali"):
        for run in (case, *below_bound(case)):
            args = _args(run)
            np.testing.assert_array_equal(ref.q8ta_conv2d_general(**args), ref.q8ta_conv2d_im2col(**args))


ONE_OFF = [("q8ta_conv2d[C6-H7-W9-O7-KH3-KW3-s1-p1-d1-g1-int8-buffer-int8x4_4c1w-general-outint8x4_4w4c-bias]",
            q8ta_conv2d),
           ("q8ta_conv2d_dw[C7-H12-W13-O7-KH5-KW5-s1-p2-d1-g7-int8-buffer-int8x4_4c1w-dw-zhi]", q8ta_conv2d_dw)]


@requires_tree
@requires_vulkan
@pytest.mark.parametrize("case_id, module", ONE_OFF)
def test_a_zero_point_one_off_in_the_push_constants_is_caught(et_ctx, monkeypatch, case_id, module):
    """The launcher's push constants with the input zero point + 1: the case fails; unpatched it passes."""
    (case,) = [c for c in _cases() if c.id == case_id]
    assert kernels.run_case(et_ctx, case).status == Status.PASS.name
    original = module.qparams_block

    def off_by_one(args):
        return original({**args, "input_zero_point": int(args["input_zero_point"]) + 1})

    monkeypatch.setattr(module, "qparams_block", off_by_one)
    result = kernels.run_case(et_ctx, case)
    assert result.status == Status.FAIL_NUMERIC.name, result.reason


REFUSALS = [
    ("q8ta_conv2d[C3-H9-W11-O13-KH3-KW3-s2-p1-d1-g1-int8-buffer-int8x4_4c1w-general-bias]", {}, "int8x4_4w",
     "q8ta_conv2d_check_packed_dim_info(graph.packed_dim_info_of(packed_int8_input))"),
    ("q8ta_conv2d_pw[C9-H7-W10-O7-KH1-KW1-s1-p0-d1-g1-int8-buffer-int8x4_4w4c-pw-outint8x4_4c-bias]", {},
     "int8x4_4c1w", "q8ta_conv2d_check_4w4c_packed_dim_info(graph.packed_dim_info_of(packed_int8_input))"),
    ("q8ta_conv2d_dw[C4-H1-W1-O4-KH3-KW3-s1-p1-d1-g4-int8-buffer-int8x4_4c1w-dw-bias]",
     {"x": np.zeros((1, 8, 1, 1), np.int8)}, None, "groups_val == in_channels"),
    ("q8ta_conv2d_transposed[C8-H5-W4-O6-KH3-KW3-s2-p1-d1-g1-op1-int8-buffer-int8x4_4c-transposed-bias]",
     {"dilation": [2, 2]}, None, "q8ta_conv2d_transposed only supports dilation=1"),
    ("q8ta_conv2d_im2col[C4-H1-W1-O6-KH3-KW3-s1-p1-d1-g1-int8-buffer-int8x4_4c1w-im2col-bias]",
     {"x": np.ones((1, 6, 1, 1), np.int8)}, None, "conv_params.in_channels_per_group % 4 == 0"),
]


@requires_tree
@requires_vulkan
@pytest.mark.parametrize("case_id, change, layout, check", REFUSALS)
def test_the_cpps_checks_refuse(et_ctx, case_id, change, layout, check):
    """Layouts the C++ refuses, a depthwise conv whose groups are not its channels, a dilated transposed conv and
    im2col with channels per group off 4 raise the ``VK_CHECK_COND`` text."""
    from vkdiff.executors.op_graph import run_op
    from vkdiff.device.launchers.utils.q8ta_conv_utils import Q8taConvRefusal

    (case,) = [c for c in _cases() if c.id == case_id]
    with pytest.raises(Q8taConvRefusal, match=re.escape(f"Check failed: {check}")):
        run_op(et_ctx, case.op, {**_args(case), **change}, storage="buffer", layout=layout or case.layout)
