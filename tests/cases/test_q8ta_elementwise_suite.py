"""The static-int8 elementwise family: every op ``QuantizeDequantize.cpp``, ``Q8taUnary.cpp``, ``Q8taBinary.cpp`` and
``Q8taPixelShuffle.cpp`` register has a launcher, a reference and a suite, and ``Clone.cpp``'s int8x4 route reaches
``Q8taClone.cpp``; the suites reach every packed-int8 layout and their edges; the ported host code computes what
the C++ does and refuses what it refuses; on a device the cases pass, and a zero point one off is caught."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from tests.testutils import coverage_gaps, requires_tree, requires_vulkan
from vkdiff.cases.kernel_suites.quantized import q8ta_elementwise as q8e
from vkdiff.cases.kernels import all_cases, below_bound, suite_of
from vkdiff.datamodel import schema_of
from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph.vtensor import INT8X4, TensorSpec
from vkdiff.device.launchers.utils import block_config as bc
from vkdiff.device.launchers import q8ta_binary, quantize_dequantize
from vkdiff.device.launchers.clone import clone_route
from vkdiff.device.launchers.q8ta_pixel_shuffle import _check_tensors, passthrough
from vkdiff.device.launchers.quantize_dequantize import _check_int8x4
from vkdiff.device.launchers.q8ta_unary import check_same_packing
from vkdiff.harness.kernels import run_case
from vkdiff.reference.quantized.q8ta_elementwise import q8ta_add_op

OPS = {q8e.QUANTIZE: "quantize_per_tensor", q8e.DEQUANTIZE: "dequantize_per_tensor", q8e.RELU: "q8ta_relu",
       q8e.ADD: "q8ta_add", q8e.PIXEL_SHUFFLE: "q8ta_pixel_shuffle"}
FILES = ("QuantizeDequantize.cpp", "Q8taUnary.cpp", "Q8taBinary.cpp", "Q8taPixelShuffle.cpp")


def _cases(name: str):
    return all_cases("^" + re.escape(name) + r"\[")


def _case(case_id: str):
    (case,) = all_cases("^" + re.escape(case_id) + "$")
    return case


def _args(case) -> dict:
    return suite_of(case).make_args(case, np.random.default_rng(case.seed()))


def _tensor(sizes, layout, storage="buffer", dtype=INT8X4):
    return SimpleNamespace(spec=TensorSpec(tuple(sizes), dtype, storage, layout))


def test_every_op_the_files_register_is_covered_and_clone_reaches_q8ta_clone(et_tree):
    registered, gaps = coverage_gaps(et_tree, *FILES)
    assert registered == set(OPS) and not gaps
    impl = et_tree / "backends/vulkan/runtime/graph/ops/impl"
    assert "VK_REGISTER_OP" not in (impl / "Q8taClone.cpp").read_text()
    assert "return add_q8ta_clone_node(graph, src, dst);" in (impl / "Clone.cpp").read_text()
    int8 = TensorSpec((2, 5, 3, 7), INT8X4, "buffer", "int8x4_4h4w")
    assert clone_route(int8, TensorSpec((2, 5, 3, 7), INT8X4, "buffer", "int8x4_4c1w")) == "q8ta_clone"
    assert {clone_route(TensorSpec((2, 5, 3, 7), INT8X4, "buffer", c.layout),
                        TensorSpec((2, 5, 3, 7), INT8X4, "buffer", dict(c.options)["out_layout"]))
            for c in _cases("clone") if c.dtype == "int8"} == {"q8ta_clone"}


@pytest.mark.parametrize("name", OPS.values())
def test_suites_have_unique_ids_and_schema_arguments(name):
    cases = _cases(name)
    assert 25 <= len(cases) <= 45 and len({c.id for c in cases}) == len(cases)
    for case in cases[:: max(1, len(cases) // 6)]:
        assert set(_args(case)) == set(schema_of(case.op).names), case.id


def test_every_layout_and_float_placement_is_reached():
    quantize = _cases("quantize_per_tensor")
    for storage, layout in q8e.FLOAT_SIDES:
        assert {dict(c.options)["out_layout"] for c in quantize if (c.storage, c.layout) == (storage, layout)} == set(
            q8e.LAYOUTS)
    assert {(c.storage, c.layout) for c in quantize} >= {("texture3d", "width"), ("buffer", "channels")}
    dequantize = {(dict(c.options).get("out_storage", "buffer"), dict(c.options)["out_layout"])
                  for c in _cases("dequantize_per_tensor")}
    assert dequantize >= set(q8e.FLOAT_SIDES) | {("texture3d", "width"), ("buffer", "channels")}
    for name in ("dequantize_per_tensor", "q8ta_relu", "q8ta_add"):
        assert {c.layout for c in _cases(name)} == set(q8e.LAYOUTS), name
    assert {c.layout for c in _cases("q8ta_pixel_shuffle")} == set(q8e.CHANNELS_PACKED)
    assert {(c.layout, dict(c.options).get("out_layout")) for c in _cases("q8ta_relu")} >= set(q8e.MIXED)
    model = _case("q8ta_add[N2-C5-H3-W7-int8-buffer-int8x4_4w4c-input_bbuffer.int8x4_4c1w-outint8x4_4c1w-mid]")
    assert model.options == (("storage.input_b", "buffer:int8x4_4c1w"), ("out_layout", "int8x4_4c1w"))


def test_shapes_reach_unaligned_channels_widths_and_size_one_dims():
    for name in OPS.values():
        shapes = [c.sizes for c in _cases(name)]
        assert any(1 in s.values() for s in shapes), name
        if name != "q8ta_pixel_shuffle":
            assert any(s.get("C", 4) % 4 and s["W"] % 4 for s in shapes), name
    outs = [c.size("C") // 4 for c in _cases("q8ta_pixel_shuffle")]
    assert {c % 4 for c in outs} >= {1, 2, 3}
    assert any(len(c.shape) == 2 for c in _cases("q8ta_add")) and any(len(c.shape) == 3 for c in _cases("q8ta_add"))
    for name in ("quantize_per_tensor", "dequantize_per_tensor"):
        (scalar,) = [c for c in _cases(name) if c.shape == (("R", 0),)]
        assert np.shape(_args(scalar)["input"]) == () and not below_bound(scalar)


def _pinned(codes: np.ndarray) -> float:
    return float(np.mean((codes == -128) | (codes == 127)))


def test_zero_points_at_both_int8_extremes_reach_every_op():
    keys = {"quantize_per_tensor": ("zero_point",), "dequantize_per_tensor": ("zero_point",),
            "q8ta_relu": ("input_zero_point",), "q8ta_add": ("input_a_zero_point", "input_b_zero_point",
                                                            "output_zero_point"),
            "q8ta_pixel_shuffle": ("input_zero_point", "output_zero_point")}
    for name, names in keys.items():
        seen = {_args(c)[k] for c in _cases(name) for k in names}
        assert {-128, 127} <= seen, name


def test_saturating_scales_pin_most_codes():
    from vkdiff.executors.references import prepare_case

    for name in ("quantize_per_tensor", "q8ta_relu", "q8ta_add", "q8ta_pixel_shuffle"):
        sat = [c for c in _cases(name) if c.has("sat")]
        assert sat and all(_pinned(prepare_case(c).expected) > 0.85 for c in sat), name
        mid = next(c for c in _cases(name) if c.has("mid"))
        assert _pinned(prepare_case(mid).expected) < 0.5, name  # relu's negative half is -128 by design


def test_ties_huge_values_and_restricted_bounds_are_drawn():
    tie = _args(_case("quantize_per_tensor[N2-C5-H3-W7-fp32-buffer-outint8x4_4w4c-tie]"))
    x = tie["input"].astype(np.float64) / tie["scale"]
    assert np.sum(x - np.floor(x) == 0.5) > 50 and np.sum(x - np.floor(x) != 0.5) > 50
    relu = _args(_case("q8ta_relu[N2-C5-H3-W7-int8-buffer-int8x4_4w-tie]"))
    y = np.maximum((relu["input"].astype(np.float64) - relu["input_zero_point"]) * relu["input_scale"], 0)
    assert np.sum(y / relu["output_scale"] % 1 == 0.5) > 30
    huge = _args(_case("quantize_per_tensor[N2-C5-H3-W7-fp32-buffer-outint8x4_4w4c-huge]"))
    assert np.abs(huge["input"].astype(np.float64) / huge["scale"]).max() > 2.0**31
    q127 = _args(_case("quantize_per_tensor[N2-C5-H3-W7-fp32-buffer-outint8x4_4w4c-q127]"))
    assert q127["quant_min"] == -127
    assert np.sum(q127["input"].astype(np.float64) / q127["scale"] + q127["zero_point"] < -127.5) > 0


def test_add_edges_broadcast_and_alpha():
    plain = _args(_case("q8ta_add[N2-C5-H3-W7-int8-buffer-int8x4_4w4c-mid]"))
    assert plain["alpha"] == 1.0 and plain["input_b"].shape == (2, 5, 3, 7)
    assert _args(_case("q8ta_add[N2-C5-H3-W7-int8-buffer-int8x4_4w4c-mid-bN1]"))["input_b"].shape == (1, 5, 3, 7)
    assert _args(_case("q8ta_add[N2-C5-H3-W7-int8-buffer-int8x4_4w4c-mid-bH1]"))["input_b"].shape == (2, 5, 1, 7)
    assert {_args(c)["alpha"] for c in _cases("q8ta_add")} == {1.0, 0.5, -1.0}
    same = _args(_case("q8ta_add[N2-C5-H3-W7-int8-buffer-int8x4_4c1w-same]"))
    assert len({same[k] for k in ("input_a_scale", "input_b_scale", "output_scale")}) == 1


def test_pixel_shuffle_passthrough_edges():
    def flag_of(case_id):
        args = _args(_case(case_id))
        return passthrough(np.float32(args["input_scale"]), np.float32(args["output_inv_scale"]),
                           args["input_zero_point"], args["output_zero_point"]), args

    same, _ = flag_of("q8ta_pixel_shuffle[N1-C8-H3-W5-int8-buffer-int8x4_4c1w-same]")
    near, args = flag_of("q8ta_pixel_shuffle[N1-C12-H3-W7-int8-buffer-int8x4_4w4c-near]")
    mid, _ = flag_of("q8ta_pixel_shuffle[N1-C8-H3-W5-int8-buffer-int8x4_4c-mid]")
    assert (same, near, mid) == (1, 1, 0)
    assert np.float32(1) / np.float32(args["output_inv_scale"]) != np.float32(args["input_scale"])
    assert _args(_case("q8ta_pixel_shuffle[N1-C18-H2-W3-int8-buffer-int8x4_4w4c-mid-r3]"))["upscale_factor"] == 3


def test_below_the_bound_shrinks_inputs_and_keeps_the_graph_scalars():
    for case_id, shrunk in (("q8ta_add[N2-C5-H3-W7-int8-buffer-int8x4_4w4c-mid-bN1]", "NCHW"),
                            ("quantize_per_tensor[N2-C5-H3-W7-fp32-buffer-outint8x4_4w4c-tie]", "NCHW"),
                            ("q8ta_pixel_shuffle[N2-C16-H4-W4-int8-buffer-int8x4_4c-same]", "NHW")):
        case = _case(case_id)
        big = _args(case)
        for small in below_bound(case):
            changed = {k for k, v in small.sizes.items() if v != case.sizes[k]}
            assert changed and changed <= set(shrunk)
            args = _args(small)
            assert {k: v for k, v in args.items() if not isinstance(v, np.ndarray)} == {
                k: v for k, v in big.items() if not isinstance(v, np.ndarray)}
    assert _args(below_bound(_case("q8ta_add[N2-C5-H3-W7-int8-buffer-int8x4_4w4c-mid-bN1]"))[0])[
        "input_b"].shape == (1, 3, 2, 4)


def test_block_configs_and_dispatch_sizes_are_the_cpps():
    channels = bc.BlockConfig(2, 4, 0, 4)
    assert channels.block_dim_order == (2, 0, 1, 3) and channels.as_packed_int() == 0x44023102
    assert bc.BlockConfig(0, 4, 2, 4, block_transposed=True).block_dim_order == (2, 0, 1, 3)
    with pytest.raises(EtVkRefusal, match=re.escape("BlockConfig: outer_dim != inner_dim (both 1)")):
        bc.BlockConfig(1, 4, 1, 4)
    texture = TensorSpec((2, 5, 3, 7), "float32", "texture3d", "channels")
    int8_4w = TensorSpec((2, 5, 3, 7), INT8X4, "buffer", "int8x4_4w")
    int8_4w4c = TensorSpec((2, 5, 3, 7), INT8X4, "buffer", "int8x4_4w4c")
    assert bc.create_block_config_from_io_packed_dims(int8_4w4c, texture) == bc.BlockConfig(2, 4, 0, 4)
    assert bc.create_block_config_from_io_packed_dims(int8_4w, texture) == bc.BlockConfig(0, 4, 2, 4)
    assert bc.create_block_config_from_io_packed_dims(int8_4w, int8_4w) == bc.BlockConfig(0, 4, 1, 4)
    assert bc.create_block_config_from_other(texture, bc.BlockConfig(0, 4, 2, 4)) == bc.BlockConfig(2, 4, 0, 4)
    assert bc.create_block_config_for_tensor(int8_4w) == bc.BlockConfig(0, 4, 1, 4)
    w_h = bc.BlockConfig(0, 4, 1, 4).as_packed_int()
    assert bc.pick_linear_global_wg_with_block_config((2, 5, 3, 7), w_h) == (20, 1, 1)
    assert bc.pick_linear_global_wg_with_block_config((3, 2, 5, 3, 7), w_h) == (60, 1, 1)
    assert bc.pick_extents_global_wg_with_block_config((2, 5, 3, 7), channels.as_packed_int()) == (2, 3, 4)
    assert bc.pick_square_local_wg_with_block_config((20, 1, 1), w_h) == (64, 1, 1)
    assert bc.pick_square_local_wg_with_block_config((2, 3, 4), channels.as_packed_int()) == (8, 1, 8)
    assert q8ta_binary.calculate_broadcasted_output_size((2, 5, 3, 7), (5, 1, 7)) == (2, 5, 3, 7)


def test_host_checks_refuse_what_the_cpp_refuses():
    """The partitioner never asks for these; the ports refuse them with the C++'s condition."""
    x = _tensor((2, 5, 3, 7), "int8x4_4w")
    with pytest.raises(EtVkRefusal, match=re.escape("VK_CHECK_COND(input_info.packed_dim == output_info.packed_dim)")):
        check_same_packing(x, _tensor((2, 5, 3, 7), "int8x4_4c"), "input")
    check_same_packing(_tensor((2, 5, 3, 7), "int8x4_4w4c"), _tensor((2, 5, 3, 7), "int8x4_4c1w"), "input_b")
    with pytest.raises(EtVkRefusal, match=re.escape("VK_CHECK_COND(graph.dtype_of(int8_output) == vkapi::kInt8x4)")):
        _check_int8x4(_tensor((2, 5, 3, 7), "width", dtype="int8"), "int8_output")
    shuffle_in, shuffle_out = _tensor((1, 8, 3, 5), "int8x4_4w"), _tensor((1, 2, 6, 10), "int8x4_4w4c")
    with pytest.raises(EtVkRefusal, match=re.escape("VK_CHECK_COND(in_info.packed_dim == WHCN::kChannelsDim)")):
        _check_tensors(shuffle_in, shuffle_out, 2)
    with pytest.raises(EtVkRefusal, match=re.escape("VK_CHECK_COND(graph.dim_of(packed_int8_input) == 4)")):
        _check_tensors(_tensor((8, 3, 5), "int8x4_4w4c"), _tensor((2, 6, 10), "int8x4_4w4c"), 2)
    with pytest.raises(EtVkRefusal, match=re.escape("VK_CHECK_COND(in_sizes[1] == out_sizes[1] * r * r)")):
        _check_tensors(_tensor((1, 8, 3, 5), "int8x4_4c"), _tensor((1, 3, 6, 10), "int8x4_4c"), 2)
    assert passthrough(np.float32(0.05), np.float32(20.0), 3, 4) == 0


DEVICE_CASES = ("quantize_per_tensor[N2-C5-H3-W7-fp32-texture3d-channels-outbuffer-outint8x4_4c1w-mid]",
                "quantize_per_tensor[N2-C5-H3-W7-fp32-buffer-outint8x4_4w4c-tie]",
                "dequantize_per_tensor[N2-C5-H3-W7-fp32-buffer-int8x4_4h4w-outtexture3d-outchannels-mid]",
                "dequantize_per_tensor[N2-C5-H3-W7-fp32-buffer-int8x4_4w4c-outwidth-zpmax]",
                "q8ta_relu[N2-C5-H3-W7-int8-buffer-int8x4_4w4c-outint8x4_4c1w-mid]",
                "q8ta_add[N2-C5-H3-W7-int8-buffer-int8x4_4w4c-input_bbuffer.int8x4_4c1w-outint8x4_4c1w-mid]",
                "q8ta_add[N2-C5-H3-W7-int8-buffer-int8x4_4w-sat]",
                "q8ta_pixel_shuffle[N1-C12-H3-W7-int8-buffer-int8x4_4w4c-outint8x4_4c1w-mid]",
                "q8ta_pixel_shuffle[N1-C12-H3-W7-int8-buffer-int8x4_4c1w-near]")
SHADERS = {"quantize_per_tensor": "q8ta_quantize_{storage}_float",
           "dequantize_per_tensor": "q8ta_dequantize_{out}_float",
           "q8ta_relu": "q8ta_relu_buffer", "q8ta_add": "q8ta_add_buffer", "q8ta_pixel_shuffle": "q8ta_pixel_shuffle"}


@requires_tree
@requires_vulkan
@pytest.mark.parametrize("case_id", DEVICE_CASES)
def test_case_passes_at_and_below_the_bound(et_ctx, case_id):
    """Exact codes (and float32 values) on the shader the C++ names, at the bound and at each smaller size."""
    case = _case(case_id)
    result = run_case(et_ctx, case)
    assert result.status == "PASS", result.reason
    out = dict(case.options).get("out_storage", case.storage)
    assert result.shader == SHADERS[case.name].format(storage=case.storage, out=out)
    assert [run["status"] for run in result.metrics["below_bound"]] == ["PASS"] * 3


@requires_tree
@requires_vulkan
@pytest.mark.parametrize("op_module, target, index", [(q8ta_binary, "add_q8ta_binary_node", 3),
                                                      (quantize_dequantize, "add_q8ta_quantize_node", 3)])
def test_a_zero_point_one_off_is_caught(et_ctx, monkeypatch, op_module, target, index):
    """Tampering: the launcher passes the shader a zero point one too high; the case fails on integer codes."""
    original = getattr(op_module, target)

    def off_by_one(*args):
        args = list(args)
        if isinstance(args[index], tuple):
            qparams = list(args[index])
            qparams[5] += 1
            args[index] = tuple(qparams)
        else:
            args[index] += 1
        return original(*args)

    monkeypatch.setattr(op_module, target, off_by_one)
    case = _case("q8ta_add[N2-C5-H3-W7-int8-buffer-int8x4_4w4c-mid]" if op_module is q8ta_binary
                 else "quantize_per_tensor[N2-C5-H3-W7-fp32-buffer-outint8x4_4w4c-mid]")
    result = run_case(et_ctx, case)
    assert result.status == "FAIL_NUMERIC"
    assert result.metrics["max_abs"] == 1 and result.metrics["mismatches"] > 150
    assert result.reason.startswith("Mismatched elements: ")


@requires_tree
@requires_vulkan
def test_the_add_shader_computes_as_if_alpha_were_one(et_ctx):
    """The finding's cause: with alpha 0.5 the device returns exactly the codes of alpha 1."""
    from vkdiff.executors.references import prepare_case
    from vkdiff.executors.kernel import launch

    case = _case("q8ta_add[N2-C5-H3-W7-int8-buffer-int8x4_4w4c-mid-alpha0.5]")
    prepared = prepare_case(case)
    device = launch(et_ctx, case, prepared).output
    assert (device != prepared.expected).sum() > 100
    np.testing.assert_array_equal(device, q8ta_add_op(**{**prepared.args, "alpha": 1.0}))


@requires_tree
@requires_vulkan
def test_the_int8x4_clone_keeps_its_built_sizes_below_the_bound(et_ctx):
    """At the bound the q8ta_clone route is exact; below it the output is frozen (no resize function)."""
    result = run_case(et_ctx, _case("clone[N2-C5-H3-W7-int8-buffer-int8x4_4h4w-outint8x4_4c1w]"))
    assert result.shader == "q8ta_clone" and result.metrics["mismatches"] == 0
    assert result.status == "FAIL_CHECK" and "output sizes [2, 5, 3, 7] after resize, expected [1, 3, 2, 4]" in (
        result.reason)
