"""The data-movement family, part 1: every op its 13 ``.cpp`` files register has a launcher, a reference and a
suite; the suites reach their edges and every route the C++ picks; the host-side ports compute what the C++ does."""

from __future__ import annotations

import re

import numpy as np
import pytest

from vkdiff import reference
from vkdiff.cases.kernel_suites.tensor import movement
from vkdiff.cases.kernels import all_cases, load_suites, suite_of
from vkdiff.device.graph.vtensor import TensorSpec
from vkdiff.device.launchers import LAUNCHERS
from vkdiff.device.launchers.clone import clone_route
from vkdiff.device.launchers.flip import create_whcn_bitmap
from vkdiff.device.launchers.pad import create_pad_per_dim, padded_sizes
from vkdiff.device.launchers.permute import pack_into_int32, permuted_sizes, whcn_permute_dims
from vkdiff.device.launchers.squeeze import resize_squeeze_node, squeeze_permutation
from vkdiff.device.launchers.unsqueeze import unsqueeze_permutation
from vkdiff.harness.kernels import run_case
from vkdiff.executors.references import prepare_case
from vkdiff.executors.kernel import launch

FILES = ("Permute", "Clone", "ToCopy", "View", "Squeeze", "Unsqueeze", "Select", "Slice", "Expand", "Repeat", "Flip",
         "Pad", "ScalarTensor")
OPS = ("aten.permute.default", "aten.permute_copy.default", "aten.clone.default", "aten._to_copy.default",
       "dim_order_ops._to_dim_order_copy.default", "aten.squeeze_copy.dims", "aten.unsqueeze_copy.default",
       "aten.select.int", "aten.slice.Tensor", "aten.expand_copy.default", "aten.repeat.default",
       "aten.flip.default", "aten.constant_pad_nd.default", "aten.scalar_tensor.default")
NAMES = ("permute", "permute_copy", "clone", "_to_copy", "_to_dim_order_copy", "squeeze_copy", "unsqueeze_copy",
         "select", "slice", "expand_copy", "repeat", "flip", "constant_pad_nd", "scalar_tensor")
FAMILY = "^(" + "|".join(NAMES) + r")\["


def _cases(name: str):
    return all_cases("^" + re.escape(name) + r"\[")


def _args(case):
    return suite_of(case).make_args(case, np.random.default_rng(case.seed()))


def test_every_op_the_files_register_has_a_launcher_a_reference_and_a_suite(et_tree):
    impl = et_tree / "backends/vulkan/runtime/graph/ops/impl"
    registered = {op for f in FILES for op in re.findall(r"VK_REGISTER_OP\(([\w.]+),", (impl / f"{f}.cpp").read_text())}
    assert set(OPS) <= registered
    assert registered - set(OPS) <= {"aten.view_copy.default", "aten.select_copy.int", "aten.slice_copy.Tensor"}
    missing = {op: [what for what, table in (("launcher", LAUNCHERS), ("reference", reference.OPS),
                                             ("suite", load_suites())) if op not in table] for op in registered}
    assert not {op: gaps for op, gaps in missing.items() if gaps}


@pytest.mark.parametrize("name", NAMES)
def test_each_suite_covers_dtypes_storages_and_stays_small(name):
    cases = _cases(name)
    assert 10 <= len(cases) <= 40
    assert {"fp32", "fp16"} <= {c.dtype for c in cases}
    if name not in ("_to_dim_order_copy", "flip", "permute"):
        assert {c.storage for c in cases} == {"buffer", "texture3d"}
    assert "int32" in {c.dtype for c in cases}


def test_special_values_ties_and_int_extremes_are_drawn():
    special = _args(next(iter(all_cases(r"^clone\[C3-H5-W6-fp16-texture3d-outchannels-special\]$"))))["self"]
    flat = special.reshape(-1).astype(np.float64)
    assert np.isnan(flat).sum() == 1 and np.isposinf(flat).sum() == 1 and np.isneginf(flat).sum() == 1
    assert ((flat == 0) & np.signbit(flat)).any()
    assert ((np.abs(flat) > 0) & (np.abs(flat) < np.finfo(np.float16).smallest_normal)).sum() == 2
    ties = _args(next(iter(all_cases(r"^_to_dim_order_copy\[C3-H5-W6-fp32-buffer-tofp16-ties\]$"))))["self"]
    assert {65520.0, 1 + 2.0**-11} <= set(ties.reshape(-1).astype(np.float64))
    ints = _args(next(iter(all_cases(r"^clone\[C3-H5-W6-int32-texture3d-outchannels\]$"))))["self"]
    assert ints.dtype == np.int32 and {np.iinfo(np.int32).max, np.iinfo(np.int32).min} <= set(ints.reshape(-1))
    plain = _args(next(iter(all_cases(r"^clone\[C3-H5-W6-fp32-buffer\]$"))))["self"]
    assert np.isfinite(plain).all() and len(np.unique(plain)) == plain.size


def test_shape_edges_are_reached():
    cases = all_cases(FAMILY)
    widths = {dict(c.shape).get("W") for c in cases if "W" in dict(c.shape)}
    assert {w % 4 for w in widths} >= {1, 2, 3}
    ranks = {sum(k in "ENCHW" for k, _ in c.shape) for c in cases}
    assert {1, 2, 3, 4, 5} <= ranks
    assert {c.layout for c in cases if c.dtype != "int8"} == {"width", "height", "channels"}
    permutes = [movement.dec(f[1:]) for c in _cases("permute_copy") for f in c.flags if f.startswith("p")]
    assert any(d[-1] not in (len(d) - 1, -1) for d in permutes) and any(min(d) < 0 for d in permutes)
    slices = [c.sizes for c in _cases("slice")]
    assert any(s["step"] > 1 and s["end"] > s["W"] for s in slices if "end" in s)
    assert any(s["start"] < 0 for s in slices) and any(c.has("noend") for c in _cases("slice"))
    pads = [movement.dec(f[1:]) for c in _cases("constant_pad_nd") for f in c.flags if f.startswith("p")]
    assert any(min(p) < 0 for p in pads)
    fills = [_args(c)["value"] for c in _cases("constant_pad_nd")]
    assert any(np.isnan(v) for v in fills) and np.inf in fills
    flips = [movement.dec(f[1:]) for c in _cases("flip") for f in c.flags if f.startswith("f")]
    assert any(len(d) > 1 for d in flips) and any(1 in d or -3 in d for d in flips)
    repeats = [(movement.dec(f[1:]), c) for c in _cases("repeat") for f in c.flags if f.startswith("r")]
    assert any(r[-1] % 4 and r[-1] > 1 for r, _ in repeats)


def test_clone_suite_reaches_every_route_of_the_cpp():
    routes = set()
    for case in _cases("clone"):
        options = dict(case.options)
        sizes = tuple(v for k, v in case.shape if k in "NCHW")
        src = TensorSpec(sizes, "float32", case.storage, case.layout)
        dst = TensorSpec(sizes, "float32", options.get("out_storage", case.storage),
                         options.get("out_layout", case.layout))
        routes.add(clone_route(src, dst))
    assert routes == {"clone", "view_texture", "image_to_buffer", "buffer_to_image", "view_buffer"}


def test_squeeze_suite_reaches_the_clone_and_permute_routes():
    orders = [squeeze_permutation(tuple(v for k, v in c.shape if k in "NCHW"), _args(c)["dim"])
              for c in _cases("squeeze_copy") if c.storage == "texture3d"]
    assert None in orders and any(o is not None for o in orders)


def test_host_ports_compute_what_the_cpp_does():
    assert whcn_permute_dims([2, 0, 1])[:4] == [1, 2, 0, 3]
    assert whcn_permute_dims([-1, 0, -2, 1])[:4] == [2, 1, 3, 0]
    assert pack_into_int32(list(range(8))) == 0x76543210
    assert permuted_sizes((3, 5, 6), 3, [2, 0, 1]) == (6, 3, 5)
    assert permuted_sizes((3, 1, 6), 2, [1, 0, 2]) == (3, 6)
    assert permuted_sizes((5, 6), 3, [1, 0, 2]) == (5, 1, 6)
    with pytest.raises(ValueError, match="range_check"):
        permuted_sizes((3, 5, 6), 3, [-1, 0, 1])
    assert squeeze_permutation((1, 5, 6), [0]) is None and squeeze_permutation((1, 1, 5), [-3]) == [0, 1, 2]
    assert squeeze_permutation((2, 1, 7, 1), [-1, 1]) == [1, 3, 0, 2]
    dims = [1, 2]
    assert resize_squeeze_node((4, 1, 1), dims) == [4] and dims == [1, 1]
    assert resize_squeeze_node((3, 1, 6), [-2]) == [3, 1, 6]
    assert unsqueeze_permutation(3, 1) == [1, 0, 2] and unsqueeze_permutation(2, -1) == [1, 0]
    assert create_pad_per_dim([-1, 2, 1, -2]).tolist() == [-1, 1, 0, 0]
    assert padded_sizes((3, 5, 6), [-1, 2, 1, -2]) == (3, 4, 7)
    assert create_whcn_bitmap([-1, 0], 4).tolist() == [1, 0, 0, 1]


@pytest.mark.parametrize("case_id, variant", [
    ("clone[C3-H5-W6-fp32-texture3d]", "clone_float"),
    ("clone[C3-H5-W6-fp32-texture3d-outchannels]", "view_texture_float"),
    ("clone[C3-H5-W6-fp32-texture3d-channels-outbuffer-outwidth]", "clone_image_to_buffer_float_float"),
    ("clone[C3-H5-W6-fp32-buffer-outtexture3d-outchannels]", "clone_buffer_to_image_float_float"),
    ("clone[C3-H5-W6-fp32-buffer-channels-outwidth]", "view_buffer_float"),
    ("squeeze_copy[C1-H5-W6-fp16-texture3d-d0]", "clone_half"),
    ("squeeze_copy[C3-H1-W6-fp16-texture3d-d1]", "permute_texture3d_half"),
    ("unsqueeze_copy[H5-W6-dim-1-fp32-buffer]", "view_buffer_float"),
    ("_to_copy[C3-H5-W6-fp32-texture3d-tofp32-special]", "blit:Blit_float_to_float"),
    ("_to_copy[C3-H5-W6-int32-buffer-tofp32]", "view_convert_buffer_int32_float"),
    ("_to_dim_order_copy[C3-H5-W6-fp32-buffer-tofp16-ties]", "view_convert_buffer_float_half"),
])
def test_routes_dispatch_their_shader_and_match_bit_for_bit(et_ctx, case_id, variant):
    """At its sizes every route is exact; below them only a known finding may fail (the blit has no resize)."""
    from vkdiff.verdicts import expectations

    case = next(iter(all_cases("^" + re.escape(case_id) + "$")))
    result = expectations.annotate(run_case(et_ctx, case))
    assert result.shader == variant
    assert result.status == "PASS" or (result.reason.startswith("below the bound: ") and
                                       result.expectation["outcome"] == "known"), result.reason
    assert result.metrics["max_abs"] == 0 and result.metrics["mismatches"] == 0


def test_a_copy_that_loses_the_sign_of_zero_fails(et_ctx):
    """Tampering: the device's output with -0.0 written as +0.0 is a FAIL under the exact verdict."""
    from vkdiff.executors.kernel import checked
    from vkdiff.verdicts.kernels import record_launch
    from vkdiff.executors.references import Prepared
    from vkdiff.datamodel import Result

    case = next(iter(all_cases(r"^clone\[C3-H5-W6-fp16-texture3d-outchannels-special\]$")))
    prepared = prepare_case(case)
    launched = launch(et_ctx, case, prepared)
    launched.output = np.where(launched.output == 0, np.float16(0.0), launched.output)
    result = Result(case=case.id, op=case.op, variant=case.variant, knobs={}, shape={}, device="x", status="ERROR")
    record_launch(result, checked(case.op, launched, Prepared(args=prepared.args, expected=prepared.expected,
                                                              magnitude=None, tolerance=prepared.tolerance)))
    assert result.status == "FAIL_NUMERIC"
