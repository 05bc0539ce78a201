"""vkdiff.reference.linear against torchao-quantized eager torch and ET-VK's
own eager ``et_vk.linear_q4gsw`` op."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torchao.quantization import IntxWeightOnlyConfig, PerGroup, quantize_

from vkdiff.reference import linear, packing

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
