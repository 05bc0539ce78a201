"""The reductions and norms family: every op its seven ``.cpp`` files register has a launcher, a reference and a
suite, every route the C++ picks has cases, and the edge generator reaches each of its edges."""

from __future__ import annotations

import re
import types

import numpy as np
import pytest

from vkdiff import reference
from vkdiff.cases.kernel_suites.nn import norm
from vkdiff.cases.kernel_suites.tensor import reduce
from vkdiff.cases.kernels import all_cases, load_suites
from vkdiff.device.graph.vtensor import TensorSpec
from vkdiff.device.launchers import LAUNCHERS
from vkdiff.device.launchers.reduce import pick_route

FILES = {"Reduce.cpp": 4, "ArgReduce.cpp": 2, "Var.cpp": 1, "Softmax.cpp": 2, "NativeLayerNorm.cpp": 1,
         "GroupNorm.cpp": 1, "BatchNorm.cpp": 1}
"""Each file and how many ops it registers."""
ROUTES = {"aten.sum.dim_IntList": {"per_row", "reduce", "reduce2d"}, "aten.amin.default": {"per_row", "reduce", "reduce2d"},
          "aten.argmax.default": {"per_row"}, "aten.var.dim": {"buffer", "texture"},
          "aten._log_softmax.default": {"buffer", "texture"}, "aten.native_layer_norm.default": {"buffer", "texture"},
          "aten.native_group_norm.default": {"texture"},
          "aten._native_batch_norm_legit_no_training.default": {"texture"}}
FAMILY = "^(sum|mean|amax|amin|argmax|argmin|var|softmax|log_softmax|native_layer_norm|native_group_norm|batch_norm)\\["


def _case(case_id: str):
    return next(c for c in all_cases("^" + re.escape(case_id) + "$"))


def _args(case_id: str) -> dict:
    case = _case(case_id)
    return load_suites()[case.op].make_args(case, np.random.default_rng(case.seed()))


@pytest.mark.parametrize("cpp", sorted(FILES))
def test_every_op_the_files_register_has_a_launcher_a_reference_and_a_suite(et_tree, cpp):
    source = (et_tree / "backends/vulkan/runtime/graph/ops/impl" / cpp).read_text()
    registered = set(re.findall(r"VK_REGISTER_OP\(\s*(aten\.\w+\.\w+)", source))
    assert len(registered) == FILES[cpp]
    missing = {op: [what for what, table in (("launcher", LAUNCHERS), ("reference", reference.OPS),
                                             ("suite", load_suites())) if op not in table]
               for op in registered}
    assert not {op: gaps for op, gaps in missing.items() if gaps}


@pytest.mark.parametrize("op", sorted(ROUTES))
def test_every_route_has_cases_in_both_dtypes_and_names_it(op):
    cases = list(load_suites()[op].cases())
    routes = {(dict(c.options)["route"], c.dtype) for c in cases}
    assert routes == {(r, d) for r in ROUTES[op] for d in ("fp32", "fp16")}
    assert all(f"-{dict(c.options)['route']}" in c.id for c in cases)


def test_suites_stay_small_and_ids_are_unique():
    cases = all_cases(FAMILY)
    assert len({c.id for c in cases}) == len(cases)
    per_op: dict[str, int] = {}
    for c in cases:
        per_op[c.op] = per_op.get(c.op, 0) + 1
    assert max(per_op.values()) <= 48 and min(per_op.values()) >= 10


def _tensor(sizes, storage, layout="width"):
    return types.SimpleNamespace(spec=TensorSpec(tuple(sizes), "float32", storage, layout))


def test_reduce_route_is_the_one_the_cpp_picks():
    assert pick_route(_tensor((3, 5, 6), "buffer"), [-1]) == "per_row"
    assert pick_route(_tensor((3, 5, 6), "buffer"), [2]) == "per_row"
    assert pick_route(_tensor((3, 5, 6), "texture3d"), [-1]) == "reduce"
    assert pick_route(_tensor((3, 5, 6), "buffer"), [0]) == "reduce"
    assert pick_route(_tensor((3, 5, 6), "texture3d", "channels"), [-1, -2]) == "reduce2d"
    with pytest.raises(ValueError, match=re.escape("Only 1 or 2 dimensions supported")):
        pick_route(_tensor((3, 5, 6), "texture3d"), [0, 1, 2])


def test_shapes_reach_ranks_packed_remainders_size_one_dims_keepdim_and_negative_dims():
    cases = all_cases(FAMILY)
    assert {len([k for k, _ in c.shape if k in "NCHW"]) for c in cases} == {1, 2, 3, 4}
    assert {c.sizes["W"] % 4 for c in cases} >= {1, 2, 3}
    assert any(1 in c.sizes.values() for c in cases)
    sums = list(load_suites()["aten.sum.dim_IntList"].cases())
    flags = {f for c in sums for f in c.flags}
    assert {"keepdim", "dimall", "dim-1", "dim-3", "dim0_1", "dim-1_-2"} <= flags
    assert any(not c.has("keepdim") for c in sums)
    assert {c.layout for c in sums} == {"width", "height", "channels"}


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_every_case_has_an_all_negative_and_an_all_equal_row(dtype):
    x = _args(f"softmax[C3-H5-W12-{dtype}-texture3d-texture-dim2]")["self"].astype(np.float64)
    rows = x.reshape(-1, 12)
    assert (rows[0] < 0).all() and np.ptp(rows[1]) == 0 and np.ptp(rows[2:]) > 0
    per_channel = _args(f"softmax[C3-H5-W6-{dtype}-texture3d-channels-texture-dim-2]")["self"].astype(np.float64)
    assert (per_channel[0, :, 0] < 0).all() and np.ptp(per_channel[0, :, 1]) == 0


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_edges_reach_logits_big_values_and_specials(dtype):
    half_max = float(np.finfo(np.float16).max)
    logits = _args(f"softmax[C3-H5-W12-{dtype}-buffer-buffer-dim-1-logits]")["self"].astype(np.float64)
    assert logits.max() > 88 and logits.reshape(-1, 12)[0].max() < -88
    big = _args(f"sum[C3-H5-W6-{dtype}-buffer-per_row-dim-1-keepdim-big]")["self"].astype(np.float64)
    rows = big.reshape(-1, 6)
    assert (np.abs(rows[4:]) >= 256).mean() > 0.5 and np.abs(rows[4:]).max() > 1000
    assert np.ptp(np.asarray(rows[2], np.float32)) < 8 and rows[2].min() > 32000
    if dtype == "fp16":
        assert rows[3].max() > 0.9 * half_max and np.isfinite(rows).all() and rows[3].sum() > half_max
    else:
        assert rows[3].max() > half_max
    special = _args(f"amax[C3-H5-W6-{dtype}-buffer-per_row-dim-1-keepdim-special]")["self"].reshape(-1)
    assert np.isnan(special).sum() == 1 and np.isposinf(special).sum() == 1 and np.isneginf(special).sum() == 1


def test_norm_arguments_follow_the_schemas():
    layer = _args("native_layer_norm[C3-H5-W6-fp16-buffer-buffer]")
    assert layer["normalized_shape"] == [6] and layer["weight"].dtype == np.float16 and layer["weight"].shape == (6,)
    group = _args("native_group_norm[N2-C6-H5-W7-g3-fp32-texture3d-channels-texture]")
    assert (group["N"], group["C"], group["HxW"], group["group"]) == (2, 6, 35, 3)
    grouped = group["input"].astype(np.float64).reshape(2, 3, -1)
    assert (grouped[0, 0] < 0).all() and np.ptp(grouped[0, 1]) == 0
    batch = _args("batch_norm[N2-C6-H5-W7-fp32-texture3d-channels-texture]")
    assert batch["running_var"][0] == 0 and (batch["running_var"][1:] > 0).all()
    assert reduce.dims_of(_case("argmax[W67-fp32-buffer-per_row-dimall]")) is None
    assert norm.EPS == 1e-5
