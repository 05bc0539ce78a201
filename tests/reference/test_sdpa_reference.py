"""References of SDPA without a KV cache update (``llama.custom_sdpa``, ``et_vk.sdpa``) and of ``update_cache``
against independent oracles: ExecuTorch's eager custom ops and torch's ``scaled_dot_product_attention`` in float64.

Companions show the same comparisons fail for a softmax without max-subtraction (logits > 88 overflow
float32's exp) and for a causal mask one position off.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from vkdiff.cases.kernel_suites.nn import sdpa
from vkdiff.cases.kernel_suites.nn.sdpa import aligned_pair
from vkdiff.reference.tensor import llm
from vkdiff.reference import ops


@pytest.fixture(scope="module", autouse=True)
def custom_ops():
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (registers et_vk.*)
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401  (registers llama.*)


def t(array) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array))


def torch_custom_sdpa(q, k, v, start: int, causal: bool = True) -> np.ndarray:
    """``custom_sdpa`` written with torch's SDPA in float64: rows ``0 .. start + S - 1``, mask offset by start."""
    seq, length = q.shape[1], start + q.shape[1]
    qt, kt, vt = (t(np.asarray(x, np.float64)).transpose(1, 2) for x in (q, k[:, :length], v[:, :length]))
    mask = None
    if causal:
        mask = torch.arange(length)[None, :] <= (start + torch.arange(seq))[:, None]
    out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, enable_gqa=True)
    return out.transpose(1, 2).numpy()


def _qkv(rng, seq: int, cache: int, hq: int, hkv: int, dim: int):
    return (rng.standard_normal((1, seq, hq, dim)), rng.standard_normal((1, cache, hkv, dim)),
            rng.standard_normal((1, cache, hkv, dim)))


@pytest.mark.parametrize("seq, start, hq, hkv, dim", [(7, 0, 4, 2, 16), (5, 6, 4, 4, 6), (1, 9, 8, 2, 16),
                                                      (1, 0, 4, 1, 8)])
@pytest.mark.parametrize("causal", [True, False])
def test_custom_sdpa_matches_torch_sdpa_and_the_llama_op(rng, seq, start, hq, hkv, dim, causal):
    q, k, v = _qkv(rng, seq, 16, hq, hkv, dim)
    ours = llm.custom_sdpa(q, k, v, start, is_causal=causal)
    np.testing.assert_allclose(ours, torch_custom_sdpa(q, k, v, start, causal), rtol=1e-12, atol=1e-12)
    eager = torch.ops.llama.custom_sdpa(*(t(x.astype(np.float32)) for x in (q, k, v)), start, None, 0.0, causal,
                                        None).numpy()
    np.testing.assert_allclose(ours, eager, rtol=1e-4, atol=1e-5)


def _unshifted_softmax(scores: np.ndarray) -> np.ndarray:
    """A softmax in float32 that skips subtracting the row max."""
    with np.errstate(over="ignore", invalid="ignore"):
        weights = np.exp(scores.astype(np.float32))
        return weights / weights.sum(-1, keepdims=True)


def test_large_logits_fail_a_softmax_without_max_subtraction(rng, monkeypatch):
    q, k = aligned_pair((1, 3, 2, 16), (1, 8, 2, 16), sdpa.LARGE, rng)
    v = rng.standard_normal((1, 8, 2, 16))
    scores = np.einsum("bshd,bthd->bhst", q, k[:, :8]) / 4.0
    assert (scores > 88).all()
    oracle = torch_custom_sdpa(q, k, v, 5)
    np.testing.assert_allclose(llm.custom_sdpa(q, k, v, 5, is_causal=True), oracle, rtol=1e-12, atol=1e-12)
    monkeypatch.setattr(llm, "_softmax", _unshifted_softmax)
    assert not np.isfinite(llm.custom_sdpa(q, k, v, 5, is_causal=True)).all()


def test_an_off_by_one_causal_mask_fails(rng, monkeypatch):
    q, k, v = _qkv(rng, 5, 12, 4, 2, 8)
    oracle = torch_custom_sdpa(q, k, v, 3)
    original = llm._custom_sdpa_scores

    def one_off(q_, keys, start_pos, attn_mask, is_causal, scale):
        return original(q_, keys, start_pos - 1, attn_mask, is_causal, scale)

    monkeypatch.setattr(llm, "_custom_sdpa_scores", one_off)
    assert not np.allclose(llm.custom_sdpa(q, k, v, 3, is_causal=True), oracle, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kv_heads, mask_shape, scale", [(4, None, None), (4, (1, 4, 5, 7), None),
                                                        (4, (1, 1, 1, 7), 0.3), (1, (1, 1, 5, 7), None)])
def test_fused_sdpa_matches_torch_sdpa_and_the_et_vk_op(rng, kv_heads, mask_shape, scale):
    q, k, v = rng.standard_normal((1, 4, 5, 6)), rng.standard_normal((1, kv_heads, 7, 6)), \
        rng.standard_normal((1, kv_heads, 7, 6))
    mask = rng.uniform(-4, 4, mask_shape) if mask_shape else None
    ours = llm.fused_sdpa(q, k, v, mask, scale)
    expanded = [t(x).expand(1, 4, 7, 6) for x in (k, v)]
    oracle = F.scaled_dot_product_attention(t(q), *expanded, attn_mask=None if mask is None else t(mask),
                                            scale=scale).numpy()
    np.testing.assert_allclose(ours, oracle, rtol=1e-12, atol=1e-12)
    eager = torch.ops.et_vk.sdpa(*(t(x.astype(np.float32)) for x in (q, k, v)),
                                 None if mask is None else t(mask.astype(np.float32)), scale).numpy()
    np.testing.assert_allclose(ours, eager, rtol=1e-4, atol=1e-5)


def test_fused_sdpa_causal_mask_and_a_mask_one_off_fails(rng):
    q, k, v = (rng.standard_normal((1, 2, 6, 8)) for _ in range(3))
    future = np.arange(6)[None, :] > np.arange(6)[:, None]
    oracle = F.scaled_dot_product_attention(*(t(x) for x in (q, k, v)), is_causal=True).numpy()
    np.testing.assert_allclose(llm.fused_sdpa(q, k, v, np.where(future, -np.inf, 0.0)), oracle, rtol=1e-12,
                               atol=1e-12)
    one_off = np.arange(6)[None, :] > np.arange(6)[:, None] + 1
    assert not np.allclose(llm.fused_sdpa(q, k, v, np.where(one_off, -np.inf, 0.0)), oracle, atol=1e-6)


def test_update_cache_matches_the_llama_op(rng):
    value = rng.standard_normal((1, 3, 2, 8)).astype(np.float32)
    cache = rng.standard_normal((1, 10, 2, 8)).astype(np.float32)
    oracle = t(cache.copy())
    torch.ops.llama.update_cache(t(value), oracle, 4)
    ours = cache.copy()
    np.testing.assert_array_equal(llm.update_cache(value, ours, 4), oracle.numpy())
    np.testing.assert_array_equal(ours, oracle.numpy())
    shifted = cache.copy()
    assert not np.array_equal(llm.update_cache(value, shifted, 5), oracle.numpy())
    with pytest.raises(ValueError, match="outside the cache"):
        llm.update_cache(value, cache.copy(), 8)


def test_accumulation_bounds_grow_with_the_logit_magnitude(rng):
    q, k = aligned_pair((1, 1, 2, 16), (1, 4, 2, 16), sdpa.LARGE, rng)
    v = rng.standard_normal((1, 4, 2, 16))
    small = ops.evaluate_with_magnitude("llama.custom_sdpa.default",
                                        {"query": q / 10, "key": k / 10, "value": v, "start_pos": 3,
                                         "is_causal": True})[1]
    large = ops.evaluate_with_magnitude("llama.custom_sdpa.default",
                                        {"query": q, "key": k, "value": v, "start_pos": 3, "is_causal": True})[1]
    assert (large > small).all()
