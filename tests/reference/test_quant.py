"""vkdiff.reference.quantized.quant against torchao 0.18, torch's quantized_decomposed /
ATen per-tensor quantization and ATen's ChooseQuantizationParams (the
independent oracles).

Integer codes, zero points and scales must match bit for bit (except where a
test documents a float64-vs-float32 bound).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (quantized_decomposed ops)
from torchao.quantization import (
    Int8DynamicActivationIntxWeightConfig,
    IntxWeightOnlyConfig,
    PerAxis,
    PerGroup,
    quantize_,
)
from torchao.quantization.quant_primitives import MappingType
from torchao.quantization.quant_primitives import choose_qparams_affine as ao_choose_qparams_affine
from torchao.quantization.quant_primitives import dequantize_affine as ao_dequantize_affine
from torchao.quantization.quant_primitives import quantize_affine as ao_quantize_affine
from torchao.quantization.quantize_.workflows.intx.intx_unpacked_to_int8_tensor import (
    _apply_int8_act_asym_per_token_quant_dequant,
)
from torchao.quantization.utils import per_token_dynamic_quant

from vkdiff.reference.quantized import quant

from .helpers import random_weight

_TORCH_DTYPE = {
    np.dtype(np.float16): torch.float16,
    np.dtype(np.float32): torch.float32,
    np.dtype(np.int8): torch.int8,
    np.dtype(np.uint8): torch.uint8,
    np.dtype(np.int32): torch.int32,
}


def assert_bit_equal(actual: np.ndarray, expected: torch.Tensor) -> None:
    """Same shape, same dtype and identical bits (float compared as raw bits)."""
    exp = expected.detach().numpy()
    assert actual.dtype == exp.dtype, (actual.dtype, exp.dtype)
    assert actual.shape == exp.shape, (actual.shape, exp.shape)
    if actual.dtype.kind == "f":
        ui = np.dtype(f"u{actual.dtype.itemsize}")
        np.testing.assert_array_equal(actual.view(ui), exp.view(ui))
    else:
        np.testing.assert_array_equal(actual, exp)


def test_int_range() -> None:
    assert quant.int_range(4) == (-8, 7)
    assert quant.int_range(8) == (-128, 127)
    assert quant.int_range(1) == (-1, 0)
    assert quant.int_range(4, signed=False) == (0, 15)
    with pytest.raises(ValueError):
        quant.int_range(9)


def test_get_reduction_params_docstring_example() -> None:
    shape, dims = quant.get_reduction_params((3, 3, 2, 10), (3, 3, 10, 10))
    assert shape == [3, 3, 5, 2, 10]
    assert dims == [0, 1, 3, 4]


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("group_size", [16, 32, 128])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_group_symmetric_matches_torchao_primitives(
    rng: np.random.Generator, bits: int, group_size: int, dtype: type
) -> None:
    w = random_weight(rng, (23, 256), dtype)
    qmin, qmax = quant.int_range(bits)
    scale, zp = quant.choose_qparams_group_symmetric(
        w, group_size, bits=bits, scale_dtype=None
    )
    tw = torch.from_numpy(w)
    block = (1, group_size)
    ao_s, ao_zp = ao_choose_qparams_affine(
        tw, MappingType.SYMMETRIC, block, torch.int8, qmin, qmax,
        zero_point_dtype=torch.int8, keepdim=True,
    )
    assert_bit_equal(scale, ao_s)
    assert_bit_equal(zp, ao_zp)
    codes = quant.quantize_affine(w, block, scale, zp, qmin, qmax, np.int8)
    assert_bit_equal(codes, ao_quantize_affine(tw, block, ao_s, ao_zp, torch.int8, qmin, qmax))
    deq = quant.dequantize_affine(codes, block, scale, zp, qmin, qmax, dtype)
    ao_deq = ao_dequantize_affine(
        torch.from_numpy(codes), block, ao_s, ao_zp, torch.int8, qmin, qmax,
        output_dtype=_TORCH_DTYPE[np.dtype(dtype)],
    )
    assert_bit_equal(deq, ao_deq)


@pytest.mark.parametrize(
    "granularity", [PerGroup(32), PerGroup(64), PerAxis(0)], ids=["g32", "g64", "axis0"]
)
def test_group_symmetric_matches_intx_weight_only_config(
    rng: np.random.Generator, granularity
) -> None:
    lin = torch.nn.Linear(192, 37)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(random_weight(rng, (37, 192))))
    w = lin.weight.detach().numpy().copy()
    quantize_(lin, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=granularity))
    qw = lin.weight
    gs = 192 if isinstance(granularity, PerAxis) else granularity.group_size
    scale, zp = quant.choose_qparams_group_symmetric(w, gs)
    assert_bit_equal(scale, qw.scale)
    assert_bit_equal(zp, qw.zero_point)
    codes = quant.quantize_affine(w, (1, gs), scale, zp, -8, 7)
    assert_bit_equal(codes, qw.qdata)
    assert codes.min() == -8 or codes.max() == 7  # range actually exercised


def test_fp16_weight_with_fp32_scale_dtype_matches_config(rng: np.random.Generator) -> None:
    """IntxWeightOnlyConfig(scale_dtype=float32) on an fp16 layer: qparams in
    fp16, scale cast to fp32, codes recomputed with the fp32 scale."""
    w16 = random_weight(rng, (19, 128), np.float16)
    lin = torch.nn.Linear(128, 19, bias=False, dtype=torch.float16)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(w16))
    quantize_(
        lin,
        IntxWeightOnlyConfig(
            weight_dtype=torch.int4, granularity=PerGroup(32), scale_dtype=torch.float32
        ),
    )
    scale, zp = quant.choose_qparams_group_symmetric(w16, 32, scale_dtype=np.float32)
    assert_bit_equal(scale, lin.weight.scale)
    assert_bit_equal(quant.quantize_affine(w16, (1, 32), scale, zp, -8, 7), lin.weight.qdata)


def test_int8_dynamic_activation_intx_weight_config_weights(rng: np.random.Generator) -> None:
    lin = torch.nn.Linear(256, 24)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(random_weight(rng, (24, 256))))
    w = lin.weight.detach().numpy().copy()
    quantize_(
        lin,
        Int8DynamicActivationIntxWeightConfig(
            weight_dtype=torch.int4, weight_granularity=PerGroup(32)
        ),
    )
    scale, zp = quant.choose_qparams_group_symmetric(w, 32)
    assert_bit_equal(scale, lin.weight.scale)
    assert_bit_equal(zp, lin.weight.zero_point)
    assert_bit_equal(quant.quantize_affine(w, (1, 32), scale, zp, -8, 7), lin.weight.qdata)


def test_round_half_to_even_worked_example() -> None:
    """amax = 7.5 -> scale = 1.0 exactly, so every x.5 is a rounding tie."""
    w = np.array([[7.5, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -7.5]], dtype=np.float32)
    scale, zp = quant.choose_qparams_group_symmetric(w, 8)
    assert scale.tolist() == [[1.0]]
    codes = quant.quantize_affine(w, (1, 8), scale, zp, -8, 7)
    # rint: 8->clamped 7, 0.5->0, 1.5->2, 2.5->2, -0.5->0, -1.5->-2, -2.5->-2, -7.5->-8
    assert codes.tolist() == [[7, 0, 2, 2, 0, -2, -2, -8]]
    ao = ao_quantize_affine(
        torch.from_numpy(w), (1, 8), torch.from_numpy(scale), torch.from_numpy(zp),
        torch.int8, -8, 7,
    )
    assert_bit_equal(codes, ao)


@pytest.mark.parametrize("eps", [None, float(np.finfo(np.float32).eps)], ids=["default", "f32eps"])
def test_scale_eps_clamp_on_tiny_groups(rng: np.random.Generator, eps) -> None:
    """Groups whose amax/7.5 underflows eps get scale == eps (torchao clamp)."""
    w = random_weight(rng, (4, 64))
    w[1, 32:] = (rng.standard_normal(32) * 1e-39).astype(np.float32)  # subnormals
    w[2, :32] = (rng.standard_normal(32) * 1e-9).astype(np.float32)
    scale, zp = quant.choose_qparams_group_symmetric(w, 32, eps=eps)
    ao_s, ao_zp = ao_choose_qparams_affine(
        torch.from_numpy(w), MappingType.SYMMETRIC, (1, 32), torch.int8, -8, 7,
        eps=eps, zero_point_dtype=torch.int8, keepdim=True,
    )
    assert_bit_equal(scale, ao_s)
    expected_eps = np.finfo(np.float32).smallest_normal if eps is None else eps
    assert scale[1, 1] == np.float32(expected_eps)
    codes = quant.quantize_affine(w, (1, 32), scale, zp, -8, 7)
    assert_bit_equal(codes, ao_quantize_affine(torch.from_numpy(w), (1, 32), ao_s, ao_zp, torch.int8, -8, 7))


def test_reciprocal_multiply_is_required(rng: np.random.Generator) -> None:
    """torchao computes x * (1/s), not x / s. Near rounding ties the two differ;
    a division-based oracle must therefore disagree with torchao somewhere
    (demonstrating this check can fail), while ours agrees everywhere."""
    rows, gs = 2048, 8
    amax = rng.uniform(0.1, 4.0, size=(rows, 1)).astype(np.float32)
    s = (amax / np.float32(7.5)).astype(np.float64)
    k = rng.integers(-7, 7, size=(rows, gs - 1))
    w = np.concatenate([amax, ((k + 0.5) * s).astype(np.float32)], axis=1)
    scale, zp = quant.choose_qparams_group_symmetric(w, gs)
    ours = quant.quantize_affine(w, (1, gs), scale, zp, -8, 7)
    ao = ao_quantize_affine(
        torch.from_numpy(w), (1, gs), torch.from_numpy(scale), torch.from_numpy(zp),
        torch.int8, -8, 7,
    )
    assert_bit_equal(ours, ao)
    by_division = np.clip(np.rint(w / np.repeat(scale, gs, axis=1)), -8, 7).astype(np.int8)
    assert (by_division != ao.numpy()).any()


# --- arbitrary block sizes, asymmetric mapping -------------------------------

_BLOCK_CASES = {
    "per_tensor": ((12, 64), (12, 64)),
    "per_channel_axis0": ((12, 64), (1, 64)),
    "per_channel_axis1": ((12, 64), (12, 1)),
    "per_group": ((12, 64), (1, 16)),
    "per_token_3d": ((2, 5, 48), (1, 1, 48)),
    "conv_group": ((6, 32, 3, 3), (1, 16, 1, 1)),
    "2d_blocks": ((12, 64), (4, 8)),
}


@pytest.mark.parametrize("case", list(_BLOCK_CASES))
@pytest.mark.parametrize(
    "mapping,qdtype,qrange",
    [
        ("asymmetric", np.uint8, (0, 255)),
        ("asymmetric", np.int8, (-128, 127)),
        ("symmetric", np.int8, (-8, 7)),
    ],
    ids=["asym_u8", "asym_i8", "sym_i4"],
)
@pytest.mark.parametrize("out_dtype", [np.float32, np.float16])
def test_affine_block_sizes_match_torchao(
    rng: np.random.Generator, case: str, mapping: str, qdtype, qrange, out_dtype
) -> None:
    shape, block = _BLOCK_CASES[case]
    x = random_weight(rng, shape) + np.float32(rng.uniform(-0.5, 0.5))
    qmin, qmax = qrange
    tx = torch.from_numpy(x)
    ao_map = MappingType.SYMMETRIC if mapping == "symmetric" else MappingType.ASYMMETRIC
    ao_s, ao_zp = ao_choose_qparams_affine(
        tx, ao_map, block, _TORCH_DTYPE[np.dtype(qdtype)], qmin, qmax,
        zero_point_dtype=torch.int32,
    )
    s, zp = quant.choose_qparams_affine(
        x, block, qmin, qmax, mapping=mapping, zero_point_dtype=np.int32
    )
    assert_bit_equal(s, ao_s)
    assert_bit_equal(zp, ao_zp)
    q = quant.quantize_affine(x, block, s, zp, qmin, qmax, qdtype)
    ao_q = ao_quantize_affine(tx, block, ao_s, ao_zp, _TORCH_DTYPE[np.dtype(qdtype)], qmin, qmax)
    assert_bit_equal(q, ao_q)
    d = quant.dequantize_affine(q, block, s, zp, qmin, qmax, out_dtype)
    ao_d = ao_dequantize_affine(
        ao_q, block, ao_s, ao_zp, _TORCH_DTYPE[np.dtype(qdtype)], qmin, qmax,
        output_dtype=_TORCH_DTYPE[np.dtype(out_dtype)],
    )
    assert_bit_equal(d, ao_d)


def test_dequantize_without_zero_point_matches_torchao(rng: np.random.Generator) -> None:
    q = rng.integers(-8, 8, size=(9, 64), dtype=np.int8)
    s = np.abs(random_weight(rng, (9, 4))) + np.float32(1e-3)
    d = quant.dequantize_affine(q, (1, 16), s, None, -8, 7, np.float32)
    ao = ao_dequantize_affine(
        torch.from_numpy(q), (1, 16), torch.from_numpy(s), None, torch.int8, -8, 7
    )
    assert_bit_equal(d, ao)


# --- per-token asymmetric activations ----------------------------------------


def _activation(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Rows that are mixed-sign, all-positive, all-negative and offset."""
    x = random_weight(rng, shape)
    flat = x.reshape(-1, shape[-1])
    flat[0::4] = np.abs(flat[0::4])  # all positive -> min_neg = 0 -> zp = qmin
    flat[1::4] = -np.abs(flat[1::4])  # all negative -> max_pos = 0 -> zp = qmax
    flat[2::4] += np.float32(3.0)  # large positive offset
    return x


@pytest.mark.parametrize("zp_dtype", [np.int8, np.float32, np.int32])
@pytest.mark.parametrize("shape", [(13, 96), (2, 7, 40), (1, 64)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_per_token_asymmetric_matches_torchao(
    rng: np.random.Generator, zp_dtype, shape, dtype
) -> None:
    x = _activation(rng, shape).astype(dtype)
    block = (1,) * (len(shape) - 1) + (shape[-1],)
    s, zp = quant.choose_qparams_per_token_asymmetric(x, zero_point_dtype=zp_dtype)
    ao_s, ao_zp = ao_choose_qparams_affine(
        torch.from_numpy(x), MappingType.ASYMMETRIC, block, torch.int8, -128, 127,
        zero_point_dtype=_TORCH_DTYPE[np.dtype(zp_dtype)],
    )
    assert_bit_equal(s, ao_s)
    assert_bit_equal(zp, ao_zp)
    assert s.shape == shape[:-1]
    s_k, zp_k = quant.choose_qparams_per_token_asymmetric(x, zero_point_dtype=zp_dtype, keepdim=True)
    assert s_k.shape == shape[:-1] + (1,)
    np.testing.assert_array_equal(zp_k.reshape(zp.shape), zp)
    if len(shape) == 2 and shape[0] >= 4:
        assert zp[0] == -128 and zp[1] == 127  # nudging for one-signed rows


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_per_token_quant_dequant_matches_int8_dynamic_activation_path(
    rng: np.random.Generator, dtype
) -> None:
    """Full activation fake-quant of Int8DynamicActivationIntxWeightConfig."""
    x = _activation(rng, (11, 160)).astype(dtype)
    s, zp = quant.choose_qparams_per_token_asymmetric(x)
    q = quant.quantize_affine(x, (1, 160), s, zp, -128, 127)
    d = quant.dequantize_affine(q, (1, 160), s, zp, -128, 127, dtype)
    ao = _apply_int8_act_asym_per_token_quant_dequant(torch.from_numpy(x))
    assert_bit_equal(d, ao)


def test_per_token_tiny_row_uses_eps(rng: np.random.Generator) -> None:
    x = _activation(rng, (6, 32))
    x[3] = (rng.standard_normal(32) * 1e-40).astype(np.float32)
    s, zp = quant.choose_qparams_per_token_asymmetric(x)
    ao_s, ao_zp = ao_choose_qparams_affine(
        torch.from_numpy(x), MappingType.ASYMMETRIC, (1, 32), torch.int8, -128, 127,
        zero_point_dtype=torch.int8,
    )
    assert_bit_equal(s, ao_s)
    assert_bit_equal(zp, ao_zp)
    assert s[3] == np.finfo(np.float32).smallest_normal


def test_rejects_bad_inputs() -> None:
    with pytest.raises(TypeError):
        quant.choose_qparams_group_symmetric(np.arange(8, dtype=np.int32), 4)
    with pytest.raises(ValueError):
        quant.choose_qparams_group_symmetric(np.ones((2, 10), np.float32) * np.arange(10), 4)
    with pytest.raises(ValueError):
        quant.get_reduction_params((1, 3), (4, 8))


# --- per-token dynamic quant: int8 vs float32 zero points ---------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_per_token_dynamic_quant_float_zero_point_path(rng: np.random.Generator, dtype) -> None:
    """torchao ``per_token_dynamic_quant(zero_point_dtype=float32)`` (the
    Int8DynActInt4WeightQuantizer activation path) is reproduced bit for bit,
    and int8 / float32 zero points give identical codes."""
    x = _activation(rng, (13, 96)).astype(dtype)
    x[5] = 0  # zero-range row
    s, z_f = quant.choose_qparams_per_token_asymmetric(
        x, scale_dtype=np.float32, zero_point_dtype=np.float32
    )
    s_i, z_i = quant.choose_qparams_per_token_asymmetric(
        x, scale_dtype=np.float32, zero_point_dtype=np.int8
    )
    assert z_f.dtype == np.float32 and z_i.dtype == np.int8
    np.testing.assert_array_equal(s.view(np.uint32), s_i.view(np.uint32))
    np.testing.assert_array_equal(z_f, z_i.astype(np.float32))
    q_f = quant.quantize_per_token(x, s, z_f)
    q_i = quant.quantize_per_token(x, s_i, z_i)
    np.testing.assert_array_equal(q_f, q_i)
    np.testing.assert_array_equal(q_f, quant.quantize_affine(x, (1, 96), s, z_f, -128, 127))
    # dequantize_affine's dtype rule: codes and zero point cast to the output
    # dtype (x.dtype), product promoted with the float32 scale, cast back.
    d = quant.dequantize_affine(q_f, (1, 96), s, z_f, -128, 127, dtype)
    assert d.dtype == dtype
    ao = per_token_dynamic_quant(torch.from_numpy(x), zero_point_dtype=torch.float32)
    assert_bit_equal(d, ao)
    ao_i = per_token_dynamic_quant(torch.from_numpy(x), zero_point_dtype=torch.int8)
    assert_bit_equal(quant.dequantize_affine(q_i, (1, 96), s_i, z_i, -128, 127, dtype), ao_i)


def test_quantize_per_token_rejects_fractional_zero_point() -> None:
    x = np.ones((2, 8), np.float32)
    with pytest.raises(ValueError):
        quant.quantize_per_token(x, np.ones(2, np.float32), np.array([0.5, 1.0], np.float32))
    with pytest.raises(ValueError):
        quant.quantize_per_token(x, np.ones(3, np.float32), np.zeros(3, np.int8))


# --- per-tensor (static q8ta) -------------------------------------------------


@pytest.mark.parametrize("scale,zp", [(0.0234567, 3), (0.01, -128), (0.5, 0), (1e-3, 17)])
def test_quantize_per_tensor_matches_quantized_decomposed(
    rng: np.random.Generator, scale: float, zp: int
) -> None:
    x = rng.standard_normal(4096).astype(np.float32) * np.float32(2.0)
    x[:4] = [1e30, -1e30, 0.0, -0.0]  # saturation both ways
    ours = quant.quantize_per_tensor(x, scale, zp)
    ref = torch.ops.quantized_decomposed.quantize_per_tensor(
        torch.from_numpy(x), scale, zp, -128, 127, torch.int8
    )
    assert_bit_equal(ours, ref)
    assert ours[0] == 127 and ours[1] == -128
    u8 = quant.quantize_per_tensor(x, scale, zp + 128, 0, 255, np.uint8)
    ref8 = torch.ops.quantized_decomposed.quantize_per_tensor(
        torch.from_numpy(x), scale, zp + 128, 0, 255, torch.uint8
    )
    assert_bit_equal(u8, ref8)
    back = quant.dequantize_per_tensor(ours, scale, zp)
    ref_back = torch.ops.quantized_decomposed.dequantize_per_tensor(
        torch.from_numpy(ours), scale, zp, -128, 127, torch.int8
    )
    assert_bit_equal(back, ref_back)
    exact = quant.dequantize_per_tensor(ours, scale, zp, np.float64)
    np.testing.assert_array_equal(
        exact, (ours.astype(np.float64) - zp) * np.float64(np.float32(scale))
    )


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_fused_quantize_matches_aten_and_differs_from_decomposed(rng: np.random.Generator) -> None:
    """ATen's quantize_per_tensor (fbgemm) adds the zero point before rounding.
    Near ties it disagrees with quantized_decomposed, so a reference using the
    wrong one of the two would fail the respective oracle check."""
    x = rng.standard_normal(200_000).astype(np.float32)
    scale, zp = 0.0234567, 3
    fused = quant.quantize_per_tensor(x, scale, zp, fused=True)
    aten = torch.quantize_per_tensor(torch.from_numpy(x), scale, zp, torch.qint8).int_repr()
    assert_bit_equal(fused, aten)
    plain = quant.quantize_per_tensor(x, scale, zp)
    diff = np.nonzero(plain != fused)[0]
    assert diff.size > 0 and np.abs(plain[diff].astype(int) - fused[diff]).max() == 1
    for d in diff:  # only at float32 ties of x * (1 / s)
        v = x[d] * (np.float32(1) / np.float32(scale))
        assert v - np.floor(v) == 0.5


# --- ET-VK's GPU choose_qparams ----------------------------------------------


def test_choose_qparams_etvk_worked_examples() -> None:
    x = np.zeros((5, 8), np.float32)
    x[1] = np.linspace(0.0, 2.55, 8)  # all >= 0
    x[2] = -np.linspace(0.0, 2.55, 8)  # all <= 0
    x[3] = np.linspace(-1e-3, 2e-3, 8)  # range 3e-3 < 255 * 6.1e-5
    x[4] = np.linspace(-1.0, 2.0, 8)
    s, z = quant.choose_qparams_per_row_etvk(x)
    assert s.dtype == np.float32 and z.dtype == np.int8
    # zero row: scale 0.1 and zero point qmax (torchao: 2**-126 and qmin)
    assert s[0] == np.float32(0.1) and z[0] == 127
    assert s[1] == np.float32(2.55) / np.float32(255) and z[1] == -128
    assert z[2] == 127
    assert s[3] == np.float32(6.1e-5)
    # amplified range [-1e-3, 2e-3] * (6.1e-5 / (3e-3/255)): zp = -128 + 1e-3/scale_orig ≈ -43
    assert z[3] == -43
    assert s[4] == np.float32(3.0) / np.float32(255) and z[4] == -43
    ao_s, ao_z = quant.choose_qparams_per_token_asymmetric(x)
    assert ao_s[0] == np.finfo(np.float32).smallest_normal and ao_z[0] == -128
    assert ao_s[3] != s[3]  # the two semantics differ on small/zero rows


def test_choose_qparams_etvk_matches_aten_choose_quantization_params(
    rng: np.random.Generator,
) -> None:
    """fbgemm/ATen ChooseQuantizationParams (via torch._choose_qparams_per_tensor,
    uint8 range, computed in double) is the oracle: zero points equal after the
    -128 shift, scales within one float32 ulp (ATen divides in double)."""
    rows = 300
    mag = (10.0 ** rng.uniform(-7, 2, size=(rows, 1))).astype(np.float32)
    x = rng.standard_normal((rows, 64)).astype(np.float32) * mag
    x[0::5] = np.abs(x[0::5])
    x[1::5] = -np.abs(x[1::5])
    s, z = quant.choose_qparams_per_row_etvk(x)
    n_small = 0
    for i in range(rows):
        a_s, a_z = torch._choose_qparams_per_tensor(torch.from_numpy(x[i]), False)
        assert z[i] == a_z - 128, i
        assert abs(int(s[i].view(np.int32)) - int(np.float32(a_s).view(np.int32))) <= 1, i
        n_small += bool(s[i] == np.float32(6.1e-5))
    assert n_small > 20  # the small-scale branch was exercised


def test_choose_qparams_etvk_equals_torchao_on_ordinary_rows(rng: np.random.Generator) -> None:
    x = _activation(rng, (64, 128))
    s, z = quant.choose_qparams_per_row_etvk(x, zero_point_dtype=np.int32)
    ao_s, ao_z = ao_choose_qparams_affine(
        torch.from_numpy(x), MappingType.ASYMMETRIC, (1, 128), torch.int8, -128, 127,
        zero_point_dtype=torch.int32,
    )
    assert_bit_equal(s, ao_s)
    assert_bit_equal(z, ao_z)


def test_choose_qparams_etvk_ignores_k_tail_and_fp16(rng: np.random.Generator) -> None:
    x = _activation(rng, (6, 10))
    x[:, 8:] = 1e6  # the shader reads K // 4 texels: these are never seen
    s, z = quant.choose_qparams_per_row_etvk(x)
    s8, z8 = quant.choose_qparams_per_row_etvk(np.ascontiguousarray(x[:, :8]))
    np.testing.assert_array_equal(s, s8)
    np.testing.assert_array_equal(z, z8)
    s16, z16 = quant.choose_qparams_per_row_etvk(x[:, :8].astype(np.float16))
    assert s16.dtype == np.float16
    s32, z32 = quant.choose_qparams_per_row_etvk(x[:, :8].astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(s16, s32.astype(np.float16))
    np.testing.assert_array_equal(z16, z32)
