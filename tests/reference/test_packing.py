"""vkdiff.reference.packing against hand-worked bytes and ET-VK's own packers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from vkdiff.reference import packing

from .helpers import make_rng, random_codes, random_weight

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from executorch.backends.vulkan.patterns.quantized_linear import (
        compute_per_group_sums,
    )
    from executorch.backends.vulkan.patterns.weight_packing_utils import (
        pack_4bit_weight_tensor,
    )

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
