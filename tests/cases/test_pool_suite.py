"""The pooling and upsample family: every op ``Pool.cpp`` and ``Upsample.cpp`` register has a launcher, a
reference and a suite, and the suite's windows, sizes and inputs reach the edges it names."""

from __future__ import annotations

import numpy as np
import pytest

from tests.testutils import coverage_gaps
from vkdiff.cases.kernel_suites.nn import pool
from vkdiff.cases.kernels import all_cases
from vkdiff.reference.tensor.pool import pool_output_size

POOLS = r"^(max_pool2d|max_pool2d_with_indices|avg_pool2d)\["
UPSAMPLES = r"^upsample_(nearest|bilinear)2d\["


def _args(case) -> dict:
    return pool.make_args(case, np.random.default_rng(case.seed()))


@pytest.mark.parametrize("cpp,count", [("Pool.cpp", 3), ("Upsample.cpp", 2)])
def test_every_op_the_cpp_registers_is_covered(et_tree, cpp, count):
    registered, gaps = coverage_gaps(et_tree, cpp)
    assert len(registered) == count and not gaps


def test_cases_use_the_only_storage_and_layout_et_vk_accepts():
    cases = all_cases(POOLS) + all_cases(UPSAMPLES)
    assert {(c.storage, c.layout) for c in cases} == {("texture3d", "channels")}
    assert {c.dtype for c in cases} == {"fp32", "fp16"}


def test_windows_reach_padding_stride_dilation_and_ceil():
    seen = {flag for c in all_cases(POOLS) for flag in c.flags}
    assert set(pool.WINDOWS) | {"ceil", "neg", "nopad", "div5", "big"} <= seen
    windows = list(pool.WINDOWS.values())
    assert any(w["stride"] != w["kernel_size"] for w in windows) and any(w["dilation"] != [1, 1] for w in windows)
    assert any(w["kernel_size"][0] != w["kernel_size"][1] for w in windows)
    for case in all_cases(POOLS):
        if case.has("ceil"):
            args = _args(case)
            grows = [pool_output_size(case.size(dim), args["kernel_size"][i], args["stride"][i], args["padding"][i],
                                      1, True)
                     > pool_output_size(case.size(dim), args["kernel_size"][i], args["stride"][i],
                                        args["padding"][i], 1, False) for i, dim in enumerate("HW")]
            assert any(grows), case.id


def test_negative_inputs_make_padded_max_windows_all_negative():
    """With padding, a corner window holds padding and only negative values: zero padding would win there."""
    for case in all_cases(POOLS):
        if case.has("neg") and case.name.startswith("max"):
            args = _args(case)
            assert args["padding"] != [0, 0] and (args["self"] < 0).all(), case.id


def test_avg_divisors_and_half_extremes():
    args = {c.id: _args(c) for c in all_cases(r"^avg_pool2d\[")}
    assert {a["count_include_pad"] for a in args.values()} == {True, False}
    assert {a["divisor_override"] for a in args.values()} == {None, 5}
    big = [a["self"] for i, a in args.items() if "-big" in i]
    assert big and all(x.dtype == np.float16 and 2 * x.astype(np.float64).min() > 65504 for x in big)
    assert all(np.unique(a["self"]).size > 1 for a in args.values())


def test_upsample_reaches_sizes_scales_corners_and_downsampling():
    args = [(_args(c), c) for c in all_cases(UPSAMPLES)]
    sizes = [a["output_size"] for a, _ in args if a["output_size"] is not None]
    scales = [a["scale_factors"] for a, _ in args if a["scale_factors"] is not None]
    assert sizes and scales
    assert any(not float(s[0]).is_integer() for s in scales) and any(s[0] < 1 for s in scales)
    assert any(o[0] < 4 for o in sizes) and any(o[0] % 4 and o[0] > 4 for o in sizes)
    assert {a["align_corners"] for a, c in args if c.name == "upsample_bilinear2d"} == {True, False}
    big = [a["input"].astype(np.float64) for a, c in args if c.has("big")]
    assert big and all((x > 0.9 * 65504).any() and (x < -0.9 * 65504).any() for x in big)


def test_case_counts_stay_within_budget():
    counts = {op: len(all_cases(rf"^{op}\[")) for op in ("max_pool2d", "max_pool2d_with_indices", "avg_pool2d",
                                                           "upsample_nearest2d", "upsample_bilinear2d")}
    assert all(10 <= n <= 40 for n in counts.values()), counts
