"""vkdiff.reference.quantized.q8ta_conv against ET-VK's eager ``et_vk.q8ta_conv2d*`` ops, float64 torch convolutions and the
fusion pattern itself (``patterns/quantized_convolution.py``: weight layouts and weight sums)."""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest
import torch

from vkdiff.reference.quantized import q8ta_conv as ref

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (et_vk ops)

_ET = torch.ops.et_vk
EPS32 = float(np.finfo(np.float32).eps)

# (C, O, (KH, KW), stride, padding, dilation, groups)
GEOMETRIES = [
    (3, 13, (3, 3), 2, 1, 1, 1), (8, 12, (3, 3), 1, 1, 1, 1), (5, 6, (3, 3), 2, 2, 2, 1), (7, 5, (5, 5), 1, 2, 1, 1),
    (8, 9, (1, 3), 1, (0, 1), 1, 1), (8, 8, (3, 3), 1, 1, 1, 2), (12, 12, (3, 3), 2, 1, 1, 3),
    (9, 7, (1, 1), 1, 0, 1, 1),
]
QPARAMS = [(0.02, 3, -5), (0.02, -128, -128), (0.05, 127, 127)]
"""(input scale, input zero point, output zero point)."""


def _pair(v) -> list[int]:
    return list(v) if isinstance(v, tuple) else [v, v]


def _scales(rng, n: int) -> np.ndarray:
    return (rng.uniform(0.5, 1.5, n) * 0.01).astype(np.float32)


def _codes(rng, shape, low=-128) -> np.ndarray:
    x = rng.integers(low, 128, size=shape).astype(np.int8)
    x.reshape(-1)[:2] = (low, 127)
    return x


def _output_scale(s_x: float, fan_in: int, spread: float = 48.0) -> float:
    return float(np.float32(74 * 73 * np.sqrt(fan_in) * s_x * 0.01 / spread))


def _float_conv(x, s_x, z_x, w_deq, bias, **geometry) -> np.ndarray:
    """float64 ``conv(dequantize(x), dequantized weight) + bias`` and its magnitude ``conv(|x|, |w|) + |bias|``."""
    xd = torch.from_numpy((x.astype(np.float64) - z_x) * float(np.float32(s_x)))
    wd = torch.from_numpy(w_deq)
    b = None if bias is None else torch.from_numpy(bias.astype(np.float64))
    transposed = geometry.pop("transposed", False)
    fn = torch.nn.functional.conv_transpose2d if transposed else torch.nn.functional.conv2d
    y = fn(xd, wd, b, **geometry).numpy()
    mag = fn(xd.abs(), wd.abs(), None if b is None else b.abs(), **geometry).numpy()
    return y, mag


def _codes_equal_off_ties(ours, other, y, s_o, slack) -> None:
    """Codes equal, except ±1 where ``y / s_o`` is within ``slack`` codes of a ``.5`` tie (float32 rounding)."""
    diff = ours.astype(np.int32) - other.astype(np.int32)
    v = y / np.float64(np.float32(s_o))
    near_tie = np.abs(v - np.floor(v) - 0.5) <= slack
    assert (np.abs(diff) <= 1).all(), np.abs(diff).max()
    assert (near_tie | (diff == 0)).all(), np.argwhere(~near_tie & (diff != 0))[:5]


def _slack(y, mag, s_o, fan_in) -> np.ndarray:
    """Code units of float32 rounding in a length-``fan_in`` conv plus a few in the epilogue."""
    return ((fan_in + 8) * EPS32 * mag + 8 * EPS32 * np.abs(y)) / float(np.float32(s_o)) + 1e-9


@pytest.mark.parametrize("activation", ["none", "relu"])
@pytest.mark.parametrize("qp", QPARAMS)
@pytest.mark.parametrize("c,o,k,s,p,d,g", GEOMETRIES)
def test_conv_matches_etvk_eager(rng, c, o, k, s, p, d, g, qp, activation) -> None:
    """Every conv route's reference (general, im2col, pw epilogues) equals the eager op off float32 ties; the eager
    op gets the weight in its own ``[OC, ICg, KH, KW]`` order (see ``test_eager_misreads_the_pattern_layout``)."""
    s_x, z_x, z_o = qp
    w4 = _codes(rng, (o, c // g, *k), low=-127)
    x = _codes(rng, (1, c, 9, 11))
    scales, bias = _scales(rng, o), rng.standard_normal(o).astype(np.float32)
    fan = c // g * k[0] * k[1]
    s_o = _output_scale(s_x, fan)
    geo = dict(kernel_size=list(k), stride=_pair(s), padding=_pair(p), dilation=_pair(d), groups=g)
    matrix = ref.conv_weight_matrix(w4)
    args = (x, s_x, z_x, matrix, ref.weight_sums_of(matrix), ref.pad_channels(scales), s_o, z_o,
            ref.pad_channels(bias), *geo.values(), activation)
    eager = _ET.q8ta_conv2d(torch.from_numpy(x), s_x, z_x, torch.from_numpy(ref.pad_channels(w4.reshape(o, -1))),
                            torch.from_numpy(ref.weight_sums_of(matrix)), torch.from_numpy(scales), s_o, z_o,
                            torch.from_numpy(bias), *geo.values(), activation).numpy()
    y, mag = _float_conv(x, s_x, z_x, w4.astype(np.float64) * scales[:, None, None, None], bias, stride=_pair(s),
                         padding=_pair(p), dilation=_pair(d), groups=g)
    if activation == "relu":
        y = np.maximum(y, 0)
    for fn in (ref.q8ta_conv2d, ref.q8ta_conv2d_general, ref.q8ta_conv2d_im2col):
        ours = fn(*args)
        assert ours.dtype == np.int8 and ours.shape == eager.shape
        _codes_equal_off_ties(ours, eager, y, s_o, _slack(y, mag, s_o, fan))
    assert len(np.unique(eager)) > 8 or (activation == "relu" and z_o == 127)  # relu's codes are all >= z_o


@pytest.mark.parametrize("qp", QPARAMS)
@pytest.mark.parametrize("c,k,s,p,d", [(8, (3, 3), 1, 1, 1), (6, (3, 3), 2, 1, 1), (7, (5, 5), 1, 2, 1),
                                       (5, (3, 3), 1, 2, 2), (12, (1, 3), 1, (0, 1), 1)])
def test_dw_matches_etvk_eager(rng, c, k, s, p, d, qp) -> None:
    """The depthwise reference (weights ``[KH, KW, align4(C)]``, as the pattern pads them) equals the eager op
    (given the unpadded ``[KH, KW, C]``) off ties, channel counts off 4 included."""
    s_x, z_x, z_o = qp
    w4 = _codes(rng, (c, 1, *k), low=-127)
    x = _codes(rng, (1, c, 10, 9))
    scales = _scales(rng, c)
    s_o = _output_scale(s_x, k[0] * k[1], spread=24.0)
    geo = dict(kernel_size=list(k), stride=_pair(s), padding=_pair(p), dilation=_pair(d), groups=c)
    weight = ref.dw_weight(w4)
    ours = ref.q8ta_conv2d_dw(x, s_x, z_x, weight, ref.dw_weight_sums(weight), ref.pad_channels(scales), s_o, z_o,
                              None, *geo.values(), "none")
    unpadded = torch.from_numpy(np.ascontiguousarray(weight[:, :, :c]))
    eager = _ET.q8ta_conv2d_dw(torch.from_numpy(x), s_x, z_x, unpadded, torch.zeros(c, dtype=torch.int32),
                               torch.from_numpy(scales), s_o, z_o, None, *geo.values(), "none").numpy()
    y, mag = _float_conv(x, s_x, z_x, w4.astype(np.float64) * scales[:, None, None, None], None, stride=_pair(s),
                         padding=_pair(p), dilation=_pair(d), groups=c)
    _codes_equal_off_ties(ours, eager, y, s_o, _slack(y, mag, s_o, k[0] * k[1]))


@pytest.mark.parametrize("c,o,k,s,p,op,g", [(8, 6, (3, 3), 2, 1, 1, 1), (6, 5, (2, 2), 2, 0, 0, 1),
                                            (3, 7, (3, 1), 1, (1, 0), 0, 1), (8, 8, (4, 4), 2, 1, 0, 2),
                                            (8, 12, (3, 3), 2, 1, 1, 2)])
def test_transposed_matches_float64_and_etvk_eager(rng, c, o, k, s, p, op, g) -> None:
    """Against a float64 ``conv_transpose2d`` of the original ``[IC, OCg, KH, KW]`` weight (any groups) and, for
    groups 1, the eager op given its own ``[OC, ICg, KH, KW]`` order (it throws for groups > 1)."""
    s_x, z_x, z_o = 0.02, 4, -3
    wt = _codes(rng, (c, o // g, *k), low=-127)
    x = _codes(rng, (1, c, 5, 4))
    scales = _scales(rng, o)
    fan = max(1, c // g * k[0] * k[1] // (s * s))
    s_o = _output_scale(s_x, fan)
    matrix = ref.transposed_weight_matrix(wt, g)
    geo = [list(k), _pair(s), _pair(p), [op, op], [1, 1], g]
    ours = ref.q8ta_conv2d_transposed(x, s_x, z_x, matrix, ref.weight_sums_of(matrix), ref.pad_channels(scales),
                                      s_o, z_o, None, *geo, "none")
    per_oc = scales.reshape(g, 1, o // g, 1, 1)
    w_deq = (wt.astype(np.float64).reshape(g, c // g, o // g, *k) * per_oc).reshape(c, o // g, *k)
    y, mag = _float_conv(x, s_x, z_x, w_deq, None, transposed=True, stride=_pair(s), padding=_pair(p),
                         output_padding=[op, op], groups=g)
    oracle = np.clip(np.rint(y / np.float64(np.float32(s_o))) + z_o, -128, 127).astype(np.int8)
    _codes_equal_off_ties(ours, oracle, y, s_o, _slack(y, mag, s_o, fan))
    if g == 1:
        eager_order = ref.pad_channels(np.ascontiguousarray(wt.transpose(1, 0, 2, 3)).reshape(o, -1))
        eager = _ET.q8ta_conv2d_transposed(torch.from_numpy(x), s_x, z_x, torch.from_numpy(eager_order),
                                           torch.from_numpy(ref.weight_sums_of(matrix)), torch.from_numpy(scales),
                                           s_o, z_o, None, *geo, "none").numpy()
        _codes_equal_off_ties(ours, eager, y, s_o, _slack(y, mag, s_o, fan))


def test_eager_misreads_the_pattern_layout(rng) -> None:
    """Upstream finding: the eager ``q8ta_conv2d`` and ``q8ta_conv2d_transposed`` view ``weights`` as
    ``[OC, ICg, KH, KW]``; the pattern (and the C++) store ``(kh, kw, ic)``. With the pattern's matrix the eager op
    is far off the float convolution for a 3×3 kernel over 8 channels; with its own order it agrees."""
    c, o = 8, 8
    w4 = _codes(rng, (o, c, 3, 3), low=-127)
    x = _codes(rng, (1, c, 6, 6))
    scales = np.full(o, 0.01, np.float32)
    matrix = ref.conv_weight_matrix(w4)
    geo = ([3, 3], [1, 1], [1, 1], [1, 1], 1, "none")

    def eager(weights: np.ndarray) -> np.ndarray:
        return _ET.q8ta_conv2d(torch.from_numpy(x), 0.05, 3, torch.from_numpy(weights),
                               torch.from_numpy(ref.weight_sums_of(matrix)), torch.from_numpy(scales), 0.5, -2, None,
                               *geo).numpy().astype(np.int32)

    ours = ref.q8ta_conv2d(x, 0.05, 3, matrix, ref.weight_sums_of(matrix), ref.pad_channels(scales), 0.5, -2, None,
                           *geo).astype(np.int32)
    assert np.abs(eager(w4.reshape(o, -1)) - ours).max() <= 1
    assert np.abs(eager(matrix) - ours).max() > 50


def test_eager_transposed_throws_for_groups(rng) -> None:
    """Upstream finding: the eager ``q8ta_conv2d_transposed`` dequantizes a ``[IC, OCg, KH, KW]`` weight per channel
    on axis 1 with ``weight_scales[:OCg].repeat(groups)`` (OC scales on an axis of OCg): groups > 1 throw."""
    wt = _codes(rng, (8, 4, 3, 3), low=-127)
    matrix = ref.transposed_weight_matrix(wt, 2)
    with pytest.raises(RuntimeError, match="must match the size"):
        _ET.q8ta_conv2d_transposed(torch.from_numpy(_codes(rng, (1, 8, 4, 4))), 0.05, 3, torch.from_numpy(matrix),
                                   torch.from_numpy(ref.weight_sums_of(matrix)), torch.full((8,), 0.01), 0.5, -2,
                                   None, [3, 3], [2, 2], [1, 1], [1, 1], [1, 1], 2, "none")


@pytest.fixture(scope="module")
def fused_program():
    """A conv → depthwise → grouped 1×1 model, XNNPACKQuantizer per-channel (as ET-VK's tests quantize), edge
    dialect, then the Vulkan pattern replacement: ``(int8 weights before, fused q8ta nodes, program)``."""
    from executorch.backends.transforms.utils import get_param_tensor
    from executorch.backends.vulkan.patterns import replace_all_fusable_subgraphs
    from executorch.exir import to_edge

    from vkdiff.lowering.pt2e import quantize_pt2e_xnnpack

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(6, 8, 3, padding=1)
            self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
            self.pw = torch.nn.Conv2d(8, 16, 1, groups=2)

        def forward(self, x):
            return torch.relu(self.pw(self.dw(self.conv(x))))

    torch.manual_seed(0)
    x = torch.randn(1, 6, 9, 7)
    program = to_edge(torch.export.export(quantize_pt2e_xnnpack(Model().eval(), (x,), per_channel=True),
                                          (x,))).exported_program()
    signature = program.graph_signature
    constants = {**signature.inputs_to_parameters, **signature.inputs_to_buffers,
                 **signature.inputs_to_lifted_tensor_constants}
    placeholders = [n for n in program.graph_module.graph.nodes if n.op == "placeholder" and n.name in constants]
    before = {n.name: get_param_tensor(program, n).clone() for n in placeholders}
    before = {k: v for k, v in before.items() if v.dtype == torch.int8}
    assert replace_all_fusable_subgraphs(program, program.graph_module) == 3
    fused = {str(n.target).split(".")[-2].split("::")[-1]: n for n in program.graph_module.graph.nodes
             if n.op == "call_function" and "q8ta_conv2d" in str(n.target)}
    return before, fused, program


def test_pattern_layouts_and_sums_match_the_fusion_pass(fused_program) -> None:
    """The real pattern writes what ``conv_weight_matrix`` / ``dw_weight`` and their sums compute, routes a grouped
    1×1 conv to ``q8ta_conv2d_pw`` (whose C++ ignores groups) and the dw sums run over the kernel (dims 0, 1)."""
    from executorch.backends.transforms.utils import get_param_tensor

    before, fused, program = fused_program
    assert set(fused) == {"q8ta_conv2d", "q8ta_conv2d_dw", "q8ta_conv2d_pw"}
    for name, layout, sums in (("q8ta_conv2d", ref.conv_weight_matrix, ref.weight_sums_of),
                               ("q8ta_conv2d_pw", ref.conv_weight_matrix, ref.weight_sums_of),
                               ("q8ta_conv2d_dw", ref.dw_weight, ref.dw_weight_sums)):
        node = fused[name]
        original = before[node.args[3].name].numpy()
        packed = get_param_tensor(program, node.args[3]).numpy()
        np.testing.assert_array_equal(packed, layout(original))
        np.testing.assert_array_equal(get_param_tensor(program, node.args[4]).numpy(), sums(packed))
    assert fused["q8ta_conv2d_pw"].args[13] == 2


def test_transposed_matrix_is_the_patterns_regrouping(rng) -> None:
    """``transposed_weight_matrix`` is the pattern's torch code (``make_q8ta_conv2d_custom_op``, transposed branch),
    which the XNNPACK-quantized graphs never reach (their conv_transpose weights are quantized on axis 0)."""
    for ic, ocg, h, w, groups in ((8, 3, 3, 3, 1), (8, 4, 4, 2, 2), (12, 2, 3, 1, 3)):
        weight = torch.from_numpy(_codes(rng, (ic, ocg, h, w), low=-127))
        icg, oc = ic // groups, ocg * groups
        pattern = (weight.reshape(groups, icg, ocg, h, w).permute(0, 2, 3, 4, 1).contiguous()
                   .reshape(oc, h * w * icg).contiguous())
        pattern = torch.nn.functional.pad(pattern, (0, -pattern.shape[1] % 4))
        np.testing.assert_array_equal(ref.transposed_weight_matrix(weight.numpy(), groups), pattern.numpy())


def test_worked_example_rounds_half_to_even() -> None:
    """``x = [10, -10]``, ``z_x = 2``, ``w = 2``: acc − z_x·ws = [16, -24]; ``· 0.5 · 0.25 + 0.5`` = [2.5, -2.5]
    → codes [2, -2] (half to even), then ``+ z_o = 1``."""
    x = np.array([[[[10, -10]]]], np.int8)
    w = np.array([[2, 0, 0, 0]], np.int8)
    args = (x, 0.5, 2, w, np.array([2, 0, 0, 0], np.int32), np.array([0.25, 0, 0, 0], np.float32), 1.0, 1,
            np.array([0.5, 0, 0, 0], np.float32), [1, 1], [1, 1], [0, 0], [1, 1], 1, "none")
    for fn in (ref.q8ta_conv2d_general, ref.q8ta_conv2d_pw):
        assert fn(*args).reshape(-1).tolist() == [3, -1]


def test_fused_epilogue_rounds_once(rng) -> None:
    """``_fma_f32`` is ``fma`` rounded once to float32, checked with exact rationals on random operands and on
    ``24929·2⁻¹² × 673·2⁻¹² + 2⁻⁶⁰`` = ``1 + 2⁻²⁴ + 2⁻⁶⁰``, which float64 rounds onto the float32 midpoint
    ``1 + 2⁻²⁴`` (then to even, 1.0) although it lies above it (1 + 2⁻²³)."""
    a = rng.integers(-(2**20), 2**20, 500).astype(np.float32)
    b = rng.uniform(1e-4, 1e-2, 500).astype(np.float32)
    c = rng.standard_normal(500).astype(np.float32)
    a[0], b[0], c[0] = 24929 * 2.0**-12, 673 * 2.0**-12, 2.0**-60
    got = ref._fma_f32(a, b, c)
    exact = [_nearest_f32(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))) for x, y, z in zip(a, b, c)]
    np.testing.assert_array_equal(got, np.array(exact, np.float32))
    twice = (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)
    assert got[0] == np.float32(1 + 2.0**-23) and twice[0] == np.float32(1.0)


def _nearest_f32(value: Fraction) -> np.float32:
    """The float32 nearest to ``value``, ties to even (``float(value)`` is within one float32 step of it)."""
    guess = np.float32(float(value))
    candidates = [np.nextafter(guess, np.float32(-np.inf)), guess, np.nextafter(guess, np.float32(np.inf))]
    return min(candidates, key=lambda f: (abs(Fraction(float(f)) - value), int(np.array(f).view(np.int32)) & 1))


def test_uses_im2col_follows_the_cpp() -> None:
    assert ref.uses_im2col(8, 1, (9, 11)) and not ref.uses_im2col(6, 1, (9, 11))
    assert ref.uses_im2col(32, 1, (66, 66)) and not ref.uses_im2col(8, 1, (65, 65))
    assert ref.uses_im2col(8, 1, (64, 64)) and not ref.uses_im2col(8, 2, (9, 7))
    assert ref.uses_im2col(8, 2, (9, 7), mali=True) and not ref.uses_im2col(6, 2, (9, 7), mali=True)


def test_a_wrong_zero_point_sign_is_caught(rng) -> None:
    """Companion: the eager comparison catches ``z_x`` applied with the wrong sign."""
    w4 = _codes(rng, (8, 8, 3, 3), low=-127)
    x = _codes(rng, (1, 8, 7, 7))
    scales = _scales(rng, 8)
    matrix = ref.conv_weight_matrix(w4)
    s_o = _output_scale(0.02, 72)
    geo = ([3, 3], [1, 1], [1, 1], [1, 1], 1, "none")
    eager = _ET.q8ta_conv2d(torch.from_numpy(x), 0.02, 9, torch.from_numpy(ref.pad_channels(w4.reshape(8, -1))),
                            torch.from_numpy(ref.weight_sums_of(matrix)), torch.from_numpy(scales), s_o, -5, None,
                            *geo).numpy()
    right = ref.q8ta_conv2d(x, 0.02, 9, matrix, ref.weight_sums_of(matrix), scales, s_o, -5, None, *geo)
    wrong = ref.q8ta_conv2d(x, 0.02, -9, matrix, ref.weight_sums_of(matrix), scales, s_o, -5, None, *geo)
    assert np.abs(right.astype(int) - eager).max() <= 1
    assert np.abs(wrong.astype(int) - eager).max() > 10


def test_dw_sums_over_the_wrong_axis_are_caught(rng) -> None:
    """Companion (the history of the dw pattern): sums over a ``[KH, KW, C]`` weight's dim 1 instead of (0, 1) give
    per-row sums the shader subtracts as ``z_x · ws``: the eager op (which ignores the sums) disagrees."""
    w4 = _codes(rng, (8, 1, 3, 3), low=-127)
    weight = ref.dw_weight(w4)
    x = _codes(rng, (1, 8, 6, 6))
    scales = _scales(rng, 8)
    s_o = _output_scale(0.02, 9, spread=24.0)
    geo = ([3, 3], [1, 1], [1, 1], [1, 1], 8, "none")
    eager = _ET.q8ta_conv2d_dw(torch.from_numpy(x), 0.02, 20, torch.from_numpy(weight),
                               torch.zeros(8, dtype=torch.int32), torch.from_numpy(scales), s_o, 0, None,
                               *geo).numpy()
    wrong_sums = ref.pad_channels(weight.astype(np.int64).sum(axis=1).reshape(-1)[:8].astype(np.int32))
    right = ref.q8ta_conv2d_dw(x, 0.02, 20, weight, ref.dw_weight_sums(weight), scales, s_o, 0, None, *geo)
    wrong = ref.q8ta_conv2d_dw(x, 0.02, 20, weight, wrong_sums, scales, s_o, 0, None, *geo)
    assert np.abs(right.astype(int) - eager).max() <= 1
    assert np.abs(wrong.astype(int) - eager).max() > 10


def test_the_eager_order_for_the_pattern_matrix_is_caught(rng) -> None:
    """Companion: reading the pattern's ``(kh, kw, ic)`` matrix in ``(ic, kh, kw)`` order (the eager op's mistake)
    moves the output off the float convolution."""
    w4 = _codes(rng, (4, 8, 3, 3), low=-127)
    x = _codes(rng, (1, 8, 6, 6))
    scales = np.full(4, 0.01, np.float32)
    s_o = _output_scale(0.02, 72)
    geo = ([3, 3], [1, 1], [1, 1], [1, 1], 1, "none")
    y, _ = _float_conv(x, 0.02, 3, w4.astype(np.float64) * 0.01, None, padding=[1, 1])
    oracle = np.clip(np.rint(y / np.float64(np.float32(s_o))) - 2, -128, 127)
    right = ref.conv_weight_matrix(w4)
    misread = ref.pad_channels(w4.reshape(4, -1))
    for matrix, close in ((right, True), (misread, False)):
        out = ref.q8ta_conv2d_general(x, 0.02, 3, matrix, ref.weight_sums_of(matrix), scales, s_o, -2, None, *geo)
        assert (np.abs(out - oracle).max() <= 1) == close


def test_rejects_bad_inputs(rng) -> None:
    matrix = ref.conv_weight_matrix(_codes(rng, (4, 4, 1, 1), low=-127))
    good = (_codes(rng, (1, 4, 3, 3)), 0.1, 0, matrix, ref.weight_sums_of(matrix), np.full(4, 0.01, np.float32), 0.1,
            0, None, [1, 1], [1, 1], [0, 0], [1, 1], 1)
    with pytest.raises(ValueError, match="Unknown activation type: gelu"):
        ref.q8ta_conv2d(*good, "gelu")
    with pytest.raises(TypeError, match="integer codes"):
        ref.q8ta_conv2d(good[0].astype(np.float32), *good[1:], "none")
    with pytest.raises(ValueError, match="depthwise weights"):
        ref.q8ta_conv2d_dw(*good[:3], ref.dw_weight(_codes(rng, (4, 1, 3, 3), low=-127)), *good[4:13], 3, "none")
