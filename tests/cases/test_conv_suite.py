"""The convolution and grid families: every op their ``.cpp`` files register has a launcher, a reference and a
suite; every route ``conv`` can take on a desktop device has cases; the generators reach their edges."""

from __future__ import annotations

import re
import types

import numpy as np
import pytest

from vkdiff import reference
from vkdiff.cases.kernel_suites.nn import conv
from vkdiff.cases.kernel_suites.tensor import grid
from vkdiff.cases.kernels import all_cases, load_suites, suite_of
from vkdiff.datamodel import schema_of
from vkdiff.device.launchers import LAUNCHERS
from vkdiff.device.launchers.convolution import dw_route, get_conv2d_method, should_use_conv2d_im2col

FILES = ("Convolution.cpp", "Conv2dGemm.cpp", "Conv1dDW.cpp", "Conv1dPW.cpp", "GridSampler2d.cpp", "GridPriors.cpp")
FAMILY = r"^(convolution|conv_with_clamp|conv2d_gemm|conv1d_dw|conv1d_pw|grid_sampler_2d|grid_priors)\["


def _cases(op: str) -> list:
    return [c for c in load_suites()[op].cases()]


def _args(case) -> dict:
    return suite_of(case).make_args(case, np.random.default_rng(case.seed()))


def test_every_op_the_files_register_has_a_launcher_a_reference_and_a_suite(et_tree):
    impl = et_tree / "backends/vulkan/runtime/graph/ops/impl"
    registered = {op for name in FILES for op in re.findall(r"VK_REGISTER_OP\(([\w.]+),", (impl / name).read_text())}
    assert len(registered) == 8
    for op in registered:
        full = schema_of(op).name
        assert op in LAUNCHERS, op
        assert full in reference.OPS, op
        assert full in load_suites() and len(_cases(full)) >= 6, op


def test_every_desktop_route_of_conv_has_cases_in_both_dtypes():
    routes = {(dict(c.options)["route"], c.dtype) for op in (conv.CONV, conv.WITH_CLAMP) for c in _cases(op)}
    expected = {"direct", "im2col", "pw", "dw", "dwtile3", "dwtile3b1x1", "dwtile5", "dwsned3", "dwsned5", "dwsned",
                "transposed", "conv1d", "conv1dpw", "conv1ddw"}
    assert {r for r, _ in routes} == expected
    assert {r for r, d in routes if d == "fp16"} >= {"direct", "im2col", "pw", "dwtile3", "transposed", "conv1d",
                                                     "conv1dpw", "conv1ddw"}
    storages = {(c.op, c.storage) for c in all_cases(FAMILY)}
    assert ("et_vk.conv1d_dw.default", "buffer") in storages and ("et_vk.conv1d_pw.default", "buffer") in storages
    assert not {op for op, s in storages if s == "buffer"} - {"et_vk.conv1d_dw.default", "et_vk.conv1d_pw.default"}


def test_route_pickers_follow_the_cpp():
    desktop, mali = (types.SimpleNamespace(route=types.SimpleNamespace(vendor=v)) for v in ("nvidia", "arm"))
    assert get_conv2d_method((6, 1, 3, 3), 6, False) == "depthwise"
    assert get_conv2d_method((6, 1, 1, 1), 6, False) == "depthwise"
    assert get_conv2d_method((6, 3, 1, 1), 1, False) == "pointwise"
    assert get_conv2d_method((3, 6, 3, 3), 1, True) == "transposed"
    assert get_conv2d_method((7, 5, 3, 3), 1, False) == "sliding"
    assert should_use_conv2d_im2col(desktop, (128, 5, 3, 3), 1, [1, 1])
    assert not should_use_conv2d_im2col(desktop, (127, 5, 3, 3), 1, [1, 1])
    assert not should_use_conv2d_im2col(mali, (8, 4, 3, 3), 2, [1, 1])
    assert should_use_conv2d_im2col(mali, (8, 4, 3, 3), 1, [1, 1])
    geometry = {"stride": [2, 2], "padding": [1, 1], "dilation": [1, 1]}
    assert dw_route(desktop, (6, 1, 3, 3), geometry) == "dwsned3"
    assert dw_route(desktop, (6, 1, 1, 1), geometry) == "dwsned"
    assert dw_route(desktop, (6, 1, 5, 5), {**geometry, "stride": [1, 1]}) == "dwtile5"


def test_conv_edges_channels_groups_geometry_and_kernels():
    cases = all_cases(r"^(convolution|conv_with_clamp|conv2d_gemm)\[")
    sizes = [c.sizes for c in cases]
    assert {z["C"] % 4 for z in sizes} >= {0, 1, 2, 3} and {z["O"] % 4 for z in sizes} >= {1, 2, 3}
    assert {z["K"] for z in sizes} >= {1, 2, 3, 4, 5}
    assert any(z["s"] > 1 for z in sizes) and any(z["p"] > 0 for z in sizes) and any(z["d"] > 1 for z in sizes)
    groups = {("depthwise" if z["g"] == z["C"] == z["O"] else "between" if z["g"] > 1 else "one") for z in sizes}
    assert groups == {"one", "between", "depthwise"}
    assert any(z["g"] > 1 and (z["C"] // z["g"]) % 4 for z in sizes)
    assert {z.get("op") for z in sizes} >= {0, 1, 2}
    assert {c.has("bias") for c in cases} == {True, False}
    assert {f for c in cases for f in c.flags} >= {"clamp", "relu", "hardtanh", "big"}
    assert {z["N"] for c in all_cases(r"^convolution\[") for z in [c.sizes] if "N" in z} == {2}


@pytest.mark.parametrize("case_id", ["convolution[C5-H9-W11-O7-K3-s1-p1-d1-g1-fp16-texture3d-channels-direct-bias-big]",
                                     "conv1d_dw[N2-C5-L13-O5-K3-s1-p1-d1-g5-fp16-texture3d-height-bias-big]"])
def test_inputs_reach_300_and_near_half_max(case_id):
    args = _args(next(iter(all_cases("^" + re.escape(case_id) + "$"))))
    x = args["input"].astype(np.float64)
    assert {300.0, -300.0} <= set(x.reshape(-1)) and np.abs(x).max() > 0.85 * 65504 and np.isfinite(x).all()
    assert np.unique(x).size > x.size // 2 and args["bias"] is not None


def test_clamp_flags_and_argument_sets_follow_the_schemas():
    for case in all_cases(FAMILY):
        args = _args(case)
        assert set(args) == set(schema_of(case.op).names), case.id
    relu = next(c for c in _cases(conv.WITH_CLAMP) if c.has("relu"))
    assert _args(relu)["output_max"] == conv.RELU_MAX and _args(relu)["output_min"] == 0.0
    plain = next(c for c in _cases("et_vk.conv1d_dw.default") if not c.has("clamp"))
    assert _args(plain)["output_min"] is None


def test_grid_sampler_reaches_outside_the_unit_square_and_the_corners():
    cases = _cases(grid.SAMPLER)
    assert {c.sizes["C"] % 4 for c in cases} == {0, 1, 2, 3} and {c.sizes["N"] for c in cases} == {1, 2}
    assert any(c.sizes["H"] == 1 for c in cases)
    for case in cases:
        args = _args(case)
        g = args["grid"].astype(np.float64).reshape(-1, 2)
        assert (np.abs(g) > 1).any() and [-1.0, -1.0] in g.tolist() and [1.0, 1.0] in g.tolist()
        assert (args["interpolation_mode"], args["padding_mode"], args["align_corners"]) == (0, 1, True)


def test_grid_priors_reaches_width_1_and_past_2048():
    cases = _cases(grid.PRIORS)
    assert any(c.sizes["W"] == 1 for c in cases) and {c.flags[0] for c in cases} == {"o0", "o5"}
    top = max(reference.evaluate(grid.PRIORS, _args(c)).max() for c in cases)
    assert top > 2048
