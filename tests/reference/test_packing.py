"""vkdiff.reference.quantized.packing against hand-worked bytes, ET-VK's own packers,
quantized_decomposed.embedding_4bit, torchao quantization and a scalar
transcription of the GLSL block writes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torchao.quantization.quant_primitives import MappingType
from torchao.quantization.quant_primitives import choose_qparams_affine as ao_choose_qparams_affine
from torchao.quantization.quant_primitives import quantize_affine as ao_quantize_affine

from vkdiff.reference.quantized import packing, quant

from .helpers import make_rng, random_codes, random_weight

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import executorch.exir.passes._quant_patterns_and_replacements  # noqa: F401  (embedding_4bit)
    from executorch.backends.vulkan.patterns.quantized_linear import compute_per_group_sums
    from executorch.backends.vulkan.patterns.weight_packing_utils import pack_4bit_weight_tensor

# N values: single row, primes, not multiples of 4/8.
_N = st.sampled_from([1, 2, 3, 5, 7, 8, 11, 13, 17, 31, 33, 64])
_K_HALF = st.sampled_from([1, 2, 3, 4, 5, 7, 8, 13, 16, 32, 64])


def test_pack_worked_example() -> None:
    # byte0: even=-8 -> 0x0 (low), odd=7 -> 0xF (high)  => 0xF0
    # byte1: even= 0 -> 0x8 (low), odd=-1 -> 0x7 (high) => 0x78
    q = np.array([[-8, 7, 0, -1]], dtype=np.int8)
    packed = packing.pack_int4_linear(q)
    assert packed.dtype == np.uint8
    assert packed.tolist() == [[0xF0, 0x78]]
    np.testing.assert_array_equal(packing.unpack_int4_linear(packed), q)


def test_pack_second_worked_example_two_rows() -> None:
    # [1, 2] -> low 0x9, high 0xA -> 0xA9 ; [-3, 5] -> low 0x5, high 0xD -> 0xD5
    # [7, 7] -> 0xFF ; [-8, -8] -> 0x00
    q = np.array([[1, 2, -3, 5], [7, 7, -8, -8]], dtype=np.int8)
    assert packing.pack_int4_linear(q).tolist() == [[0xA9, 0xD5], [0xFF, 0x00]]


@pytest.mark.parametrize("n,k", [(1, 8), (37, 64), (8, 4096), (13, 6)])
def test_pack_matches_etvk_pack_4bit_weight_tensor(rng: np.random.Generator, n, k) -> None:
    q = random_codes(rng, (n, k))
    ours = packing.pack_int4_linear(q, inner_dim_padding=8)
    etvk = pack_4bit_weight_tensor(torch.from_numpy(q)).numpy()
    assert ours.dtype == etvk.dtype == np.uint8
    np.testing.assert_array_equal(ours, etvk)
    np.testing.assert_array_equal(packing.unpack_int4_linear(ours, k), q)


def test_swapped_nibble_order_is_detected(rng: np.random.Generator) -> None:
    """The oracle check can fail: high=even/low=odd must not match ET-VK."""
    q = random_codes(rng, (16, 64))
    u = (q.astype(np.int16) + 8).astype(np.uint8)
    swapped = (u[:, 0::2] << 4) | u[:, 1::2]
    etvk = pack_4bit_weight_tensor(torch.from_numpy(q)).numpy()
    assert not np.array_equal(swapped, etvk)
    assert not np.array_equal(packing.unpack_int4_linear(swapped), q)
    np.testing.assert_array_equal(packing.pack_int4_linear(q), etvk)


@settings(max_examples=60, deadline=None)
@given(n=_N, k_half=_K_HALF, pad=st.sampled_from([None, 8]))
def test_pack_roundtrip_property(n: int, k_half: int, pad) -> None:
    rng = make_rng("test_pack_roundtrip_property", n, k_half, pad)
    k = 2 * k_half
    q = random_codes(rng, (n, k))
    packed = packing.pack_int4_linear(q, inner_dim_padding=pad)
    kp = k if pad is None else -(-k // pad) * pad
    assert packed.shape == (n, kp // 2)
    np.testing.assert_array_equal(packing.unpack_int4_linear(packed, k), q)
    if kp > k:  # padding codes are 0, i.e. nibble 0x8
        tail = packing.unpack_int4_linear(packed)[:, k:]
        assert (tail == 0).all()
    # unpack o pack is also the identity on arbitrary bytes
    b = rng.integers(0, 256, size=(n, k_half), dtype=np.uint8)
    np.testing.assert_array_equal(
        packing.pack_int4_linear(packing.unpack_int4_linear(b)), b
    )


def test_pack_rejects_out_of_range_and_odd_k() -> None:
    with pytest.raises(ValueError):
        packing.pack_int4_linear(np.array([[8, 0]], dtype=np.int8))
    with pytest.raises(ValueError):
        packing.pack_int4_linear(np.array([[-9, 0]], dtype=np.int8))
    with pytest.raises(ValueError):
        packing.pack_int4_linear(np.array([[1, 2, 3]], dtype=np.int8))
    with pytest.raises(TypeError):
        packing.pack_int4_linear(np.array([[1.0, 2.0]], dtype=np.float32))


def _etvk_transpose_scales(s: np.ndarray, align_to: int = 4) -> np.ndarray:
    """What make_linear_q4gsw_op + align_width_and_update_state_dict store."""
    t = torch.from_numpy(s).transpose(0, 1).contiguous()
    if t.shape[-1] % align_to:
        t = F.pad(t, (0, align_to - t.shape[-1] % align_to)).contiguous()
    return t.numpy()


@settings(max_examples=40, deadline=None)
@given(n=_N, groups=st.sampled_from([1, 2, 3, 4, 7, 128]))
def test_transpose_scales_property(n: int, groups: int) -> None:
    rng = make_rng("test_transpose_scales_property", n, groups)
    s = np.abs(random_weight(rng, (n, groups))) + np.float32(1e-3)
    t = packing.transpose_scales(s)
    n_pad = -(-n // 4) * 4
    assert t.shape == (groups, n_pad) and t.dtype == s.dtype
    assert t.flags.c_contiguous
    np.testing.assert_array_equal(t, _etvk_transpose_scales(s))
    np.testing.assert_array_equal(t[:, :n], s.T)
    assert (t[:, n:] == 0).all()
    np.testing.assert_array_equal(packing.untranspose_scales(t, n), s)


def test_transpose_scales_custom_pad(rng: np.random.Generator) -> None:
    s = np.abs(random_weight(rng, (5, 3))) + np.float32(1e-3)
    assert packing.transpose_scales(s, pad_to=8).shape == (3, 8)
    assert packing.transpose_scales(s, pad_to=1).shape == (3, 5)


@settings(max_examples=40, deadline=None)
@given(n=_N, groups=st.sampled_from([1, 2, 3, 8]), gs=st.sampled_from([2, 16, 32]))
def test_weight_sums_match_etvk_property(n: int, groups: int, gs: int) -> None:
    rng = make_rng("test_weight_sums_match_etvk_property", n, groups, gs)
    q = random_codes(rng, (n, groups * gs))
    ours = packing.weight_sums(q, gs)
    etvk = compute_per_group_sums(torch.from_numpy(q), gs).numpy()
    assert ours.dtype == np.int32
    assert ours.shape == (groups, -(-n // 8) * 8)
    np.testing.assert_array_equal(ours, etvk)
    # independent check of the formula on the unpadded block
    expect = q.astype(np.int64).reshape(n, groups, gs).sum(-1).T
    np.testing.assert_array_equal(ours[:, :n], expect)
    assert (ours[:, n:] == 0).all()


def test_weight_sums_worked_example() -> None:
    q = np.array([[-8, 7, 1, 1], [3, -2, -8, -8]], dtype=np.int8)
    # groups of 2: row0 -> [-1, 2], row1 -> [1, -16]; transposed + padded to 8
    out = packing.weight_sums(q, 2)
    assert out.tolist() == [[-1, 1, 0, 0, 0, 0, 0, 0], [2, -16, 0, 0, 0, 0, 0, 0]]


# --- embedding nibble order ----------------------------------------------------


def test_pack_embedding_worked_example() -> None:
    # even code in the HIGH nibble: [-8, 7] -> 0x0F, [0, -1] -> 0x87
    q = np.array([[-8, 7, 0, -1]], dtype=np.int8)
    packed = packing.pack_int4_embedding(q)
    assert packed.tolist() == [[0x0F, 0x87]]
    assert packing.pack_int4_linear(q).tolist() == [[0xF0, 0x78]]  # the reverse
    np.testing.assert_array_equal(packing.unpack_int4_embedding(packed), q)


@pytest.mark.parametrize("v,d", [(1, 32), (7, 64), (33, 96)])
def test_pack_embedding_matches_quantized_decomposed_embedding_4bit(
    rng: np.random.Generator, v: int, d: int
) -> None:
    """quantized_decomposed.embedding_4bit (the producer of the embedding
    convention) decodes our bytes to the original codes (unit scales)."""
    q = random_codes(rng, (v, d))
    packed = packing.pack_int4_embedding(q)
    ones = torch.ones((v, 1), dtype=torch.float32)
    decoded = torch.ops.quantized_decomposed.embedding_4bit(
        torch.from_numpy(packed), ones, None, -8, 7, torch.arange(v)
    ).numpy()
    np.testing.assert_array_equal(decoded, q.astype(np.float32))
    # the linear-order bytes of the same codes decode to something else
    wrong = torch.ops.quantized_decomposed.embedding_4bit(
        torch.from_numpy(packing.pack_int4_linear(q)), ones, None, -8, 7, torch.arange(v)
    ).numpy()
    assert not np.array_equal(wrong, q.astype(np.float32))
    # ET-VK's export pass repacks to the linear order: same bytes as ours
    np.testing.assert_array_equal(
        pack_4bit_weight_tensor(torch.from_numpy(packing.unpack_int4_embedding(packed))).numpy(),
        packing.pack_int4_linear(q),
    )


@settings(max_examples=30, deadline=None)
@given(n=_N, k_half=_K_HALF)
def test_pack_embedding_roundtrip_property(n: int, k_half: int) -> None:
    rng = make_rng("test_pack_embedding_roundtrip_property", n, k_half)
    q = random_codes(rng, (n, 2 * k_half))
    np.testing.assert_array_equal(packing.unpack_int4_embedding(packing.pack_int4_embedding(q)), q)
    b = rng.integers(0, 256, size=(n, k_half), dtype=np.uint8)
    np.testing.assert_array_equal(packing.pack_int4_embedding(packing.unpack_int4_embedding(b)), b)
    # embedding order == linear order with the nibbles of every byte swapped
    swapped = ((b & 0x0F) << 4) | (b >> 4)
    np.testing.assert_array_equal(
        packing.unpack_int4_embedding(b), packing.unpack_int4_linear(swapped)
    )


# --- static int8 weight sums ---------------------------------------------------


@pytest.mark.parametrize("n", [1, 4, 7, 12, 33])
def test_weight_sums_per_channel_matches_etvk_pass_formula(
    rng: np.random.Generator, n: int
) -> None:
    """make_linear_q8ta_q8csw_custom_op: weight.sum(dim=1).to(int32), padded to 4."""
    w = rng.integers(-127, 128, size=(n, 300), dtype=np.int8)
    ours = packing.weight_sums_per_channel(w)
    t = torch.from_numpy(w).sum(dim=1).to(torch.int32)
    if n % 4:
        t = F.pad(t, (0, 4 - n % 4))
    assert ours.dtype == np.int32
    np.testing.assert_array_equal(ours, t.numpy())


def test_weight_sums_stride_disagreement_with_tiled_shader(rng: np.random.Generator) -> None:
    """Documents an ET-VK layout mismatch: compute_per_group_sums pads N to 8,
    linear_dq8ca_q4gsw_tiled.glsl reads t_weight_sums[g * N4 + n4] (ivec4),
    i.e. int index g * 4 * ceil(N/4) + n. For N % 8 in 1..4 the shader then
    reads wrong sums for groups >= 1; for other N (or pad_to=4) it is right."""
    groups, gs = 3, 8

    def shader_view(flat: np.ndarray, n: int) -> np.ndarray:
        n4 = -(-n // 4)
        return np.stack([flat[g * 4 * n4 : g * 4 * n4 + n] for g in range(groups)])

    for n, consistent in [(12, False), (4, False), (9, False), (16, True), (13, True), (7, True)]:
        q = random_codes(rng, (n, groups * gs))
        true = packing.weight_sums(q, gs)[:, :n]
        etvk = compute_per_group_sums(torch.from_numpy(q), gs).numpy().reshape(-1)
        assert np.array_equal(shader_view(etvk, n), true) == consistent, n
        pad4 = packing.weight_sums(q, gs, 4).reshape(-1)
        np.testing.assert_array_equal(shader_view(pad4, n), true)


# --- int8 activations in 4H4W blocks with group sums ----------------------------


def _shader_pack_4h4w(q: np.ndarray) -> np.ndarray:
    """Scalar transcription of write_block / pack_into_int32 (GLSL semantics):
    buffer[(m4 * K4 + k4) * 4 + r] = OR_j (q[4*m4 + r, 4*k4 + j] & 0xFF) << 8j."""
    m, k = q.shape
    m4, k4 = -(-m // 4), -(-k // 4)
    buf = np.zeros(m4 * k4 * 4, dtype=np.int64)
    for bm in range(m4):
        for bk in range(k4):
            for r in range(4):
                word = 0
                for j in range(4):
                    row, col = 4 * bm + r, 4 * bk + j
                    val = int(q[row, col]) if row < m and col < k else 0
                    word |= (val & 0xFF) << (8 * j)
                buf[(bm * k4 + bk) * 4 + r] = word - (1 << 32) if word >= 1 << 31 else word
    return buf.astype(np.int32)


def test_pack_int8_4h4w_worked_example() -> None:
    q = np.arange(-8, 8, dtype=np.int8).reshape(2, 8)  # M=2 (padded to 4), K=8
    packed = packing.pack_int8_4h4w(q)
    assert packed.shape == (1, 2, 4) and packed.dtype == np.int32
    # row 0, k 0..3 = [-8, -7, -6, -5] -> bytes F8 F9 FA FB little-endian
    assert int(packed[0, 0, 0]) == int(np.array(0xFBFAF9F8, np.uint32).view(np.int32))
    # row 1, k 4..7 = [4, 5, 6, 7] -> 0x07060504
    assert int(packed[0, 1, 1]) == 0x07060504
    assert (packed[0, :, 2:] == 0).all()  # padding rows
    np.testing.assert_array_equal(packed.reshape(-1), _shader_pack_4h4w(q))
    # the check can fail: column-major blocks (4W4H) or big-endian words differ
    q4 = np.arange(-16, 16, dtype=np.int8).reshape(4, 8)
    cols_major = np.ascontiguousarray(q4.reshape(1, 4, 2, 4).transpose(0, 2, 3, 1)).view("<i4")
    assert not np.array_equal(cols_major.reshape(-1), _shader_pack_4h4w(q4))
    big_endian = packing.pack_int8_4h4w(q4).astype(">i4").view("<i4")
    assert not np.array_equal(big_endian.reshape(-1), _shader_pack_4h4w(q4))


@settings(max_examples=30, deadline=None)
@given(m=st.sampled_from([1, 2, 3, 4, 5, 7, 13]), k=st.sampled_from([1, 3, 4, 8, 12, 20]))
def test_pack_int8_4h4w_roundtrip_and_memory_order(m: int, k: int) -> None:
    rng = make_rng("test_pack_int8_4h4w_roundtrip_and_memory_order", m, k)
    q = rng.integers(-128, 128, size=(m, k), dtype=np.int8)
    packed = packing.pack_int8_4h4w(q)
    assert packed.shape == (-(-m // 4), -(-k // 4), 4)
    np.testing.assert_array_equal(packed.reshape(-1), _shader_pack_4h4w(q))
    np.testing.assert_array_equal(packing.unpack_int8_4h4w(packed, m, k), q)
    # little-endian byte view == [M4, K4, 4 rows, 4 cols]
    b = packed.astype("<i4").view(np.int8).reshape(packed.shape[0], packed.shape[1], 4, 4)
    np.testing.assert_array_equal(b[0, 0, : min(m, 4), : min(k, 4)], q[:4, :4])


@pytest.mark.parametrize("m,k,gs", [(1, 64, 32), (5, 96, 32), (13, 256, 128), (8, 48, 16)])
@pytest.mark.parametrize("zp_dtype", [np.int8, np.float32])
def test_quantize_and_pack_with_group_sums_matches_torchao(
    rng: np.random.Generator, m: int, k: int, gs: int, zp_dtype
) -> None:
    x = random_weight(rng, (m, k))
    x[0] = -np.abs(x[0])
    s, z = quant.choose_qparams_per_token_asymmetric(x, zero_point_dtype=zp_dtype)
    packed, sums = packing.quantize_and_pack_4h4w_with_group_sums(x, s, z, gs)
    m4, groups = -(-m // 4), k // gs
    assert packed.shape == (m4, k // 4, 4) and sums.shape == (groups, 4 * m4)
    assert packed.dtype == sums.dtype == np.int32
    ao_s, ao_z = ao_choose_qparams_affine(
        torch.from_numpy(x), MappingType.ASYMMETRIC, (1, k), torch.int8, -128, 127,
        zero_point_dtype=torch.int8,
    )
    ao_q = ao_quantize_affine(torch.from_numpy(x), (1, k), ao_s, ao_z, torch.int8, -128, 127)
    np.testing.assert_array_equal(packing.unpack_int8_4h4w(packed, m, k), ao_q.numpy())
    # sums[g, m] (group-major, like t_int8_input_sums[g * M4 + m4][m % 4])
    ao_sums = ao_q.to(torch.int64).reshape(m, groups, gs).sum(-1).T.numpy()
    np.testing.assert_array_equal(sums[:, :m], ao_sums)
    assert (sums[:, m:] == 0).all() and (packing.unpack_int8_4h4w(packed, 4 * m4, k)[m:] == 0).all()
    # the row-major [M, G] layout is a different array (transposition detected)
    if groups > 1 and m > 1:
        assert not np.array_equal(sums[:, :m].reshape(-1), ao_sums.T.reshape(-1))


def test_quantize_and_pack_rejects_bad_group_size(rng: np.random.Generator) -> None:
    x = random_weight(rng, (3, 24))
    s, z = quant.choose_qparams_per_token_asymmetric(x)
    with pytest.raises(ValueError):
        packing.quantize_and_pack_4h4w_with_group_sums(x, s, z, 6)  # not a multiple of 4
    with pytest.raises(ValueError):
        packing.quantize_and_pack_4h4w_with_group_sums(x, s, z, 16)  # does not divide K


def _glsl_pack_q8_conv2d_weights(flat: np.ndarray, oc: int, kh: int, kw: int, ic: int) -> np.ndarray:
    """``pack_q8_conv2d_weights.glsl`` one invocation at a time: block ``(x, y)`` = ``(oc4·KW + kx, ky·IC4 + ic4)``,
    row ``r`` of output channel ``oc + r``, byte ``col`` at ``oc·align4(KH·KW·IC) + (ky·KW + kx)·IC + ic + col``."""
    oc4s, ic4s = -(-oc // 4), -(-ic // 4)
    out = np.zeros((ic4s * kh, kw * oc4s * 4), np.int64)
    stride = -(-(kh * kw * ic) // 4) * 4
    for block_y in range(ic4s * kh):
        for block_x in range(kw * oc4s):
            kx, oc4, ic4, ky = block_x % kw, block_x // kw, block_y % ic4s, block_y // ic4s
            for row in range(4):
                if 4 * oc4 + row >= oc:
                    continue
                base = (4 * oc4 + row) * stride + ky * kw * ic + kx * ic + 4 * ic4
                word = sum((int(flat[base + col]) & 0xFF) << (8 * col) for col in range(4) if 4 * ic4 + col < ic)
                out[block_y, 4 * block_x + row] = word
    return out.astype(np.uint32).view(np.int32)


def _glsl_pack_q8_conv2d_dw_weights(flat: np.ndarray, kh: int, kw: int, oc: int) -> np.ndarray:
    """``pack_q8_conv2d_dw_weights.glsl``: lane ``r`` of block ``(oc4, k4)`` is word ``(h·KW + w + r)·OC4 + oc4``
    of the source (``h = k4 / KW4``, ``w = 4·(k4 % KW4)``), 0 from ``KW − w`` on."""
    words = flat.view("<i4")
    oc4s, w4s = -(-oc // 4), -(-kw // 4)
    out = np.zeros((kh * w4s, oc4s * 4), np.int32)
    for k4 in range(kh * w4s):
        for oc4 in range(oc4s):
            h, w = k4 // w4s, 4 * (k4 % w4s)
            for r in range(min(4, kw - w)):
                out[k4, 4 * oc4 + r] = words[(h * kw + w + r) * oc4s + oc4]
    return out


@pytest.mark.parametrize("oc,icg,kernel", [(1, 1, (1, 1)), (5, 3, (1, 1)), (7, 6, (3, 3)), (6, 5, (2, 5)),
                                           (9, 8, (5, 2)), (4, 4, (3, 3))])
def test_pack_q8_conv2d_weight_matches_the_shader_transcription(rng: np.random.Generator, oc, icg, kernel) -> None:
    kh, kw = kernel
    taps = kh * kw * icg
    matrix = np.zeros((oc, -(-taps // 4) * 4), np.int8)
    matrix[:, :taps] = rng.integers(-128, 128, (oc, taps))
    np.testing.assert_array_equal(packing.pack_q8_conv2d_weight(matrix, kernel, icg),
                                  _glsl_pack_q8_conv2d_weights(matrix.reshape(-1), oc, kh, kw, icg))


@pytest.mark.parametrize("kh,kw,c", [(1, 1, 4), (3, 3, 8), (2, 5, 4), (5, 5, 12), (1, 4, 8), (3, 8, 4)])
def test_pack_q8_conv2d_dw_weight_matches_the_shader_transcription(rng: np.random.Generator, kh, kw, c) -> None:
    weight = rng.integers(-128, 128, (kh, kw, c)).astype(np.int8)
    np.testing.assert_array_equal(packing.pack_q8_conv2d_dw_weight(weight),
                                  _glsl_pack_q8_conv2d_dw_weights(weight.reshape(-1), kh, kw, c))


def test_pack_q8_conv2d_worked_examples_and_refusals() -> None:
    # one output channel, 1x1 over 3 channels: bytes 1, 2, 3 in lane 0, the padded byte and lanes 1-3 zero
    assert packing.pack_q8_conv2d_weight(np.array([[1, 2, 3, 0]], np.int8), (1, 1), 3).tolist() == [
        [0x030201, 0, 0, 0]]
    # depthwise 1x1 over 4 channels: the 4 channels in lane 0 (lanes are kernel columns)
    dw = np.array([[[1, 2, 3, -1]]], np.int8)
    assert packing.pack_q8_conv2d_dw_weight(dw).view(np.uint32).tolist() == [[0xFF030201, 0, 0, 0]]
    with pytest.raises(ValueError, match=r"needs int8 \[OC, 12\] for kernel 3x3 and ICg=1"):
        packing.pack_q8_conv2d_weight(np.zeros((2, 9), np.int8), (3, 3), 1)
    with pytest.raises(ValueError, match=r"needs int8 \[KH, KW, C\] with C % 4 == 0"):
        packing.pack_q8_conv2d_dw_weight(np.zeros((3, 3, 5), np.int8))


@pytest.mark.parametrize("icg", [1, 3, 4, 6, 8])
def test_a_1x1_conv_packing_is_the_linear_packing(rng: np.random.Generator, icg) -> None:
    """Why the im2col routes may pack every 1×1 weight with ``pack_q8_linear_weight``: the pattern's zero-padded
    ``[OC, align4(ICg)]`` matrix gives the same words; with two taps of 6 channels the layouts differ."""
    matrix = np.zeros((5, -(-icg // 4) * 4), np.int8)
    matrix[:, :icg] = rng.integers(-128, 128, (5, icg))
    np.testing.assert_array_equal(packing.pack_q8_conv2d_weight(matrix, (1, 1), icg),
                                  packing.pack_q8_linear_weight(matrix))
    two_taps = rng.integers(-128, 128, (4, 12)).astype(np.int8)
    assert packing.pack_q8_conv2d_weight(two_taps, (1, 2), 6).shape != packing.pack_q8_linear_weight(two_taps).shape
