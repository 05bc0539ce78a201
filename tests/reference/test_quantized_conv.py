"""vkdiff.reference.quantized.quantized_conv against float64 torch convolutions of ``quantized_decomposed``-quantized data
and ET-VK's eager ``et_vk.q8ta_conv2d`` / ``q8ta_conv2d_dw`` (the ``_q8to`` ops' arguments are theirs, less the
activation; ``custom_ops_lib.py`` defines no ``conv2d_q8*`` op). The eager ``q8ta_conv2d`` views the weight as
``[OC, ICg, KH, KW]``, not the pattern's ``(kh, kw, ic)`` columns (``tests/reference/test_q8ta_conv.py``), so it
is an oracle for 1×1 kernels only; larger kernels use the composition with the pattern's permutation.

Each oracle test has a companion showing the comparison catches a plausible mistake."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (quantized_decomposed ops)

from vkdiff.reference.quantized import quantized_conv as qc
from vkdiff.reference.quantized.quant import quantize_per_tensor

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (et_vk ops)

_QD = torch.ops.quantized_decomposed
_ET = torch.ops.et_vk

# (C, OC, H, W, K, stride, padding, dilation, groups)
GEOMETRIES = (
    (5, 8, 9, 11, 3, 1, 1, 1, 1),
    (8, 12, 7, 7, 3, 2, 1, 1, 1),
    (3, 6, 10, 9, 3, 1, 2, 2, 1),
    (6, 7, 5, 6, 1, 1, 0, 1, 1),
    (4, 4, 9, 9, 5, 1, 2, 1, 1),
    (8, 8, 6, 7, 3, 1, 1, 1, 2),
    (6, 8, 6, 5, 3, 1, 1, 1, 2),
    (7, 5, 1, 1, 3, 1, 1, 1, 1),
)
ZERO_POINTS = (-128, -3, 127)


def _pad4(a: np.ndarray) -> np.ndarray:
    return np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, -a.shape[-1] % 4)])


def _weights(rng: np.random.Generator, oc: int, icg: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """torch-layout codes ``[OC, ICg, K, K]`` (±127 present) and the pattern's ``[OC, align4(K·K·ICg)]``."""
    w = rng.integers(-127, 128, (oc, icg, k, k)).astype(np.int8)
    w.reshape(-1)[:2] = (-127, 127)
    return w, _pad4(np.ascontiguousarray(w.transpose(0, 2, 3, 1)).reshape(oc, -1))


def _geometry(k, s, p, d, g) -> dict:
    return {"kernel_size": [k, k], "stride": [s, s], "padding": [p, p], "dilation": [d, d], "groups": g}


def _torch_conv(x: np.ndarray, w: np.ndarray, bias, s, p, d, g) -> np.ndarray:
    return torch.nn.functional.conv2d(torch.from_numpy(np.asarray(x, np.float64)), torch.from_numpy(w), None if bias
                                      is None else torch.from_numpy(np.asarray(bias, np.float64)), s, p, d, g).numpy()


def _dequantized_weight(w: np.ndarray, scales: np.ndarray) -> np.ndarray:
    return w.astype(np.float64) * scales.astype(np.float64)[:, None, None, None]


@pytest.mark.parametrize("c,oc,h,w,k,s,p,d,g", GEOMETRIES)
def test_conv2d_q8csw_matches_torch(rng: np.random.Generator, c, oc, h, w, k, s, p, d, g) -> None:
    x = (rng.standard_normal((1, c, h, w)) * 2).astype(np.float32)
    codes, packed = _weights(rng, oc, c // g, k)
    scales, bias = rng.uniform(1e-3, 1e-2, oc).astype(np.float32), rng.standard_normal(oc).astype(np.float32)
    out = qc.conv2d_q8csw(x, packed, _pad4(scales), _pad4(bias), **_geometry(k, s, p, d, g))
    expected = _torch_conv(x, _dequantized_weight(codes, scales), bias, s, p, d, g)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


def test_conv2d_q8csw_weight_columns_are_kh_kw_ic(rng: np.random.Generator) -> None:
    """Companion: reading the weight columns in torch's ``(ic, kh, kw)`` order is caught."""
    x = rng.standard_normal((1, 5, 6, 6)).astype(np.float32)
    codes, _ = _weights(rng, 8, 5, 3)
    scales = np.full(8, 0.01, np.float32)
    wrong = _pad4(codes.reshape(8, -1))
    expected = _torch_conv(x, _dequantized_weight(codes, scales), None, 1, 1, 1, 1)
    out = qc.conv2d_q8csw(x, wrong, scales, None, **_geometry(3, 1, 1, 1, 1))
    assert np.abs(out - expected).max() > 1e-3


def _q8ta_oracle(x, s_x, z_x, codes, scales, bias, s, p, d, g) -> tuple[np.ndarray, np.ndarray]:
    """``quantize_per_tensor`` codes and the float64 conv of their exact dequantization (zero padding)."""
    q = _QD.quantize_per_tensor(torch.from_numpy(x), s_x, z_x, -128, 127, torch.int8).numpy()
    x_dq = (q.astype(np.float64) - z_x) * float(np.float32(s_x))
    return q, _torch_conv(x_dq, _dequantized_weight(codes, scales), bias, s, p, d, g)


@pytest.mark.parametrize("z_x", ZERO_POINTS)
@pytest.mark.parametrize("c,oc,h,w,k,s,p,d,g", GEOMETRIES)
def test_conv2d_q8ta_q8csw_matches_quantized_decomposed(rng: np.random.Generator, c, oc, h, w, k, s, p, d, g,
                                                       z_x) -> None:
    x = (rng.standard_normal((1, c, h, w)) * 2).astype(np.float32)
    codes, packed = _weights(rng, oc, c // g, k)
    scales, bias = rng.uniform(1e-3, 1e-2, oc).astype(np.float32), rng.standard_normal(oc).astype(np.float32)
    s_x = 0.05
    q, expected = _q8ta_oracle(x, s_x, z_x, codes, scales, bias, s, p, d, g)
    np.testing.assert_array_equal(quantize_per_tensor(x, s_x, z_x), q)
    sums = _pad4(packed.astype(np.int32).sum(axis=1, dtype=np.int32))
    out = qc.conv2d_q8ta_q8csw(x, s_x, z_x, packed, sums, _pad4(scales), _pad4(bias), **_geometry(k, s, p, d, g))
    np.testing.assert_allclose(out, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("mistake", ("zero point sign", "zero padding"))
def test_conv2d_q8ta_q8csw_mistakes_are_caught(rng: np.random.Generator, mistake: str) -> None:
    """Companion: a zero point applied with the wrong sign, or padding with 0 instead of the zero point."""
    x = (rng.standard_normal((1, 4, 5, 5)) * 2).astype(np.float32)
    codes, packed = _weights(rng, 4, 4, 3)
    scales = np.full(4, 0.01, np.float32)
    s_x, z_x = 0.05, -37
    _, expected = _q8ta_oracle(x, s_x, z_x, codes, scales, None, 1, 1, 1, 1)
    sums = packed.astype(np.int32).sum(axis=1, dtype=np.int32)
    geometry = _geometry(3, 1, 1, 1, 1)
    if mistake == "zero point sign":
        out = qc.conv2d_q8ta_q8csw(x, s_x, z_x, packed, -sums, scales, None, **geometry)
    else:
        q = quantize_per_tensor(x, s_x, z_x).astype(np.int64)
        acc = np.einsum("nyxabc,oabc->noyx", qc.windows(q, fill=0, kernel_size=[3, 3], stride=[1, 1],
                                                        padding=[1, 1], dilation=[1, 1]),
                        codes.transpose(0, 2, 3, 1).astype(np.int64))
        out = (acc - z_x * sums[None, :, None, None]) * (s_x * scales[None, :, None, None].astype(np.float64))
    assert np.abs(out - expected).max() > 0.05


def _codes_oracle(y: np.ndarray, s_out: float, z_out: int) -> np.ndarray:
    return np.clip(np.rint(y / float(np.float32(s_out))) + z_out, -128, 127)


def _assert_codes_match(out: np.ndarray, expected: np.ndarray) -> None:
    """Codes equal up to one step where float32 rounding meets a ``.5`` tie (rare)."""
    diff = np.abs(out.astype(np.int64) - expected.astype(np.int64))
    assert diff.max(initial=0) <= 1 and (diff > 0).mean() < 0.01, (diff.max(), (diff > 0).mean())


@pytest.mark.parametrize("z_x,z_out,s_out", [(-3, 5, 0.04), (-128, 127, 0.04), (127, -128, 0.004)])
@pytest.mark.parametrize("c,oc,h,w,k,s,p,d,g", GEOMETRIES)
def test_q8to_matches_dequantize_conv_quantize(rng: np.random.Generator, c, oc, h, w, k, s, p, d, g, z_x, z_out,
                                               s_out) -> None:
    """int8 codes in and out: the float value is the float64 conv of the dequantized data; the codes are its
    requantization (``s_out = 0.004`` saturates most of them)."""
    x = rng.integers(-128, 128, (1, c, h, w)).astype(np.int8)
    codes, packed = _weights(rng, oc, c // g, k)
    s_x = 0.02
    scales = (rng.uniform(0.5, 1.5, oc) / (74 * np.sqrt(k * k * c // g))).astype(np.float32)
    bias = (rng.standard_normal(oc) * 1.5).astype(np.float32)
    sums = _pad4(packed.sum(axis=1, dtype=np.int32))
    x_dq = (x.astype(np.float64) - z_x) * float(np.float32(s_x))
    y = _torch_conv(x_dq, _dequantized_weight(codes, scales), bias.astype(np.float64), s, p, d, g)
    args = dict(input_scale=s_x, input_zero_point=z_x, weights=packed, weight_sums=sums, weight_scales=_pad4(scales),
                bias=_pad4(bias), **_geometry(k, s, p, d, g))
    np.testing.assert_allclose(qc.conv2d_q8ta_q8csw_q8to_float(x, **args), y, rtol=1e-9, atol=1e-9)
    out = qc.conv2d_q8ta_q8csw_q8to(x, output_scale=s_out, output_zero_point=z_out, **args)
    assert out.dtype == np.int8 and out.shape == y.shape
    _assert_codes_match(out, _codes_oracle(y, s_out, z_out))


def _eager_args(x, s_x, z_x, weights, sums, scales, s_out, z_out, bias, k, s, p, d, g) -> list:
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
    return [t(x), s_x, z_x, t(weights), t(sums), t(scales), s_out, z_out, t(bias), [k, k], [s, s], [p, p], [d, d], g,
            "none"]


@pytest.mark.parametrize("c,oc,h,w,s,z_x", [(8, 12, 5, 7, 1, -3), (6, 5, 4, 4, 2, -128), (16, 16, 3, 5, 1, 127)])
def test_q8to_pointwise_matches_eager_q8ta_conv2d(rng: np.random.Generator, c, oc, h, w, s, z_x) -> None:
    x = rng.integers(-128, 128, (1, c, h, w)).astype(np.int8)
    _, packed = _weights(rng, oc, c, 1)
    scales = _pad4((rng.uniform(0.5, 1.5, oc) / (74 * np.sqrt(c))).astype(np.float32))
    bias = _pad4(rng.standard_normal(oc).astype(np.float32))
    sums = _pad4(packed.sum(axis=1, dtype=np.int32))
    s_x, s_out, z_out = 0.02, 0.04, 5
    eager = _ET.q8ta_conv2d(*_eager_args(x, s_x, z_x, packed, sums, scales, s_out, z_out, bias, 1, s, 0, 1, 1))
    out = qc.conv2d_q8ta_q8csw_q8to(x, s_x, z_x, packed, sums, scales, s_out, z_out, bias, **_geometry(1, s, 0, 1, 1))
    _assert_codes_match(out, eager.numpy())


@pytest.mark.parametrize("c,h,w,k,s,p,z_x", [(8, 9, 11, 3, 1, 1, -3), (6, 7, 9, 3, 2, 1, -128),
                                              (4, 9, 9, 5, 1, 2, 127), (4, 1, 1, 3, 1, 1, 9)])
def test_q8to_depthwise_matches_eager_q8ta_conv2d_dw(rng: np.random.Generator, c, h, w, k, s, p, z_x) -> None:
    x = rng.integers(-128, 128, (1, c, h, w)).astype(np.int8)
    taps = rng.integers(-127, 128, (c, k * k)).astype(np.int8)
    weights = _pad4(np.ascontiguousarray(taps.T.reshape(k, k, c)))
    sums = _pad4(taps.sum(axis=1, dtype=np.int32))
    scales = _pad4((rng.uniform(0.5, 1.5, c) / (74 * k)).astype(np.float32))
    bias = _pad4(rng.standard_normal(c).astype(np.float32))
    s_x, s_out, z_out = 0.02, 0.03, -7
    eager = _ET.q8ta_conv2d_dw(*_eager_args(x, s_x, z_x, weights[..., :c], sums[:c], scales[:c], s_out, z_out,
                                            bias[:c], k, s, p, 1, c))
    out = qc.conv2d_q8ta_q8csw_q8to(x, s_x, z_x, weights, sums, scales, s_out, z_out, bias, **_geometry(k, s, p, 1, c))
    _assert_codes_match(out, eager.numpy())


@pytest.mark.parametrize("mistake", ("floor", "input zero point ignored", "no saturation"))
def test_q8to_mistakes_are_caught(rng: np.random.Generator, mistake: str) -> None:
    """Companion: flooring instead of rounding, dropping the input zero point, or wrapping instead of clamping
    each miss the oracle by more than the one-code tie allowance."""
    x = rng.integers(-128, 128, (1, 8, 5, 7)).astype(np.int8)
    codes, packed = _weights(rng, 8, 8, 3)
    scales = (rng.uniform(0.5, 1.5, 8) / (74 * np.sqrt(72))).astype(np.float32)
    sums = packed.sum(axis=1, dtype=np.int32)
    s_x, z_x, s_out, z_out = 0.02, -50, 0.004 if mistake == "no saturation" else 0.04, 3
    geometry = _geometry(3, 1, 1, 1, 1)
    x_dq = (x.astype(np.float64) - z_x) * float(np.float32(s_x))
    expected = _codes_oracle(_torch_conv(x_dq, _dequantized_weight(codes, scales), None, 1, 1, 1, 1), s_out, z_out)
    y = qc.conv2d_q8ta_q8csw_q8to_float(x, s_x, z_x, packed, sums, scales, **geometry)
    if mistake == "floor":
        wrong = np.clip(np.floor(y / s_out) + z_out, -128, 127)
    elif mistake == "input zero point ignored":
        wrong = qc.conv2d_q8ta_q8csw_q8to(x, s_x, 0, packed, sums, scales, s_out, z_out, **geometry)
    else:
        wrong = ((np.rint(y / s_out) + z_out).astype(np.int64) + 128) % 256 - 128
    with pytest.raises(AssertionError):
        _assert_codes_match(np.asarray(wrong), expected)
    _assert_codes_match(qc.conv2d_q8ta_q8csw_q8to(x, s_x, z_x, packed, sums, scales, s_out, z_out, **geometry),
                        expected)


def test_requantize_f32_saturates_and_rounds_half_to_even() -> None:
    """Worked example: ``y / s = ±2.5, 3.5, ±1000`` with ``z = 0``."""
    y = np.array([2.5, -2.5, 3.5, 1000.0, -1000.0], np.float32)
    np.testing.assert_array_equal(qc.requantize_f32(y, 1.0, 0), [2, -2, 4, 127, -128])
    np.testing.assert_array_equal(qc.requantize_f32(y, 1.0, 127), [127, 125, 127, 127, -128])


def test_weight_matrix_rejects_mismatched_layouts() -> None:
    with pytest.raises(ValueError, match=re.escape("weights must be [OC, >= 27]")):
        qc.weight_matrix(np.zeros((4, 8), np.int8), 3, 1, [3, 3])
    with pytest.raises(ValueError, match="depthwise weights"):
        qc.weight_matrix(np.zeros((3, 3, 4), np.int8), 4, 2, [3, 3])
