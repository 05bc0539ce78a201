"""vkdiff.reference.quantized.q8ta against quantized_decomposed + float64 torch linears
and ET-VK's eager ``et_vk.{linear_q8ta_q8csw, q8ta_linear, q8ta_linear_gemv,
q8ta_add}`` ops."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (quantized_decomposed ops)
from hypothesis import given, settings
from hypothesis import strategies as st

from vkdiff.reference.quantized import packing, q8ta, quant

from .helpers import assert_rel_close, fp32_dot_bound, make_rng, random_weight

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (et_vk ops)

_QD = torch.ops.quantized_decomposed


def _q8csw_weight(rng: np.random.Generator, n: int, k: int):
    """int8 per-channel symmetric weight ([-127, 127]) with ET-VK-padded params."""
    w = rng.integers(-127, 128, size=(n, k), dtype=np.int8)
    w[0, 0] = -127
    scales = np.abs(random_weight(rng, (n,))) * np.float32(0.01) + np.float32(1e-4)
    return w, scales, packing.weight_sums_per_channel(w), packing.pad_last_dim(scales, 4)


def _static_oracle(x, s_x, z_x, w, w_scales, bias) -> tuple[np.ndarray, np.ndarray]:
    """quantized_decomposed.quantize_per_tensor, then exact float64 dequant of
    both sides and a float64 torch linear."""
    q = _QD.quantize_per_tensor(torch.from_numpy(x), s_x, z_x, -128, 127, torch.int8)
    x_dq = (q.double() - z_x) * float(np.float32(s_x))
    w_dq = torch.from_numpy(w).double() * torch.from_numpy(w_scales).double()[:, None]
    b = None if bias is None else torch.from_numpy(bias).double()
    return torch.nn.functional.linear(x_dq, w_dq, b).numpy(), q.numpy()


@pytest.mark.parametrize("m,n,k", [(1, 8, 64), (7, 13, 96), (37, 20, 40), (4, 33, 256)])
def test_linear_q8ta_q8csw_matches_oracle(rng: np.random.Generator, m, n, k) -> None:
    w, scales, sums, scales_p = _q8csw_weight(rng, n, k)
    x = random_weight(rng, (m, k))
    bias = random_weight(rng, (n,))
    s_x, z_x = 0.0173, -9
    expected, q = _static_oracle(x, s_x, z_x, w, scales, bias)
    np.testing.assert_array_equal(quant.quantize_per_tensor(x, s_x, z_x), q)
    out = q8ta.linear_q8ta_q8csw(x, s_x, z_x, w, sums, scales_p, packing.pad_last_dim(bias, 4))
    assert out.dtype == np.float64 and out.shape == (m, n)
    assert_rel_close(out, expected, rtol=1e-6)


def test_etvk_eager_linear_q8ta_q8csw_ignores_input_quantization(rng: np.random.Generator) -> None:
    """The eager op multiplies the float x by the dequantized weight: it agrees
    with us (within fp32 rounding) only on already-quantized input."""
    m, n, k = 6, 16, 128
    w, scales, sums, _ = _q8csw_weight(rng, n, k)
    x = random_weight(rng, (m, k))
    bias = random_weight(rng, (n,))
    s_x, z_x = 0.05, 4
    ours = q8ta.linear_q8ta_q8csw(x, s_x, z_x, w, sums, scales, bias)
    x_fq = quant.dequantize_per_tensor(quant.quantize_per_tensor(x, s_x, z_x), s_x, z_x)
    w_deq = w.astype(np.float64) * scales.astype(np.float64)[:, None]
    bound = fp32_dot_bound(x_fq, w_deq) + np.abs(ours) * 2 * np.finfo(np.float32).eps

    def eager(inp: np.ndarray) -> np.ndarray:
        return torch.ops.et_vk.linear_q8ta_q8csw(
            torch.from_numpy(inp), s_x, z_x, torch.from_numpy(w), torch.from_numpy(sums),
            torch.from_numpy(scales), torch.from_numpy(bias),
        ).numpy()

    assert (np.abs(eager(x_fq) - ours) <= bound).all()
    assert (np.abs(eager(x) - ours) > bound).any()


def _tie_tolerant_codes_equal(ours, oracle, y, s_out, slack) -> None:
    """Codes equal, except +-1 where y / s_out is within ``slack`` of a .5 tie."""
    diff = ours.astype(np.int32) - oracle.astype(np.int32)
    v = y / np.float64(np.float32(s_out))
    near_tie = np.abs(v - np.floor(v) - 0.5) <= slack
    assert (np.abs(diff) <= 1).all()
    assert (near_tie | (diff == 0)).all(), np.argwhere(~near_tie & (diff != 0))[:5]


@pytest.mark.parametrize("activation", ["none", "relu"])
@pytest.mark.parametrize("m,n,k", [(1, 12, 64), (9, 20, 96), (16, 8, 256)])
def test_q8ta_linear_matches_etvk_eager(rng: np.random.Generator, activation, m, n, k) -> None:
    w, scales, sums, scales_p = _q8csw_weight(rng, n, k)
    xq = rng.integers(-128, 128, size=(m, k), dtype=np.int8)
    bias = random_weight(rng, (n,)) * np.float32(0.1)
    s_x, z_x, s_out, z_out = 0.02, 3, 0.011, -6
    ours = q8ta.q8ta_linear(
        xq, s_x, z_x, w, sums, scales_p, s_out, z_out, packing.pad_last_dim(bias, 4), activation
    )
    assert ours.dtype == np.int8 and ours.shape == (m, n)
    op = torch.ops.et_vk.q8ta_linear_gemv if m == 1 else torch.ops.et_vk.q8ta_linear
    eager = op(
        torch.from_numpy(xq), s_x, z_x, torch.from_numpy(w), torch.from_numpy(sums),
        torch.from_numpy(scales), s_out, z_out, torch.from_numpy(bias), activation,
    ).numpy()
    x_dq = quant.dequantize_per_tensor(xq, s_x, z_x, np.float64)
    w_deq = w.astype(np.float64) * scales.astype(np.float64)[:, None]
    y = x_dq @ w_deq.T + bias
    if activation == "relu":
        y = np.maximum(y, 0)
    slack = (fp32_dot_bound(x_dq, w_deq) + 4 * np.abs(y) * np.finfo(np.float32).eps) / s_out
    _tie_tolerant_codes_equal(ours, eager, y, s_out, slack)
    assert (ours == 127).any() or (ours == -128).any() or activation == "relu"


@settings(max_examples=40, deadline=None)
@given(
    shape=st.sampled_from([(1,), (7,), (3, 5), (2, 3, 4), (1, 64)]),
    alpha=st.sampled_from([1.0, 0.5, -1.0, 2.75]),
    params=st.sampled_from(
        [
            (0.0123, 3, 0.0456, -5, 0.031, 2),
            (0.1, 0, 0.1, 0, 0.1, 0),
            (1e-3, -128, 2e-3, 127, 5e-4, 0),  # heavy saturation
            (3.0, 10, 0.25, -20, 7.0, -100),
        ]
    ),
)
def test_q8ta_add_matches_etvk_eager_bit_exact(shape, alpha, params) -> None:
    rng = make_rng("test_q8ta_add", shape, alpha, params)
    a = rng.integers(-128, 128, size=shape, dtype=np.int8)
    b = rng.integers(-128, 128, size=shape, dtype=np.int8)
    ours = q8ta.q8ta_add(a, b, *params, alpha=alpha)
    eager = torch.ops.et_vk.q8ta_add(torch.from_numpy(a), torch.from_numpy(b), *params, alpha)
    assert ours.dtype == np.int8
    np.testing.assert_array_equal(ours, eager.numpy())


def test_q8ta_add_worked_example_and_broadcast() -> None:
    a = np.array([[10, -10]], dtype=np.int8)  # (q - 0) * 0.5 = [5, -5]
    b = np.array([[4], [-4]], dtype=np.int8)  # (q - 2) * 0.25 = [[0.5], [-1.5]]
    out = q8ta.q8ta_add(a, b, 0.5, 0, 0.25, 2, 0.25, 1)
    # sums [[5.5, -4.5], [3.5, -6.5]] / 0.25 = [[22, -18], [14, -26]] + 1
    assert out.tolist() == [[23, -17], [15, -25]]


def test_q8ta_oracles_detect_wrong_zero_point_sign(rng: np.random.Generator) -> None:
    a = rng.integers(-128, 128, size=(200,), dtype=np.int8)
    b = rng.integers(-128, 128, size=(200,), dtype=np.int8)
    params = (0.0123, 3, 0.0456, -5, 0.031, 2)
    eager = torch.ops.et_vk.q8ta_add(torch.from_numpy(a), torch.from_numpy(b), *params, 1.0)
    wrong = q8ta.q8ta_add(a, b, params[0], -params[1], *params[2:])
    assert not np.array_equal(wrong, eager.numpy())
    m, n, k = 5, 8, 64
    w, scales, sums, _ = _q8csw_weight(rng, n, k)
    x = random_weight(rng, (m, k))
    expected, _ = _static_oracle(x, 0.05, 7, w, scales, None)
    with pytest.raises(AssertionError):
        assert_rel_close(q8ta.linear_q8ta_q8csw(x, 0.05, 7, w, -sums, scales), expected)


def test_q8ta_rejects_bad_inputs(rng: np.random.Generator) -> None:
    w, scales, sums, _ = _q8csw_weight(rng, 4, 16)
    xq = np.zeros((2, 16), np.int8)
    with pytest.raises(ValueError):
        q8ta.q8ta_linear(xq, 0.1, 0, w, sums, scales, 0.1, 0, activation="gelu")
    with pytest.raises(TypeError):
        q8ta.q8ta_linear(xq.astype(np.float32), 0.1, 0, w, sums, scales, 0.1, 0)
    with pytest.raises(ValueError):
        q8ta.linear_q8ta_q8csw(np.zeros((2, 8), np.float32), 0.1, 0, w, sums, scales)
    with pytest.raises(ValueError):
        q8ta.linear_q8ta_q8csw(np.zeros((2, 16), np.float32), 0.1, 0.5, w, sums, scales)
