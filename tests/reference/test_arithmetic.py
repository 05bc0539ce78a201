"""vkdiff.reference.arithmetic: the emulated float16 kernels against a scalar loop written as the GLSL reads.

The loop is independent of the vectorised emulation (one element at a time, lanes and
the tree spelled out), so a wrong lane order, a missing rounding or a reduction in the
wrong pairs shows as a difference; the companion tests show those mistakes do.
"""

from __future__ import annotations

import numpy as np
import pytest

from vkdiff.reference import arithmetic
from vkdiff.reference.quantized import linear, packing

from .helpers import make_rng


def f16(value: float) -> float:
    return float(np.float16(value))


def loop_dot(x_row, w_row, *, lanes: int, fused: bool) -> float:
    """One output element of ``fp_accumulate_with_int4_weight`` (+ the coop tree), a scalar at a time."""
    k = len(x_row)
    partial = [0.0] * lanes
    for texel in range(-(-k // 4)):
        lane = texel % lanes
        for i in range(4):
            kk = 4 * texel + i
            if kk < k:
                product = float(x_row[kk]) * float(w_row[kk])
                partial[lane] = f16(product + partial[lane]) if fused else f16(f16(product) + partial[lane])
    width = lanes
    while width > 1:
        width //= 2
        for lane in range(width):
            partial[lane] = f16(partial[lane] + partial[lane + width])
    return partial[0]


def _q4gsw(rng, n: int, k: int, group: int):
    packed = rng.integers(0, 256, (n, k // 2), dtype=np.uint8)
    scales = np.zeros((k // group, -(-n // 4) * 4), np.float16)
    scales[:, :n] = rng.uniform(0.01, 0.03, (k // group, n))
    return packed, scales


@pytest.mark.parametrize("lanes", [1, 4, 64])
@pytest.mark.parametrize("fused", [False, True])
def test_linear_q4gsw_as_float16_matches_the_scalar_loop(lanes, fused):
    rng = make_rng(f"arith-linear-{lanes}-{fused}")
    m, n, k, group = 3, 5, 64, 16
    x = rng.standard_normal((m, k)).astype(np.float16)
    packed, scales = _q4gsw(rng, n, k, group)
    got, scale = arithmetic.linear_q4gsw_as(x, packed, scales, group, accumulate="float16", lanes=lanes, fused=fused)
    w = linear.dequantize_q4gsw_weight(packed, scales, group, k).astype(np.float16).astype(np.float64)
    want = np.array([[loop_dot(x[i], w[j], lanes=lanes, fused=fused) for j in range(n)] for i in range(m)])
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.float64 and (scale >= arithmetic.ulp(got, np.float16)).all()


def test_the_lane_order_matters_so_the_loop_would_catch_a_wrong_one():
    """Sequential and 64-lane accumulation of the same data differ in float16: a lane mistake is visible."""
    rng = make_rng("arith-order")
    x = rng.standard_normal((4, 1024)).astype(np.float16)
    packed, scales = _q4gsw(rng, 8, 1024, 32)
    one, _ = arithmetic.linear_q4gsw_as(x, packed, scales, 32, accumulate="float16", lanes=1, fused=True)
    many, _ = arithmetic.linear_q4gsw_as(x, packed, scales, 32, accumulate="float16", lanes=64, fused=True)
    separate, _ = arithmetic.linear_q4gsw_as(x, packed, scales, 32, accumulate="float16", lanes=1, fused=False)
    assert (one != many).sum() > 4 and (one != separate).sum() > 4


def test_float32_accumulation_is_the_exact_sum_with_the_float32_bound():
    rng = make_rng("arith-f32")
    x = rng.standard_normal((2, 128)).astype(np.float16)
    packed, scales = _q4gsw(rng, 6, 128, 32)
    got, slack = arithmetic.linear_q4gsw_as(x, packed, scales, 32, accumulate="float32")
    np.testing.assert_allclose(got, linear.linear_q4gsw(x, packed, scales, 32), rtol=1e-12)
    magnitude = np.abs(x.astype(np.float64)) @ np.abs(linear.dequantize_q4gsw_weight(packed, scales, 32, 128)).T
    np.testing.assert_allclose(slack, arithmetic.FLOAT32_ERROR * magnitude, rtol=1e-12)


def test_float16_slack_is_one_ulp_of_the_largest_partial_sum():
    """Terms that rise to 1000 and cancel back to 1 leave an accumulator whose roundings happened at 1000."""
    x = np.array([[1000.0, 1.0, -1000.0]], np.float16)
    value, slack = arithmetic.dot_as(x.astype(np.float64), np.ones((1, 3)), accumulate="float16", lanes=1, fused=True)
    assert value[0, 0] == 1.0 and slack[0, 0] == float(np.spacing(np.float16(1001)))


def loop_dq8ca(q_row, z: int, codes, step, *, fused: bool) -> float:
    """One output of ``accumulate_out_tile_with_int_accum_from_int4_weights`` over groups, in float16."""
    out = 0.0
    for g, s in enumerate(step):
        integer = int(sum((int(q) - z) * int(c) for q, c in zip(q_row[g], codes[g])))
        value = f16(integer)
        out = f16(value * s + out) if fused else f16(f16(value * s) + out)
    return out


@pytest.mark.parametrize("fused", [False, True])
def test_linear_dq8ca_q4gsw_as_matches_the_scalar_loop(fused):
    rng = make_rng(f"arith-dq8ca-{fused}")
    m, n, k, group = 3, 4, 64, 16
    x = (rng.standard_normal((m, k)) * 2).astype(np.float16)
    scale = (np.abs(x).max(axis=1) / 127).astype(np.float16)
    zero = rng.integers(-5, 6, m).astype(np.int8)
    packed, scales = _q4gsw(rng, n, k, group)
    codes = packing.unpack_int4_linear(packed, k).astype(np.int64)
    sums = np.zeros((k // group, 8), np.int32)
    sums[:, :n] = codes.reshape(n, k // group, group).sum(axis=2).T
    got, _ = arithmetic.linear_dq8ca_q4gsw_as(x, scale, zero, packed, sums, scales, group, accumulate="float16",
                                              fused=fused)
    inverse = np.float32(1) / scale.astype(np.float32)
    q = np.clip(np.rint(x.astype(np.float32) * inverse[:, None]) + zero[:, None], -128, 127)
    want = np.empty((m, n))
    for i in range(m):
        for j in range(n):
            step = [f16(float(np.float32(scale[i]) * np.float32(scales[g, j]))) for g in range(k // group)]
            want[i, j] = loop_dq8ca(q[i].reshape(-1, group), int(zero[i]), codes[j].reshape(-1, group), step,
                                    fused=fused)
    np.testing.assert_array_equal(got, want)


def test_linear_dq8ca_q4gsw_as_float32_is_the_op():
    """With float32 accumulators the emulation is the exact reference, rounded once (and quantizing as the shader)."""
    rng = make_rng("arith-dq8ca-f32")
    m, n, k, group = 4, 8, 128, 32
    x = rng.standard_normal((m, k)).astype(np.float32)
    scale = (np.abs(x).max(axis=1) / 127).astype(np.float32)
    zero = np.zeros(m, np.int8)
    packed, scales = _q4gsw(rng, n, k, group)
    sums = np.zeros((k // group, n), np.int32)
    sums[:] = packing.unpack_int4_linear(packed, k).reshape(n, k // group, group).sum(axis=2).T
    got, _ = arithmetic.linear_dq8ca_q4gsw_as(x, scale, zero, packed, sums, scales, group, accumulate="float32")
    exact = linear.linear_dq8ca_q4gsw(x, scale, zero, packed, sums, scales, group)
    np.testing.assert_allclose(got, exact, rtol=1e-6, atol=1e-7)


def test_no_dq8ca_kernel_splits_k_over_lanes():
    with pytest.raises(ValueError, match="no dq8ca kernel splits K over lanes"):
        arithmetic.linear_dq8ca_q4gsw_as(np.ones((1, 8), np.float16), np.ones(1), np.zeros(1), np.zeros((8, 4), np.uint8),
                                         np.zeros((1, 8), np.int32), np.ones((1, 8)), 8, accumulate="float16", lanes=64)


def test_rounding_on_the_float16_grid_is_the_float16_conversion_bit_for_bit():
    """``_round_half_grid`` (float32 arithmetic) against numpy's conversion: random bit patterns up to the largest
    half, every tie between neighbouring halves, both signs of zero and of the tiniest values."""
    rng = make_rng("round_half_grid")
    patterns = rng.integers(0, np.float32(arithmetic.HALF_MAX).view(np.uint32) + 1, 1_000_000, dtype=np.uint32)
    patterns |= rng.integers(0, 2, patterns.size, dtype=np.uint32) << np.uint32(31)
    halves = np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    ties = (halves[:-1] + halves[1:]) / 2
    edges = [0.0, -0.0, 2.0 ** -25, -(2.0 ** -25), -3 * 2.0 ** -26, 2.0 ** -24, -(2.0 ** -150), 65519.99]
    values = np.concatenate([patterns.view(np.float32), ties, -ties, halves, -halves, edges]).astype(np.float32)
    want = values.astype(np.float16).astype(np.float32)
    scratch = np.empty((2, values.size), np.uint32)
    apart = arithmetic._round_half_grid(values, scratch, np.empty_like(values))
    in_place = values.copy()
    arithmetic._round_half_grid(in_place, scratch, in_place)
    for got in (apart, in_place):
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("fused", [True, False])
def test_a_sum_past_the_largest_half_is_inf_from_there_on_as_the_loop_says(fused):
    """Products and partial sums beyond float16's range take the float16 path: inf (or NaN) as the kernel gets."""
    x = np.full((2, 24), 300.0)
    x[0, ::2] = -300.0
    x[1, 12:] = -1.0
    w = np.full((3, 24), 250.0)
    w[1] = 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        value, _ = arithmetic.dot_as(x, w, accumulate="float16", lanes=1, fused=fused)
        want = [[loop_dot(row, col, lanes=1, fused=fused) for col in w] for row in x]
    assert np.array_equal(value, np.array(want), equal_nan=True)
    assert not np.isfinite(value).all() and np.isfinite(value).any()


@pytest.mark.parametrize("scales_as", ["float16", "wide", "past_half_range", "nan"])
def test_half_weights_are_the_float64_products_rounded_once(scales_as):
    """float32 products of codes and short scales against the float64 products, rounded to float16 bit for bit;
    scales too wide for an exact float32 product, products past the largest half and NaN scales included."""
    rng = make_rng(f"half-weights-{scales_as}")
    n, k, group = 12, 64, 16
    packed, scales = _q4gsw(rng, n, k, group)
    scales = scales.astype(np.float32)
    if scales_as == "wide":  # 7 * scale is 1 + 2**-11 + 2**-25: a float32 product would round to the tie first
        scales[:, :n] = rng.uniform(0.01, 0.03, (k // group, n)).astype(np.float32)
        packed[0, 0] = (packed[0, 0] & 0xF0) | 0xF
        scales[0, 0] = 4795831 / 2 ** 25
    elif scales_as == "past_half_range":
        scales[0, :n] = 9000.0 + np.arange(n)
    elif scales_as == "nan":
        scales[1, 2] = np.nan
    with np.errstate(over="ignore", invalid="ignore"):
        got = arithmetic._half_weights(packed, scales, group, k)
        want = arithmetic.round_to(linear.dequantize_q4gsw_weight(packed, scales, group, k), np.float16)
    assert got.dtype == np.float32
    assert np.array_equal(got.astype(np.float64).view(np.uint64), want.view(np.uint64))


def test_laid_out_weights_are_taken_again_only_for_equal_arrays():
    """The other fma model reuses the weights laid out for the first; weights changed in place are laid out again
    (the scalar loop decides both)."""
    rng = make_rng("half-weights-reuse")
    m, n, k, group = 2, 4, 32, 16
    x = rng.standard_normal((m, k)).astype(np.float16)
    packed, scales = _q4gsw(rng, n, k, group)

    def loop(scales):
        w = linear.dequantize_q4gsw_weight(packed, scales, group, k).astype(np.float16).astype(np.float64)
        return np.array([[loop_dot(x[i], w[j], lanes=1, fused=True) for j in range(n)] for i in range(m)])

    first, _ = arithmetic.linear_q4gsw_as(x, packed, scales, group, accumulate="float16")
    scales[:, :n] *= np.float16(2.5)
    again, _ = arithmetic.linear_q4gsw_as(x, packed, scales, group, accumulate="float16")
    np.testing.assert_array_equal(again, loop(scales))
    assert not np.array_equal(first, again)
