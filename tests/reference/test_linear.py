"""vkdiff.reference.quantized.linear against torchao-quantized eager torch and ET-VK's
own eager ``et_vk.linear_q4gsw`` op; ``linear_dq8ca_q4gsw`` against torchao's
activation quantization primitives + a float64 torch linear (ET-VK's eager
dq8ca op ignores activation quantization, see the divergence test)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torchao.quantization import IntxWeightOnlyConfig, PerGroup, quantize_
from torchao.quantization.quant_primitives import MappingType
from torchao.quantization.quant_primitives import choose_qparams_affine as ao_choose_qparams_affine
from torchao.quantization.quant_primitives import quantize_affine as ao_quantize_affine

from vkdiff.reference.quantized import linear, packing, quant

from .helpers import assert_rel_close, fp32_dot_bound, make_rng, random_weight

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (registers et_vk ops)


def _torchao_linear(
    rng: np.random.Generator, n: int, k: int, gs: int, bias: bool = True
) -> tuple[torch.nn.Linear, np.ndarray]:
    """A torchao int4 group-wise quantized nn.Linear and its float weight."""
    lin = torch.nn.Linear(k, n, bias=bias)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(random_weight(rng, (n, k))))
        if bias:
            lin.bias.copy_(torch.from_numpy(random_weight(rng, (n,))))
    w = lin.weight.detach().numpy().copy()
    quantize_(lin, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(gs)))
    return lin, w


def _torch_f64_oracle(
    x: np.ndarray, qdata: torch.Tensor, scale: torch.Tensor, gs: int, bias
) -> np.ndarray:
    """Independent eager-torch float64 computation on torchao's stored tensors."""
    w = qdata.to(torch.float64) * scale.to(torch.float64).repeat_interleave(gs, dim=1)
    b = None if bias is None else torch.as_tensor(bias).to(torch.float64)
    return torch.nn.functional.linear(torch.from_numpy(x).to(torch.float64), w, b).numpy()


@pytest.mark.parametrize("n,k,gs", [(37, 256, 32), (64, 128, 64), (5, 96, 32)])
def test_quantize_int4_group_symmetric_matches_torchao(
    rng: np.random.Generator, n: int, k: int, gs: int
) -> None:
    lin, w = _torchao_linear(rng, n, k, gs)
    codes, scales = linear.quantize_int4_group_symmetric(w, gs)
    assert codes.dtype == np.int8 and scales.dtype == np.float32
    np.testing.assert_array_equal(codes, lin.weight.qdata.numpy())
    np.testing.assert_array_equal(
        scales.view(np.uint32), lin.weight.scale.numpy().view(np.uint32)
    )


@pytest.mark.parametrize("m,n,k,gs", [(1, 37, 256, 32), (7, 64, 128, 64), (32, 24, 512, 32)])
def test_linear_matches_torch_float64_oracle(
    rng: np.random.Generator, m: int, n: int, k: int, gs: int
) -> None:
    lin, w = _torchao_linear(rng, n, k, gs)
    x = random_weight(rng, (m, k))
    codes, scales = linear.quantize_int4_group_symmetric(w, gs)
    bias = lin.bias.detach().numpy()
    out = linear.linear_q4gsw(
        x, packing.pack_int4_linear(codes), packing.transpose_scales(scales), gs, bias
    )
    assert out.dtype == np.float64 and out.shape == (m, n)
    expected = _torch_f64_oracle(x, lin.weight.qdata, lin.weight.scale, gs, bias)
    assert_rel_close(out, expected, rtol=1e-6)


def test_linear_matches_torchao_module_forward(rng: np.random.Generator) -> None:
    """The float32 torchao module output is within a rigorous fp32 error bound."""
    m, n, k, gs = 9, 48, 256, 32
    lin, w = _torchao_linear(rng, n, k, gs)
    x = random_weight(rng, (m, k))
    codes, scales = linear.quantize_int4_group_symmetric(w, gs)
    out = linear.linear_q4gsw(
        x, packing.pack_int4_linear(codes), packing.transpose_scales(scales), gs,
        lin.bias.detach().numpy(),
    )
    with torch.no_grad():
        got = lin(torch.from_numpy(x)).numpy().astype(np.float64)
    w_deq = linear.dequantize_q4gsw_weight(
        packing.pack_int4_linear(codes), packing.transpose_scales(scales), gs, k
    )
    bound = fp32_dot_bound(x, w_deq) + np.abs(out) * np.finfo(np.float32).eps
    assert (np.abs(got - out) <= bound).all()


@pytest.mark.parametrize("m,n,k,gs", [(3, 16, 128, 32), (1, 64, 64, 16), (8, 12, 256, 128)])
def test_linear_matches_etvk_eager_op(
    rng: np.random.Generator, m: int, n: int, k: int, gs: int
) -> None:
    """Same packed bytes / transposed scales fed to ET-VK's own eager op.

    N is a multiple of 4 here because ET-VK's eager ``linear_q4gsw`` cannot
    consume width-padded scales (it views them as ``[N, G]``).
    """
    w = random_weight(rng, (n, k))
    x = random_weight(rng, (m, k))
    bias = random_weight(rng, (n,))
    codes, scales = linear.quantize_int4_group_symmetric(w, gs)
    packed = packing.pack_int4_linear(codes, inner_dim_padding=8)
    scales_t = packing.transpose_scales(scales)
    ours = linear.linear_q4gsw(x, packed, scales_t, gs, bias)
    etvk = torch.ops.et_vk.linear_q4gsw(
        torch.from_numpy(x), torch.from_numpy(packed), torch.from_numpy(scales_t), gs,
        torch.from_numpy(bias),
    ).numpy()
    w_deq = linear.dequantize_q4gsw_weight(packed, scales_t, gs, k)
    bound = fp32_dot_bound(x, w_deq) + np.abs(ours) * np.finfo(np.float32).eps
    assert (np.abs(etvk - ours) <= bound).all()


@settings(max_examples=40, deadline=None)
@given(
    m=st.sampled_from([1, 2, 3, 5, 13]),
    n=st.sampled_from([1, 3, 7, 11, 13, 29, 33]),
    groups=st.sampled_from([1, 2, 3, 5]),
    gs=st.sampled_from([8, 16, 32]),
    with_bias=st.booleans(),
)
def test_linear_property_over_shapes(m, n, groups, gs, with_bias) -> None:
    rng = make_rng("test_linear_property_over_shapes", m, n, groups, gs, with_bias)
    k = groups * gs
    w = random_weight(rng, (n, k))
    x = random_weight(rng, (m, k))
    bias = random_weight(rng, (n,)) if with_bias else None
    codes, scales = linear.quantize_int4_group_symmetric(w, gs)
    scales_t = packing.transpose_scales(scales)
    out = linear.linear_q4gsw(x, packing.pack_int4_linear(codes), scales_t, gs, bias)
    expected = _torch_f64_oracle(
        x, torch.from_numpy(codes), torch.from_numpy(scales), gs, bias
    )
    assert_rel_close(out, expected, rtol=1e-6)
    # padded bias (length N_padded) and K-padded packing give the same result
    padded_bias = None if bias is None else packing.pad_last_dim(bias, 4)
    out2 = linear.linear_q4gsw(
        x, packing.pack_int4_linear(codes, inner_dim_padding=8), scales_t, gs, padded_bias
    )
    np.testing.assert_array_equal(out2, out)


def test_linear_k_padding_is_ignored(rng: np.random.Generator) -> None:
    """K=12 (gs=4) packed with inner_dim_padding=8 -> 16 codes; only 12 used."""
    n, k, gs = 5, 12, 4
    w = random_weight(rng, (n, k))
    x = random_weight(rng, (2, k))
    codes, scales = linear.quantize_int4_group_symmetric(w, gs)
    packed = packing.pack_int4_linear(codes, inner_dim_padding=8)
    assert packed.shape == (n, 8)
    out = linear.linear_q4gsw(x, packed, packing.transpose_scales(scales), gs)
    expected = _torch_f64_oracle(x, torch.from_numpy(codes), torch.from_numpy(scales), gs, None)
    assert_rel_close(out, expected)


def test_linear_batched_leading_dims(rng: np.random.Generator) -> None:
    n, k, gs = 9, 64, 32
    codes, scales = linear.quantize_int4_group_symmetric(random_weight(rng, (n, k)), gs)
    x = random_weight(rng, (2, 3, k))
    args = (packing.pack_int4_linear(codes), packing.transpose_scales(scales), gs)
    out = linear.linear_q4gsw(x, *args)
    assert out.shape == (2, 3, n)
    np.testing.assert_array_equal(out.reshape(6, n), linear.linear_q4gsw(x.reshape(6, k), *args))


@pytest.mark.parametrize("corruption", ["swapped_nibbles", "untransposed_scales", "one_code"])
def test_oracle_detects_corrupted_inputs(rng: np.random.Generator, corruption: str) -> None:
    """The comparison can fail: layout mistakes produce a clear mismatch."""
    m, n, k, gs = 4, 16, 128, 32
    codes, scales = linear.quantize_int4_group_symmetric(random_weight(rng, (n, k)), gs)
    x = random_weight(rng, (m, k))
    expected = _torch_f64_oracle(x, torch.from_numpy(codes), torch.from_numpy(scales), gs, None)
    packed = packing.pack_int4_linear(codes)
    scales_t = packing.transpose_scales(scales)
    if corruption == "swapped_nibbles":
        packed = ((packed & 0x0F) << 4) | (packed >> 4)
    elif corruption == "untransposed_scales":
        # [N, G] data reinterpreted as [G, N]: wrong scale for most (n, g)
        scales_t = np.ascontiguousarray(scales).reshape(k // gs, n)
    else:
        bad = codes.copy()
        bad[3, 17] = 7 if bad[3, 17] != 7 else -8
        packed = packing.pack_int4_linear(bad)
    out = linear.linear_q4gsw(x, packed, scales_t, gs)
    with pytest.raises(AssertionError):
        assert_rel_close(out, expected, rtol=1e-6)


def test_linear_rejects_bad_shapes(rng: np.random.Generator) -> None:
    codes, scales = linear.quantize_int4_group_symmetric(random_weight(rng, (8, 64)), 32)
    packed = packing.pack_int4_linear(codes)
    x = random_weight(rng, (2, 64))
    with pytest.raises(ValueError):
        linear.linear_q4gsw(x, packed, scales, 32)  # [N, G] instead of [G, N]
    with pytest.raises(ValueError):
        linear.linear_q4gsw(x, packed, packing.transpose_scales(scales), 48)


# --- linear_dq8ca_q4gsw ---------------------------------------------------------


def _dq8ca_weights(rng: np.random.Generator, n: int, k: int, gs: int):
    """int4 codes/scales of a random weight, in ET-VK's stored layouts."""
    codes, scales = linear.quantize_int4_group_symmetric(random_weight(rng, (n, k)), gs)
    return (
        codes,
        scales,
        packing.pack_int4_linear(codes, inner_dim_padding=8),
        packing.weight_sums(codes, gs),
        packing.transpose_scales(scales),
    )


def _torchao_dq8ca_oracle(
    x: np.ndarray, codes: np.ndarray, scales: np.ndarray, gs: int, bias, zp_dtype=torch.int8
):
    """torchao choose_qparams_affine / quantize_affine on the activations, then
    an exact float64 dequantization of both sides and a float64 torch linear."""
    m, k = x.shape
    tx = torch.from_numpy(x)
    s, z = ao_choose_qparams_affine(
        tx, MappingType.ASYMMETRIC, (1, k), torch.int8, -128, 127, zero_point_dtype=zp_dtype
    )
    q = ao_quantize_affine(tx, (1, k), s, z, torch.int8, -128, 127)
    x_dq = (q.double() - z.double()[:, None]) * s.double()[:, None]
    w_scales = torch.from_numpy(scales).double().repeat_interleave(gs, 1)
    w_dq = torch.from_numpy(codes).double() * w_scales
    b = None if bias is None else torch.as_tensor(bias).double()
    out = torch.nn.functional.linear(x_dq, w_dq, b).numpy()
    return out, s.numpy(), z.numpy(), q.numpy()


def _assert_rows_close(actual: np.ndarray, expected: np.ndarray, rtol: float = 1e-6) -> None:
    """Row-wise relative check (rows of very different magnitude), same NaN/inf pattern."""
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(np.isfinite(actual), np.isfinite(expected))
    row_scale = np.abs(expected).max(axis=-1, keepdims=True)
    tol = rtol * np.maximum(row_scale, np.finfo(np.float64).tiny)
    assert (np.abs(actual - expected) <= tol).all(), np.abs(actual - expected).max()


@pytest.mark.parametrize(
    "m,n,k,gs", [(1, 16, 64, 32), (7, 13, 96, 32), (37, 24, 64, 16), (4, 40, 384, 128)]
)
def test_dq8ca_matches_torchao_oracle(rng: np.random.Generator, m, n, k, gs) -> None:
    codes, scales, packed, sums, scales_t = _dq8ca_weights(rng, n, k, gs)
    x = random_weight(rng, (m, k))
    bias = random_weight(rng, (n,))
    expected, s, z, _ = _torchao_dq8ca_oracle(x, codes, scales, gs, bias)
    assert z.dtype == np.int8
    out = linear.linear_dq8ca_q4gsw(x, s, z, packed, sums, scales_t, gs, bias)
    assert out.dtype == np.float64 and out.shape == (m, n)
    _assert_rows_close(out, expected)
    # identical for float32 zero points (torchao per_token_dynamic_quant style)
    expected_f, s_f, z_f, _ = _torchao_dq8ca_oracle(x, codes, scales, gs, bias, torch.float32)
    assert z_f.dtype == np.float32
    np.testing.assert_array_equal(expected_f, expected)
    np.testing.assert_array_equal(
        linear.linear_dq8ca_q4gsw(x, s_f, z_f, packed, sums, scales_t, gs, bias), out
    )
    # our own qparams are bit-identical to torchao's
    out2, s2, z2 = linear.linear_dq8ca_q4gsw_dynamic(x, packed, sums, scales_t, gs, bias)
    np.testing.assert_array_equal(s2.view(np.uint32), s.view(np.uint32))
    np.testing.assert_array_equal(z2, z)
    np.testing.assert_array_equal(out2, out)


def test_dq8ca_equals_q4gsw_on_fake_quantized_input(rng: np.random.Generator) -> None:
    """Self-consistency: the integer path == weight-only linear on (q - z) * s."""
    n, k, gs = 20, 128, 32
    codes, scales, packed, sums, scales_t = _dq8ca_weights(rng, n, k, gs)
    x = random_weight(rng, (2, 3, k))  # leading dims
    s, z = quant.choose_qparams_per_token_asymmetric(x)
    out = linear.linear_dq8ca_q4gsw(x, s, z, packed, sums, scales_t, gs)
    assert out.shape == (2, 3, n)
    q = quant.quantize_per_token(x, s, z)
    z64, s64 = z.astype(np.float64)[..., None], s.astype(np.float64)[..., None]
    x_dq = (q.astype(np.float64) - z64) * s64
    assert_rel_close(out, linear.linear_q4gsw(x_dq, packed, scales_t, gs), rtol=1e-12)


@pytest.mark.parametrize("weight_sums_kind", ["true", "arbitrary"])
def test_dq8ca_matches_literal_per_group_integer_formula(
    rng: np.random.Generator, weight_sums_kind: str
) -> None:
    """The shader's formula evaluated literally (int64 per-group accumulators,
    then s_x * sum_g s_w * (acc - z * ws)); also with weight sums that are not
    the code sums, which the op must then use as given. Zero rows give exactly
    the bias."""
    m, n, k, gs = 9, 11, 96, 32
    groups = k // gs
    codes, scales, packed, sums, scales_t = _dq8ca_weights(rng, n, k, gs)
    if weight_sums_kind == "arbitrary":
        sums = rng.integers(-300, 300, size=sums.shape).astype(np.int32)
    x = random_weight(rng, (m, k))
    x[4] = 0.0
    bias = random_weight(rng, (n,))
    s, z = quant.choose_qparams_per_token_asymmetric(x)
    q = quant.quantize_per_token(x, s, z).astype(np.int64)
    c64 = codes.astype(np.int64).reshape(n, groups, gs)
    acc = np.einsum("mgj,ngj->gmn", q.reshape(m, groups, gs), c64)
    adj = acc - z.astype(np.int64)[None, :, None] * sums[:, None, :n].astype(np.int64)
    lit = (adj * scales.T.astype(np.float64)[:, None, :]).sum(0)
    lit = lit * s.astype(np.float64)[:, None] + bias
    out = linear.linear_dq8ca_q4gsw(x, s, z, packed, sums, scales_t, gs, bias)
    _assert_rows_close(out, lit, rtol=1e-12)
    np.testing.assert_array_equal(out[4], bias.astype(np.float64))


@pytest.mark.parametrize("m,n,k,gs", [(5, 16, 128, 32), (12, 8, 64, 64)])
def test_etvk_eager_dq8ca_ignores_activation_quantization(
    rng: np.random.Generator, m, n, k, gs
) -> None:
    """Why the eager op is not an oracle for dq8ca: it returns linear_q4gsw of
    the float input, whatever input_scale / input_zero_point say."""
    codes, scales, packed, sums, scales_t = _dq8ca_weights(rng, n, k, gs)
    x = random_weight(rng, (m, k))
    bias = random_weight(rng, (n,))
    s, z = quant.choose_qparams_per_token_asymmetric(x)
    args = [torch.from_numpy(a) for a in (x, s, z, packed, sums, scales_t)]
    eager = torch.ops.et_vk.linear_dq8ca_q4gsw(*args, gs, torch.from_numpy(bias)).numpy()
    garbage = torch.ops.et_vk.linear_dq8ca_q4gsw(
        args[0], args[1] * 1000, args[2] * 0 + 77, *args[3:], gs, torch.from_numpy(bias)
    ).numpy()
    np.testing.assert_array_equal(eager, garbage)  # qparams have no effect
    weight_only = linear.linear_q4gsw(x, packed, scales_t, gs, bias)
    w_deq = linear.dequantize_q4gsw_weight(packed, scales_t, gs, k)
    bound = fp32_dot_bound(x, w_deq) + np.abs(weight_only) * np.finfo(np.float32).eps
    assert (np.abs(eager - weight_only) <= bound).all()
    ours = linear.linear_dq8ca_q4gsw(x, s, z, packed, sums, scales_t, gs, bias)
    assert (np.abs(eager - ours) > bound).any()  # activation rounding is visible


_REGIMES = ["normal", "zero_rows", "one_signed", "large", "small", "subnormal", "mixed"]


def _regime_input(rng: np.random.Generator, m: int, k: int, regime: str) -> np.ndarray:
    x = random_weight(rng, (m, k)).astype(np.float64)
    if regime == "zero_rows":
        x[::2] = 0.0
    elif regime == "one_signed":
        x[0::2] = -np.abs(x[0::2])
        x[1::2] = np.abs(x[1::2]) + 5.0
    elif regime == "large":
        x *= 1e30
    elif regime == "small":
        x *= 1e-30
    elif regime == "subnormal":
        x *= 1e-40
    elif regime == "mixed":
        x *= 10.0 ** rng.choice([-40.0, -20.0, 0.0, 20.0, 30.0], size=(m, 1))
        x[m // 2] = 0.0
    return x.astype(np.float32)


@settings(max_examples=40, deadline=None)
@given(
    m=st.sampled_from([1, 2, 3, 5, 13, 37]),
    n=st.sampled_from([1, 3, 7, 11, 13, 29, 33]),
    groups=st.sampled_from([1, 2, 3, 5]),
    gs=st.sampled_from([4, 8, 16, 32, 96]),
    regime=st.sampled_from(_REGIMES),
    zp_float=st.booleans(),
)
def test_dq8ca_property_over_shapes_and_values(m, n, groups, gs, regime, zp_float) -> None:
    """Primes, a single row, M > K/2, N not a multiple of 8, K a multiple of
    gs but (mostly) not of 128; zero / one-signed / huge / tiny / subnormal rows."""
    rng = make_rng("test_dq8ca_property", m, n, groups, gs, regime, zp_float)
    k = groups * gs
    codes, scales, packed, sums, scales_t = _dq8ca_weights(rng, n, k, gs)
    x = _regime_input(rng, m, k, regime)
    bias = random_weight(rng, (n,))
    zp_dtype = torch.float32 if zp_float else torch.int8
    expected, s, z, q = _torchao_dq8ca_oracle(x, codes, scales, gs, bias, zp_dtype)
    out = linear.linear_dq8ca_q4gsw(x, s, z, packed, sums, scales_t, gs, bias)
    assert not np.isnan(out).any() and np.isfinite(expected).all()
    _assert_rows_close(out, expected)
    # the 4H4W packing stage sees the same codes
    if gs % 4 == 0:
        packed_x, in_sums = packing.quantize_and_pack_4h4w_with_group_sums(x, s, z, gs)
        np.testing.assert_array_equal(packing.unpack_int8_4h4w(packed_x, m, k), q)
        np.testing.assert_array_equal(
            in_sums[:, :m], q.astype(np.int64).reshape(m, groups, gs).sum(-1).T
        )


@pytest.mark.parametrize("corruption", ["zero_point_sign", "weight_sums_stride", "nibbles"])
def test_dq8ca_oracle_detects_mistakes(rng: np.random.Generator, corruption: str) -> None:
    m, n, k, gs = 6, 12, 96, 32  # N % 8 == 4: the sums stride matters
    codes, scales, packed, sums, scales_t = _dq8ca_weights(rng, n, k, gs)
    x = random_weight(rng, (m, k)) + np.float32(1.0)  # nonzero zero points
    expected, s, z, _ = _torchao_dq8ca_oracle(x, codes, scales, gs, None)
    assert (z != 0).all()
    if corruption == "zero_point_sign":
        # right codes, zero-point correction with the wrong sign: acc + z * ws
        out = linear.linear_dq8ca_q4gsw(x, s, z, packed, -sums, scales_t, gs)
    elif corruption == "weight_sums_stride":
        # sums read with the shader's ceil(N/4)*4 stride from the pad-8 buffer
        n4 = -(-n // 4)
        flat = sums.reshape(-1)
        misread = np.stack([flat[g * 4 * n4 : g * 4 * n4 + n] for g in range(k // gs)])
        out = linear.linear_dq8ca_q4gsw(x, s, z, packed, misread, scales_t, gs)
    else:
        swapped = ((packed & 0x0F) << 4) | (packed >> 4)
        out = linear.linear_dq8ca_q4gsw(x, s, z, swapped, sums, scales_t, gs)
    with pytest.raises(AssertionError):
        _assert_rows_close(out, expected)


def test_dq8ca_etvk_qparams_wrapper(rng: np.random.Generator) -> None:
    """qparams='etvk' uses the GPU's choose_qparams; with those qparams the op
    still equals the oracle fed the same qparams."""
    m, n, k, gs = 8, 16, 64, 32
    codes, scales, packed, sums, scales_t = _dq8ca_weights(rng, n, k, gs)
    x = random_weight(rng, (m, k))
    x[3] = 0.0
    x[5] *= np.float32(1e-5)  # small range: scale clamped to 6.1e-5 on the GPU
    out, s, z = linear.linear_dq8ca_q4gsw_dynamic(x, packed, sums, scales_t, gs, qparams="etvk")
    s_ref, z_ref = quant.choose_qparams_per_row_etvk(x)
    np.testing.assert_array_equal(s, s_ref)
    assert s[3] == np.float32(0.1) and z[3] == 127 and s[5] == np.float32(6.1e-5)
    q = ao_quantize_affine(
        torch.from_numpy(x), (1, k), torch.from_numpy(s), torch.from_numpy(z), torch.int8, -128, 127
    )
    tz, ts = torch.from_numpy(z).double(), torch.from_numpy(s).double()
    x_dq = (q.double() - tz[:, None]) * ts[:, None]
    w_scales = torch.from_numpy(scales).double().repeat_interleave(gs, 1)
    w_dq = torch.from_numpy(codes).double() * w_scales
    _assert_rows_close(out, torch.nn.functional.linear(x_dq, w_dq).numpy())
    with pytest.raises(ValueError):
        linear.linear_dq8ca_q4gsw_dynamic(x, packed, sums, scales_t, gs, qparams="bogus")
