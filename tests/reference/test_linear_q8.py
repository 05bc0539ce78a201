"""References of the linears with float activations and per-channel weights (issue 23) against torch.

``aten._weight_int8pack_mm`` against ATen's own CPU kernel; ``et_vk.linear_qcs4w`` against ET-VK's C++ test
reference (``_weight_int8pack_mm`` of the unpacked codes minus 8), the eager op being off by ``8 * s * sum(x)``;
``et_vk.linear_q8csw`` against ``quantized_decomposed.dequantize_per_channel`` and a float64 linear (and the eager
``linear_q8ta_q8csw``, which is that weight-only linear); ``et_vk.linear_q8ta_q8csw`` through its registered
reference, at the int8 zero-point extremes and with saturating scales; ``et_vk.q4gsw_requant`` against the eager
op's codes, packed by a literal port of the C++ test's ``pack_codes_w4x8``. Every oracle test has a companion
showing a plausible mistake fails the same check.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (quantized_decomposed ops)

from vkdiff import reference
from vkdiff.reference.quantized import linear, packing, quant

from .helpers import assert_rel_close, fp32_dot_bound, random_weight

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (et_vk ops)

SHAPES = ((1, 64, 12), (7, 30, 13), (33, 96, 20))
"""(M, K, N): one row; K and N not multiples of 4; several tiles."""


def _int8pack_oracle(x: np.ndarray, w: np.ndarray, s: np.ndarray) -> np.ndarray:
    return torch.ops.aten._weight_int8pack_mm(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(s)).numpy()


def _within_fp32(ours: np.ndarray, oracle: np.ndarray, x: np.ndarray, w_dq: np.ndarray) -> None:
    """|ours - oracle| within a float32 dot product's rounding (the oracle computes in float32)."""
    bound = fp32_dot_bound(x.reshape(-1, x.shape[-1]), w_dq).reshape(ours.shape)
    bound = bound + np.abs(ours) * 2 * np.finfo(np.float32).eps
    assert (np.abs(ours - oracle) <= bound).all()


def _int8_weight(rng: np.random.Generator, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    w[0, :3] = (-128, -127, 127)
    return w, (rng.uniform(0.5, 1.5, n) / (74 * np.sqrt(k))).astype(np.float32)


@pytest.mark.parametrize("m,k,n", SHAPES)
def test_weight_int8pack_mm_matches_aten(rng, m, k, n):
    x, (w, s) = random_weight(rng, (m, k)), _int8_weight(rng, n, k)
    ours = reference.evaluate("aten._weight_int8pack_mm.default", {"self": x, "mat2": w, "scales": s})
    assert ours.dtype == np.float64 and ours.shape == (m, n)
    _within_fp32(ours, _int8pack_oracle(x, w, s), x, w.astype(np.float64) * s[:, None])


def test_weight_int8pack_mm_batches_are_rows(rng):
    """ET-VK takes ``[B, M, K]`` (a fused batched linear): each batch is ATen's 2-D op."""
    x, (w, s) = random_weight(rng, (3, 5, 64)), _int8_weight(rng, 16, 64)
    ours = linear.weight_int8pack_mm(x, w, s)
    for b in range(3):
        _within_fp32(ours[b], _int8pack_oracle(x[b], w, s), x[b], w.astype(np.float64) * s[:, None])


@pytest.mark.parametrize("mistake", ["scale along K", "weight not transposed"])
def test_weight_int8pack_mm_mistakes_fail_the_same_check(rng, mistake):
    k = n = 32
    x, (w, s) = random_weight(rng, (6, k)), _int8_weight(rng, n, k)
    if mistake == "scale along K":
        wrong = (x.astype(np.float64) * s[None, :]) @ w.astype(np.float64).T
    else:
        wrong = x.astype(np.float64) @ (w.astype(np.float64) * s[:, None])
    with pytest.raises(AssertionError):
        _within_fp32(wrong, _int8pack_oracle(x, w, s), x, w.astype(np.float64) * s[:, None])


def _qcs4w_torch_codes(weight: np.ndarray) -> torch.Tensor:
    """``unpack_weights_4x2(w) - 8`` of ``quantized_linear_test.cpp``: high nibble first, in torch."""
    t = torch.from_numpy(weight).to(torch.int32)
    return torch.stack([(t & 0xF0) >> 4, t & 0x0F], dim=-1).reshape(t.shape[0], -1) - 8


def _qcs4w_oracle(x: np.ndarray, weight: np.ndarray, s: np.ndarray) -> np.ndarray:
    codes = _qcs4w_torch_codes(weight).to(torch.int8)
    return torch.ops.aten._weight_int8pack_mm(torch.from_numpy(x), codes, torch.from_numpy(s)).numpy()


def _qcs4w_args(rng: np.random.Generator, m: int, k: int, n: int):
    x = random_weight(rng, (m, k))
    weight = rng.integers(0, 256, (n, k // 2), dtype=np.uint8)
    weight[:, 0] = 0x0F  # codes -8 and 7
    return x, weight, rng.uniform(0.01, 0.05, n).astype(np.float32)


@pytest.mark.parametrize("m,k,n", ((1, 64, 16), (6, 128, 12), (13, 32, 40)))
def test_linear_qcs4w_matches_etvk_test_reference(rng, m, k, n):
    x, weight, s = _qcs4w_args(rng, m, k, n)
    ours = reference.evaluate("et_vk.linear_qcs4w.default", {"self": x, "weight": weight, "scales": s})
    w_dq = _qcs4w_torch_codes(weight).numpy().astype(np.float64) * s[:, None]
    _within_fp32(ours, _qcs4w_oracle(x, weight, s), x, w_dq)


def test_etvk_eager_linear_qcs4w_leaves_out_the_offset(rng):
    """The eager op dequantizes the raw nibbles (0..15), not ``nibble - 8``: it is ours plus ``8 s[n] sum_k x``."""
    x, weight, s = _qcs4w_args(rng, 5, 64, 16)
    eager = torch.ops.et_vk.linear_qcs4w(torch.from_numpy(x), torch.from_numpy(weight), torch.from_numpy(s)).numpy()
    ours = linear.linear_qcs4w(x, weight, s)
    offset = 8 * x.astype(np.float64).sum(axis=1, keepdims=True) * s[None, :]
    nibbles = (_qcs4w_torch_codes(weight).numpy() + 8).astype(np.float64) * s[:, None]
    _within_fp32(ours + offset, eager, x, nibbles)
    assert np.abs(eager - ours).max() > 100 * np.abs(eager - ours - offset).max()


@pytest.mark.parametrize("mistake", ["low nibble first", "no offset"])
def test_linear_qcs4w_mistakes_fail_the_same_check(rng, mistake):
    x, weight, s = _qcs4w_args(rng, 6, 64, 16)
    if mistake == "low nibble first":  # the q4gsw order
        codes = packing.unpack_int4_linear(weight)
    else:
        codes = packing.unpack_int4_embedding(weight).astype(np.int16) + 8
    wrong = linear.linear_float64(x, linear.dequantize_per_channel_weight(codes, s))
    w_dq = _qcs4w_torch_codes(weight).numpy().astype(np.float64) * s[:, None]
    with pytest.raises(AssertionError):
        _within_fp32(wrong, _qcs4w_oracle(x, weight, s), x, w_dq)


def _q8csw_args(rng: np.random.Generator, m: int, k: int, n: int):
    w = rng.integers(-127, 128, (n, k), dtype=np.int8)
    w[0, :2] = (-127, 127)
    s = rng.uniform(0.001, 0.01, n).astype(np.float32)
    bias = random_weight(rng, (n,))
    return random_weight(rng, (m, k)), w, packing.pad_last_dim(s, 4), packing.pad_last_dim(bias, 4), s, bias


def _q8csw_oracle(x, w, s, bias) -> np.ndarray:
    w_dq = torch.ops.quantized_decomposed.dequantize_per_channel(
        torch.from_numpy(w), torch.from_numpy(s).double(), torch.zeros(len(s), dtype=torch.int64), 0, -127, 127,
        torch.int8, out_dtype=torch.float64)
    return torch.nn.functional.linear(torch.from_numpy(x).double(), w_dq, torch.from_numpy(bias).double()).numpy()


@pytest.mark.parametrize("m,k,n", SHAPES)
def test_linear_q8csw_matches_dequantize_per_channel_oracle(rng, m, k, n):
    x, w, s_pad, bias_pad, s, bias = _q8csw_args(rng, m, k, n)
    ours = reference.evaluate("et_vk.linear_q8csw.default",
                              {"x": x, "weights": w, "weight_scales": s_pad, "bias": bias_pad})
    assert_rel_close(ours, _q8csw_oracle(x, w, s, bias), rtol=1e-12)


def test_linear_q8csw_is_the_eager_linear_q8ta_q8csw(rng):
    """The eager ``linear_q8ta_q8csw`` ignores its input qparams: it is the weight-only linear in float32."""
    x, w, s_pad, bias_pad, s, bias = _q8csw_args(rng, 9, 64, 16)
    eager = torch.ops.et_vk.linear_q8ta_q8csw(torch.from_numpy(x), 0.5, 3, torch.from_numpy(w),
                                              torch.from_numpy(packing.weight_sums_per_channel(w)),
                                              torch.from_numpy(s), torch.from_numpy(bias)).numpy()
    ours = linear.linear_q8csw(x, w, s_pad, bias_pad)
    _within_fp32(ours, eager, x, w.astype(np.float64) * s[:, None].astype(np.float64))


def test_linear_q8csw_companion_unpadded_bias_offset_fails(rng):
    """Reading the padded bias one channel late (an off-by-one a port might make) fails the same check."""
    x, w, s_pad, bias_pad, s, bias = _q8csw_args(rng, 4, 64, 13)
    wrong = linear.linear_q8csw(x, w, s_pad, bias_pad[1:])
    with pytest.raises(AssertionError):
        assert_rel_close(wrong, _q8csw_oracle(x, w, s, bias), rtol=1e-12)


def _q8ta_oracle(x, s_x, z_x, w, s, bias) -> np.ndarray:
    q = torch.ops.quantized_decomposed.quantize_per_tensor(torch.from_numpy(x), s_x, z_x, -128, 127, torch.int8)
    x_dq = (q.double() - z_x) * float(np.float32(s_x))
    return _q8csw_oracle(x_dq.numpy(), w, s, bias)


@pytest.mark.parametrize("edge", ["zp_lo", "zp_hi", "saturate"])
def test_linear_q8ta_q8csw_registered_reference_at_the_edges(rng, edge):
    _, w, s_pad, bias_pad, s, bias = _q8csw_args(rng, 8, 64, 12)
    x = (8 * rng.standard_normal((8, 64))).astype(np.float32)
    x = np.abs(x) if edge == "zp_lo" else (-np.abs(x) if edge == "zp_hi" else x)
    s_x, z_x = {"zp_lo": (0.05, -128), "zp_hi": (0.05, 127), "saturate": (0.002, 3)}[edge]
    q = quant.quantize_per_tensor(x, s_x, z_x)
    clipped = (np.abs(q.astype(int)) >= 127).mean()
    assert {"zp_lo": q.max() == 127, "zp_hi": q.min() == -128, "saturate": clipped > 0.5}[edge]
    args = {"x": x, "input_scale": s_x, "input_zero_point": z_x, "weights": w,
            "weight_sums": packing.weight_sums_per_channel(w), "weight_scales": s_pad, "bias": bias_pad}
    ours, magnitude = reference.evaluate_with_magnitude("et_vk.linear_q8ta_q8csw.default", args)
    assert_rel_close(ours, _q8ta_oracle(x, s_x, z_x, w, s, bias), rtol=1e-9)
    assert (magnitude >= np.abs(ours) - 1e-9).all()


def test_linear_q8ta_q8csw_companion_unclamped_codes_fail(rng):
    """Codes not clamped to [-128, 127] (an int conversion without the clamp) fail on saturating scales."""
    x, w, _, _, s, bias = _q8csw_args(rng, 8, 64, 12)
    s_x, z_x = 0.002, 3
    q = np.rint(x.astype(np.float32) * np.float32(1 / np.float32(s_x))) + z_x
    wrong = linear.linear_float64((q - z_x) * float(np.float32(s_x)), linear.dequantize_per_channel_weight(w, s), bias)
    with pytest.raises(AssertionError):
        assert_rel_close(wrong, _q8ta_oracle(x, s_x, z_x, w, s, bias), rtol=1e-9)


def _pack_codes_w4x8(codes: np.ndarray) -> np.ndarray:
    """``pack_codes_w4x8`` of ``q4gsw_requant_test.cpp``, line for line."""
    n, k = codes.shape
    k4, n4 = k // 4, n // 4
    n4_padded = (n4 + 1) & ~1
    n8 = n4_padded // 2
    buf = [0] * (k4 * n4_padded * 2)

    def pack_tile(k4_: int, n4_: int) -> tuple[int, int]:
        px = py = 0
        for ni in range(4):
            for b in range(4):
                code = int(codes[n4_ * 4 + ni, k4_ * 4 + b]) & 0xF
                shift = 8 * b + (ni & 1) * 4
                if ni < 2:
                    px |= code << shift
                else:
                    py |= code << shift
        return px, py

    for k4_ in range(k4):
        for n8_ in range(n8):
            px_a, py_a = pack_tile(k4_, 2 * n8_)
            px_b, py_b = pack_tile(k4_, 2 * n8_ + 1) if 2 * n8_ + 1 < n4 else (0x88888888, 0x88888888)
            buf[(k4_ * n8 + n8_) * 4:(k4_ * n8 + n8_) * 4 + 4] = [px_a, py_a, px_b, py_b]
    return np.array(buf, np.uint32).view(np.int32)


def _requant_args(rng: np.random.Generator, n: int, k: int, g: int, zero: bool = True):
    scales = rng.uniform(0.005, 0.02, (k // g, n)).astype(np.float32)
    if zero:
        scales[0, 0] = 0.0
    target = rng.integers(-11, 12, (n, k)) + rng.uniform(-0.3, 0.3, (n, k))
    return (target * scales.T[:, np.arange(k) // g]).astype(np.float32), scales


def _eager_codes(latent: np.ndarray, scales: np.ndarray, g: int) -> np.ndarray:
    """The eager op's uint8 ``[N, K/2]`` (even k in the low nibble), back to codes 0..15."""
    packed = torch.ops.et_vk.q4gsw_requant(torch.from_numpy(latent), torch.from_numpy(scales), g).numpy()
    return np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(latent.shape[0], -1)


@pytest.mark.parametrize("n,k,g", ((16, 32, 32), (12, 16, 16), (20, 64, 16), (8, 128, 128)))
def test_q4gsw_requant_matches_eager_codes_in_the_cpp_tests_packing(rng, n, k, g):
    latent, scales = _requant_args(rng, n, k, g)
    expected = _pack_codes_w4x8(_eager_codes(latent, scales, g))
    ours = reference.evaluate("et_vk.q4gsw_requant.default", {"latent": latent, "scales": scales, "group_size": g})
    assert ours.dtype == np.int32
    np.testing.assert_array_equal(ours, expected)


def test_q4gsw_requant_saturates_and_zero_scales_give_code_zero(rng):
    latent, scales = _requant_args(rng, 8, 16, 16, zero=False)
    scales[0, :4] = 0.0
    codes = _eager_codes(latent * 64, scales, 16).astype(np.int64) - 8
    assert (codes[:4] == 0).all() and {-8, 7} <= set(np.unique(codes[4:]).tolist())
    ours = linear.q4gsw_requant(latent * 64, scales, 16)
    np.testing.assert_array_equal(ours, _pack_codes_w4x8(codes + 8))


def test_pack_q4_w4x8_worked_example():
    """One 4x4 block: byte b of x holds rows 0 (low nibble) and 1 (high) at k = b, y rows 2 and 3; the tile past
    N4 = 1 is code 0."""
    codes = np.array([[-8, -7, -6, -5], [7, 6, 5, 4], [0, 1, 2, 3], [-1, -2, -3, -4]], np.int8)
    words = [int(v) for v in packing.pack_q4_w4x8(codes).view(np.uint32)]
    assert words == [0xC3D2E1F0, 0x4B5A6978, 0x88888888, 0x88888888]


@pytest.mark.parametrize("mistake", ["round half away from zero", "odd row in the low nibble"])
def test_q4gsw_requant_mistakes_fail_the_same_check(rng, mistake):
    n, k, g = 16, 32, 32
    scales = np.full((1, n), 0.5, np.float32)
    latent = (rng.integers(-6, 6, (n, k)) + 0.5).astype(np.float32) * 0.5  # exact .5 ties
    expected = _pack_codes_w4x8(_eager_codes(latent, scales, g))
    if mistake.startswith("round"):
        q = np.clip(np.floor(np.abs(latent / 0.5) + 0.5) * np.sign(latent), -8, 7).astype(np.int8)
        wrong = packing.pack_q4_w4x8(q)
    else:
        wrong = _pack_codes_w4x8(_eager_codes(latent, scales, g).reshape(n // 2, 2, k)[:, ::-1].reshape(n, k))
    assert not np.array_equal(wrong, expected)
    np.testing.assert_array_equal(linear.q4gsw_requant(latent, scales, g), expected)
