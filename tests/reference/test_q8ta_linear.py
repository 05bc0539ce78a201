"""``vkdiff.reference.quantized.q8ta.q8ta_linear`` (``et_vk.q8ta_linear`` / ``q8ta_linear_gemv``) against ET-VK's eager ops
and against the shaders' float32 requantization written with torch, and ``packing.pack_q8_linear_weight``
(``pack_q8_linear_weight.glsl``'s block layout); each companion test shows a plausible mistake is caught."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (quantized_decomposed ops)

from vkdiff import reference
from vkdiff.reference.quantized import packing, q8ta

from .helpers import fp32_dot_bound

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (et_vk ops)

OPS = ("et_vk.q8ta_linear.default", "et_vk.q8ta_linear_gemv.default")
SHAPES = [(1, 64), (9, 96), (2, 5, 36), (3, 1, 4), (16, 256)]
"""Input shapes ``[..., K]``: one row (the GEMV), tiles of 4 rows and not, batch dims, K = 4."""
QPARAMS = [(0.02, 3, 0.011, -6), (0.05, -128, 0.3, -128), (0.013, 127, 0.07, 127), (0.02, -9, 4e-4, 5)]
"""(s_x, z_x, s_out, z_out): mid, both zero points -128, both 127, an output scale that saturates most codes."""


def _case(rng: np.random.Generator, shape: tuple[int, ...], n: int, bias: bool = True):
    """Codes with both int8 ends, symmetric int8 weights (±127 present), true sums, positive scales, a bias;
    per-channel params padded to a multiple of 4 as the export pass pads them."""
    k = shape[-1]
    x = rng.integers(-128, 128, shape).astype(np.int8)
    x.reshape(-1)[:2] = (-128, 127)
    w = rng.integers(-127, 128, (n, k)).astype(np.int8)
    w[0, 0], w[-1, -1] = -127, 127
    scales = (rng.uniform(0.5, 1.5, n) * 0.02 / np.sqrt(k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    return x, w, scales, b


def _ours(x, s_x, z_x, w, scales, s_out, z_out, bias, activation="none", sums=None) -> np.ndarray:
    sums = packing.weight_sums_per_channel(w) if sums is None else sums
    return q8ta.q8ta_linear(x, s_x, z_x, w, sums, packing.pad_last_dim(scales, 4), s_out, z_out,
                            None if bias is None else packing.pad_last_dim(bias, 4), activation)


def _eager(op: str, x, s_x, z_x, w, scales, s_out, z_out, bias, activation="none") -> np.ndarray:
    fn = getattr(torch.ops.et_vk, op.split(".")[1])
    sums = torch.from_numpy(packing.weight_sums_per_channel(w))
    return fn(torch.from_numpy(x), s_x, z_x, torch.from_numpy(w), sums, torch.from_numpy(scales), s_out, z_out,
              None if bias is None else torch.from_numpy(bias), activation).numpy()


def _float64(x, s_x, z_x, w, scales, bias, activation) -> tuple[np.ndarray, np.ndarray]:
    """The exact output before requantization, and a bound on the eager op's float32 rounding of it."""
    x_dq = (x.astype(np.float64) - z_x) * float(np.float32(s_x))
    w_dq = w.astype(np.float64) * scales.astype(np.float64)[:, None]
    y = x_dq @ w_dq.T + (0 if bias is None else bias)
    bound = fp32_dot_bound(x_dq.reshape(-1, x.shape[-1]), w_dq).reshape(y.shape) + 8 * np.abs(y) * 2.0**-24
    return (np.maximum(y, 0) if activation == "relu" else y), bound


def assert_codes_agree_but_near_ties(ours, eager, y, bound, s_out) -> None:
    """Equal codes, or codes one apart where ``y / s_out`` lies within ``bound`` of a ``.5`` tie."""
    __tracebackhide__ = True
    diff = ours.astype(np.int32) - eager.astype(np.int32)
    v = y / float(np.float32(s_out))
    near_tie = np.abs(v - np.floor(v) - 0.5) <= bound / float(np.float32(s_out)) + 1e-6
    assert (np.abs(diff) <= 1).all(), f"codes differ by {np.abs(diff).max()}"
    assert (near_tie | (diff == 0)).all(), f"codes differ away from a tie at {np.argwhere(~near_tie & (diff != 0))[:5]}"


@pytest.mark.parametrize("activation", ["none", "relu"])
@pytest.mark.parametrize("qparams", QPARAMS, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("op", OPS)
def test_matches_the_eager_op_but_near_ties(rng, op, shape, qparams, activation):
    s_x, z_x, s_out, z_out = qparams
    x, w, scales, bias = _case(rng, shape, 13)
    ours = _ours(x, s_x, z_x, w, scales, s_out, z_out, bias, activation)
    assert ours.dtype == np.int8 and ours.shape == (*shape[:-1], 13)
    y, bound = _float64(x, s_x, z_x, w, scales, bias, activation)
    assert_codes_agree_but_near_ties(ours, _eager(op, x, s_x, z_x, w, scales, s_out, z_out, bias, activation), y,
                                     bound, s_out)


def _shader_arithmetic(x, s_x, z_x, w, scales, s_out, z_out, bias, activation) -> np.ndarray:
    """``accumulate_out_tile_with_int_accum`` + ``quantize_and_pack`` written with torch: integer sums, then
    ``f32(acc) * f32(s_x * s_w)``, ``+ bias``, relu, ``quantized_decomposed.quantize_per_tensor`` (float32)."""
    xt, wt = torch.from_numpy(x).long(), torch.from_numpy(w).long()
    acc = (xt.reshape(-1, x.shape[-1]) - z_x) @ wt.T
    y = acc.float() * (torch.tensor(s_x, dtype=torch.float32) * torch.from_numpy(scales))
    if bias is not None:
        y = y + torch.from_numpy(bias)
    if activation == "relu":
        y = torch.relu(y)
    q = torch.ops.quantized_decomposed.quantize_per_tensor(y, float(np.float32(s_out)), z_out, -128, 127, torch.int8)
    return q.numpy().reshape(*x.shape[:-1], w.shape[0])


@pytest.mark.parametrize("activation", ["none", "relu"])
@pytest.mark.parametrize("qparams", QPARAMS, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_is_bit_exact_with_the_shaders_float32_requantization(rng, shape, qparams, activation):
    s_x, z_x, s_out, z_out = qparams
    x, w, scales, bias = _case(rng, shape, 21, bias=activation == "none")
    np.testing.assert_array_equal(_ours(x, s_x, z_x, w, scales, s_out, z_out, bias, activation),
                                  _shader_arithmetic(x, s_x, z_x, w, scales, s_out, z_out, bias, activation))


def test_edges_reach_both_ends_and_padding_is_ignored(rng):
    x, w, scales, bias = _case(rng, (9, 96), 6)
    saturated = _ours(x, 0.02, -9, w, scales, 4e-4, 5, bias)
    assert (saturated == -128).mean() > 0.3 and (saturated == 127).mean() > 0.3
    sums = packing.weight_sums_per_channel(w)
    unpadded = q8ta.q8ta_linear(x, 0.02, -9, w, sums[:6], scales, 0.01, 5, bias)
    np.testing.assert_array_equal(unpadded, _ours(x, 0.02, -9, w, scales, 0.01, 5, bias))
    assert sums.shape == (8,) and (sums[6:] == 0).all()


def test_registered_for_both_ops_by_schema_names(rng):
    x, w, scales, bias = _case(rng, (1, 32), 5)
    args = {"x": x, "input_scale": 0.02, "input_zero_point": 3, "weights": w,
            "weight_sums": packing.weight_sums_per_channel(w), "weight_scales": packing.pad_last_dim(scales, 4),
            "output_scale": 0.01, "output_zero_point": -6, "bias": packing.pad_last_dim(bias, 4),
            "activation": "relu"}
    expected = _ours(x, 0.02, 3, w, scales, 0.01, -6, bias, "relu")
    for op in OPS:
        np.testing.assert_array_equal(reference.evaluate(op, args), expected)


MISTAKES = {
    "output zero point off by one": lambda a: {**a, "z_out": a["z_out"] + 1},
    "input zero point with the wrong sign": lambda a: {**a, "z_x": -a["z_x"]},
    "weight sums left out": lambda a: {**a, "sums": np.zeros_like(packing.weight_sums_per_channel(a["w"]))},
    "bias left out": lambda a: {**a, "bias": None},
    "relu left out": lambda a: {**a, "activation": "none"},
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_the_eager_comparison_catches(rng, mistake):
    """Each plausible slip in the requantization fails the comparison the reference passes."""
    x, w, scales, bias = _case(rng, (9, 96), 13)
    right = {"x": x, "s_x": 0.02, "z_x": 3, "w": w, "scales": scales, "s_out": 0.011, "z_out": -6, "bias": bias,
             "activation": "relu"}
    eager = _eager(OPS[0], **right)
    y, bound = _float64(x, 0.02, 3, w, scales, bias, "relu")
    assert_codes_agree_but_near_ties(_ours(**right), eager, y, bound, 0.011)
    with pytest.raises(AssertionError):
        assert_codes_agree_but_near_ties(_ours(**MISTAKES[mistake](right)), eager, y, bound, 0.011)


def test_rejects_what_the_op_does_not_take(rng):
    x, w, scales, _ = _case(rng, (2, 16), 4)
    sums = packing.weight_sums_per_channel(w)
    with pytest.raises(ValueError, match="activation must be 'none' or 'relu'"):
        q8ta.q8ta_linear(x, 0.1, 0, w, sums, scales, 0.1, 0, activation="gelu")
    with pytest.raises(TypeError, match="integer codes"):
        q8ta.q8ta_linear(x.astype(np.float32), 0.1, 0, w, sums, scales, 0.1, 0)
    with pytest.raises(ValueError, match="input K=8 != weight K=16"):
        q8ta.q8ta_linear(x[:, :8], 0.1, 0, w, sums, scales, 0.1, 0)
    with pytest.raises(ValueError, match="need >= 4 entries"):
        q8ta.q8ta_linear(x, 0.1, 0, w, sums[:3], scales, 0.1, 0)


def test_pack_q8_linear_weight_places_each_code_in_its_block():
    q = np.arange(-60, 60, dtype=np.int8).reshape(10, 12)  # N = 10 (N4 = 3, two padded rows), K = 12
    packed = packing.pack_q8_linear_weight(q)
    assert packed.dtype == np.int32 and packed.shape == (3, 12)
    raw = packed.view(np.int8).reshape(3, 12, 4)  # [k4, n (padded), byte]
    for n in range(10):
        for k in range(12):
            assert raw[k // 4, n, k % 4] == q[n, k]
    assert (raw[:, 10:] == 0).all()
    assert [hex(v) for v in packing.pack_q8_linear_weight(np.array([[1, 2, 3, 4]], np.int8)).ravel()] == [
        "0x4030201", "0x0", "0x0", "0x0"]
    with pytest.raises(ValueError, match="K % 4 == 0"):
        packing.pack_q8_linear_weight(np.zeros((4, 6), np.int8))
