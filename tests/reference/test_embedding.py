"""vkdiff.reference.quantized.embedding against ET-VK's eager ``et_vk.embedding_q4gsw``,
``quantized_decomposed.embedding_4bit`` and a torchao-quantized nn.Embedding.

The oracles multiply in float32; our float64 result is exact, so the float32
rounding of ours must equal them bit for bit.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torchao.quantization import IntxWeightOnlyConfig, PerGroup, quantize_

from vkdiff.reference.quantized import embedding, linear, packing

from .helpers import make_rng, random_codes, random_weight

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (et_vk ops)
    import executorch.exir.passes._quant_patterns_and_replacements  # noqa: F401


def _pack(codes: np.ndarray, is_linear_weight: bool) -> np.ndarray:
    return (packing.pack_int4_linear if is_linear_weight else packing.pack_int4_embedding)(codes)


def _etvk(packed, scales, gs, idx, is_linear_weight) -> np.ndarray:
    return torch.ops.et_vk.embedding_q4gsw(
        torch.from_numpy(packed), torch.from_numpy(scales), gs, torch.from_numpy(idx),
        is_linear_weight,
    ).numpy()


def _assert_f32_rounding_equal(ours: np.ndarray, oracle: np.ndarray) -> None:
    assert ours.dtype == np.float64 and oracle.dtype == np.float32
    np.testing.assert_array_equal(ours.astype(np.float32).view(np.uint32), oracle.view(np.uint32))


def test_embedding_worked_example() -> None:
    # one row, D=4, gs=2: codes [-8, 7, 0, -1], scales [0.5, 2.0]
    codes = np.array([[-8, 7, 0, -1]], dtype=np.int8)
    scales = np.array([[0.5, 2.0]], dtype=np.float32)
    expect = [[-4.0, 3.5, 0.0, -2.0]]
    for lin in (False, True):
        out = embedding.embedding_q4gsw(np.array([0, 0]), _pack(codes, lin), scales, 2, lin)
        assert out.tolist() == expect * 2
    # embedding bytes read with the linear order give a different row
    wrong = embedding.embedding_q4gsw(np.array([0]), _pack(codes, False), scales, 2, True)
    assert wrong.tolist() != expect


@pytest.mark.parametrize("is_linear_weight", [False, True], ids=["embedding_order", "linear_order"])
@pytest.mark.parametrize("v,d,gs", [(1, 32, 32), (11, 64, 32), (37, 96, 16), (5, 128, 128)])
def test_embedding_matches_etvk_eager_op(
    rng: np.random.Generator, is_linear_weight: bool, v: int, d: int, gs: int
) -> None:
    codes = random_codes(rng, (v, d))
    scales = np.abs(random_weight(rng, (v, d // gs))) + np.float32(1e-3)
    idx = rng.integers(0, v, size=(3, 7))
    packed = _pack(codes, is_linear_weight)
    ours = embedding.embedding_q4gsw(idx, packed, scales, gs, is_linear_weight)
    assert ours.shape == (3, 7, d)
    _assert_f32_rounding_equal(ours, _etvk(packed, scales, gs, idx, is_linear_weight))


def test_embedding_order_matches_quantized_decomposed_embedding_4bit(
    rng: np.random.Generator,
) -> None:
    v, d, gs = 19, 64, 32
    codes = random_codes(rng, (v, d))
    scales = np.abs(random_weight(rng, (v, d // gs))) + np.float32(1e-3)
    idx = rng.integers(0, v, size=(40,))
    packed = packing.pack_int4_embedding(codes)
    ref = torch.ops.quantized_decomposed.embedding_4bit(
        torch.from_numpy(packed), torch.from_numpy(scales), None, -8, 7, torch.from_numpy(idx)
    ).numpy()
    _assert_f32_rounding_equal(embedding.embedding_q4gsw(idx, packed, scales, gs), ref)
    # 1-D per-row scales (one group per row) are accepted like embedding_4bit does
    s1 = np.ascontiguousarray(scales[:, 0])
    ref1 = torch.ops.quantized_decomposed.embedding_4bit(
        torch.from_numpy(packed), torch.from_numpy(s1), None, -8, 7, torch.from_numpy(idx)
    ).numpy()
    _assert_f32_rounding_equal(embedding.embedding_q4gsw(idx, packed, s1, d), ref1)


def test_embedding_matches_torchao_quantized_nn_embedding(rng: np.random.Generator) -> None:
    """End to end: torchao IntxWeightOnlyConfig on nn.Embedding, our quantizer +
    packer (in both nibble orders) + embedding reference."""
    v, d, gs = 50, 64, 32
    emb = torch.nn.Embedding(v, d)
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(random_weight(rng, (v, d))))
    w = emb.weight.detach().numpy().copy()
    quantize_(
        emb,
        IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(gs)),
        filter_fn=lambda mod, fqn: isinstance(mod, torch.nn.Embedding),
    )
    codes, scales = linear.quantize_int4_group_symmetric(w, gs)
    np.testing.assert_array_equal(codes, emb.weight.qdata.numpy())
    idx = rng.integers(0, v, size=(4, 9))
    with torch.no_grad():
        ref = emb(torch.from_numpy(idx)).numpy()
    for lin in (False, True):
        ours = embedding.embedding_q4gsw(idx, _pack(codes, lin), scales, gs, lin)
        _assert_f32_rounding_equal(ours, ref)


@settings(max_examples=30, deadline=None)
@given(
    v=st.sampled_from([1, 2, 7, 31]),
    d=st.sampled_from([32, 64, 96]),
    gs=st.sampled_from([4, 8, 16, 32]),
    lin=st.booleans(),
    idx_shape=st.sampled_from([(1,), (5,), (2, 3), (1, 1, 4)]),
    magnitude=st.sampled_from([1e-30, 1e-3, 1.0, 1e30]),
)
def test_embedding_property(v, d, gs, lin, idx_shape, magnitude) -> None:
    rng = make_rng("test_embedding_property", v, d, gs, lin, idx_shape, magnitude)
    codes = random_codes(rng, (v, d))
    scales = (np.abs(random_weight(rng, (v, d // gs))) * np.float32(magnitude)).astype(np.float32)
    idx = rng.integers(0, v, size=idx_shape)
    packed = _pack(codes, lin)
    ours = embedding.embedding_q4gsw(idx, packed, scales, gs, lin)
    assert ours.shape == idx_shape + (d,) and np.isfinite(ours).all()
    _assert_f32_rounding_equal(ours, _etvk(packed, scales, gs, idx, lin))
    # exact: every element is code * scale
    flat = idx.reshape(-1)
    expect = codes[flat].astype(np.float64) * np.repeat(scales[flat].astype(np.float64), gs, 1)
    np.testing.assert_array_equal(ours.reshape(-1, d), expect)


@pytest.mark.parametrize("is_linear_weight", [False, True])
def test_swapped_nibble_order_is_detected(rng: np.random.Generator, is_linear_weight: bool) -> None:
    """Packing in the wrong convention for the flag fails the oracle check."""
    v, d, gs = 8, 64, 32
    codes = random_codes(rng, (v, d))
    scales = np.abs(random_weight(rng, (v, d // gs))) + np.float32(1e-3)
    idx = np.arange(v)
    wrong = _pack(codes, not is_linear_weight)
    ours = embedding.embedding_q4gsw(idx, wrong, scales, gs, is_linear_weight)
    ref = _etvk(_pack(codes, is_linear_weight), scales, gs, idx, is_linear_weight)
    with pytest.raises(AssertionError):
        _assert_f32_rounding_equal(ours, ref)


def test_embedding_rejects_bad_inputs(rng: np.random.Generator) -> None:
    codes = random_codes(rng, (4, 32))
    scales = np.ones((4, 1), np.float32)
    packed = packing.pack_int4_embedding(codes)
    with pytest.raises(ValueError):
        embedding.embedding_q4gsw(np.array([4]), packed, scales, 32)
    with pytest.raises(ValueError):
        embedding.embedding_q4gsw(np.array([-1]), packed, scales, 32)
    with pytest.raises(ValueError):
        embedding.embedding_q4gsw(np.array([0]), packed, scales.T, 32)
    with pytest.raises(ValueError):
        embedding.embedding_q4gsw(np.array([0]), packed, scales, 12)
