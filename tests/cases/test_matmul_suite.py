"""The matmul family: every op ``Matmul.cpp`` and ``Linear.cpp`` register has a launcher, a reference and a
suite; every case's declared route is the one the ported C++ picks, every route is reached, and the edge
inputs are where the suite says."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from tests.testutils import coverage_gaps
from vkdiff.cases.kernel_suites.nn import matmul
from vkdiff.cases.kernels import all_cases
from vkdiff.device.graph.vtensor import TensorSpec
from vkdiff.device.launchers import LAUNCHERS
from vkdiff.device.launchers.linear import tiled_kernel_base

OPS = ("mm", "bmm", "addmm", "linear")
PATTERN = r"^(mm|bmm|addmm|linear)\["


def _args(case) -> dict:
    return matmul.make_args(case, np.random.default_rng(case.seed()))


def _case(case_id: str):
    return next(c for c in all_cases("^" + re.escape(case_id) + "$"))


@pytest.mark.parametrize("cpp,count", [("Matmul.cpp", 3), ("Linear.cpp", 1)])
def test_every_op_the_cpp_registers_is_covered(et_tree, cpp, count):
    registered, gaps = coverage_gaps(et_tree, cpp)
    assert len(registered) == count and not gaps


def _picked(case) -> str:
    """The kernel base the ported pick functions give for the case's output (no device needed)."""
    args = _args(case)
    out_shape, dtype = LAUNCHERS[case.op][0].output(args, None)
    out = SimpleNamespace(spec=TensorSpec(tuple(out_shape), np.dtype(dtype).name, case.storage, "width"))
    k = case.size("K")
    has_bias = case.name == "addmm" or case.has("bias")
    tensor_mat2 = dict(case.options).get("mat2") == "tensor"
    return tiled_kernel_base("matmul" if tensor_mat2 else "linear", out, k, has_bias)


def test_every_declared_route_is_the_ported_pick():
    cases = all_cases(PATTERN)
    wrong = {c.id: _picked(c) for c in cases if dict(c.options)["route"] != _picked(c)}
    assert not wrong


def test_every_route_is_reached_in_both_storages():
    routes = {(c.name, dict(c.options)["route"], c.storage) for c in all_cases(PATTERN)}
    for stem, tile in ((s, t) for s in ("matmul", "linear") for t in ("", "_tile_row_2", "_tile_row_1")):
        for op in ("mm", "linear") if stem == "linear" else ("mm",):
            assert (op, f"{stem}_vec{tile}", "texture3d") in routes
            assert (op, f"{stem}{tile}", "buffer") in routes
    for op, stem in (("addmm", "matmul"), ("addmm", "linear"), ("linear", "linear")):
        assert (op, f"{stem}_vec_bias_tile_row_1", "buffer") in routes
        assert (op, f"{stem}_bias_tile_row_1", "buffer") in routes
    wide = [c for c in all_cases(PATTERN) if ("weight_storage", "buffer") in c.options]
    assert {c.name for c in wide} == {"mm", "linear"} and all(c.size("K") // 4 + 1 > 32768 for c in wide)
    kinds = {(c.name, dict(c.options).get("mat2")) for c in all_cases(r"^(mm|bmm|addmm)\[")}
    assert kinds == {(op, kind) for op in ("mm", "bmm", "addmm") for kind in ("const", "tensor")}


def test_sizes_reach_every_residue_one_row_and_batches():
    cases = all_cases(PATTERN)
    for dim in "MKN":
        assert {c.size(dim) % 4 for c in cases} >= {1, 2, 3}, dim
    assert any(c.size("M") == 1 for c in cases if c.name == "mm")
    bmm = [c for c in cases if c.name == "bmm"]
    assert {c.size("B") == 1 for c in bmm} == {True, False}
    assert any(c.size("B") > 1 and 1 in (c.size("M"), c.size("K"), c.size("N")) for c in bmm)
    linear = [c for c in cases if c.name == "linear"]
    assert {_args(c)["input"].ndim for c in linear} == {2, 3}
    assert {c.has("bias") for c in linear} == {True, False}
    assert {c.dtype for c in cases} == {"fp32", "fp16"}


def test_addmm_bias_shapes_and_scalars():
    shapes = {c.flags[0]: _args(c)["self"].shape for c in all_cases(r"^addmm\[M5-K8-N12-fp32-buffer-mat2tensor")}
    assert shapes == {"bias_n": (12,), "bias_mn": (5, 12), "bias_m1": (5, 1)}
    args = _args(_case("addmm[M5-K8-N12-fp32-buffer-mat2tensor-matmul_vec_bias_tile_row_1-bias_n]"))
    assert (args["alpha"], args["beta"]) == (matmul.ALPHA, matmul.BETA) != (1, 1)


def test_big_edges_overflow_half_where_aten_does_and_where_it_does_not():
    case = _case("mm[M5-K8-N12-fp16-buffer-mat2tensor-matmul_vec_tile_row_1-big]")
    args = _args(case)
    a, b = args["self"].astype(np.float64), args["mat2"].astype(np.float64)
    assert np.abs(a).max() >= 256 and np.abs(a).max() > 0.9 * 65504
    exact = a @ b
    with np.errstate(over="ignore"):
        assert np.isinf(exact.astype(np.float16)).any()
        products = (a[:, :, None] * b[None, :, :]).astype(np.float16)
        partial_overflow = np.isinf(products).any(axis=1) & np.isfinite(exact.astype(np.float16))
    assert partial_overflow.any()
    linear = _args(_case("linear[M5-K8-N12-fp16-buffer-linear_vec_tile_row_1-big]"))
    assert np.abs(linear["input"].astype(np.float64)).max() > 0.9 * 65504 and linear["weight"].shape == (12, 8)


def test_inputs_vary_and_storages_share_them():
    for case in all_cases(PATTERN)[::7]:
        arrays = [v for v in _args(case).values() if isinstance(v, np.ndarray)]
        assert all(np.unique(a).size > 1 for a in arrays if a.size > 1), case.id
    one = _args(_case("mm[M13-K7-N6-fp32-buffer-mat2const-linear_tile_row_1]"))
    other = _args(_case("mm[M13-K7-N6-fp32-texture3d-mat2const-linear_vec_tile_row_1]"))
    np.testing.assert_array_equal(one["self"], other["self"])


def test_case_counts_stay_within_budget():
    counts = {op: len(all_cases(rf"^{op}\[")) for op in OPS}
    assert all(10 <= n <= 40 for n in counts.values()), counts
