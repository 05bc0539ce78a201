"""The Llama-block references against independent oracles: ExecuTorch's eager custom ops and torch.

Each oracle test has a companion showing the same check fails for a plausible mistake (the
other RoPE convention, a cache written one slot off, a non-causal mask), so a passing
oracle test says something.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vkdiff.reference.tensor import llm


@pytest.fixture(scope="module", autouse=True)
def custom_ops():
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (registers et_vk.*)
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401  (registers llama.*)


def t(array) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array))


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-5), (np.float16, 2e-3)])
def test_rms_norm_matches_et_vk_eager(rng, dtype, tol):
    x = (rng.standard_normal((2, 7, 64)) * rng.uniform(0.1, 5, (2, 7, 1))).astype(dtype)
    weight = rng.uniform(0.5, 1.5, 64).astype(dtype)
    oracle = torch.ops.et_vk.rms_norm(t(x), t(weight), 1e-5).float().numpy()
    np.testing.assert_allclose(llm.rms_norm(x, weight, 1e-5), oracle, rtol=tol, atol=tol)
    assert not np.allclose(llm.rms_norm(x, weight, 1e-1), oracle, rtol=tol, atol=tol)


def _rope_tables(rng, seq: int, half: int) -> tuple[np.ndarray, np.ndarray]:
    angles = rng.uniform(0, 2 * np.pi, (seq, half))
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def test_interleaved_rope_matches_et_vk_eager_with_grouped_heads(rng):
    xq = rng.standard_normal((1, 5, 4, 16)).astype(np.float32)
    xk = rng.standard_normal((1, 5, 2, 16)).astype(np.float32)
    cos, sin = _rope_tables(rng, 5, 8)
    oq, ok = (o.numpy() for o in torch.ops.et_vk.apply_rotary_emb(t(xq), t(xk), t(cos), t(sin)))
    q, k = llm.apply_rotary_emb(xq, xk, cos, sin)
    np.testing.assert_allclose(q, oq, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(k, ok, rtol=1e-5, atol=1e-6)
    half_split = llm._rotate_half(xq.astype(np.float64), np.concatenate([cos, cos], -1), np.concatenate([sin, sin], -1))
    assert not np.allclose(half_split, oq, atol=1e-3)


def test_half_split_rope_matches_et_vk_eager_from_start_pos_with_partial_rotary_dims(rng):
    xq = rng.standard_normal((1, 3, 4, 16)).astype(np.float32)
    xk = rng.standard_normal((1, 3, 2, 16)).astype(np.float32)
    cos, sin = _rope_tables(rng, 12, 4)
    cos, sin = np.concatenate([cos, cos], -1), np.concatenate([sin, sin], -1)
    oq, ok = (o.numpy() for o in torch.ops.et_vk.apply_rotary_emb_hf(t(xq), t(xk), t(cos), t(sin), 5))
    q, k = llm.apply_rotary_emb_hf(xq, xk, cos, sin, 5)
    np.testing.assert_allclose(q, oq, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(k, ok, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(q[..., 8:], xq[..., 8:])
    assert not np.allclose(llm.apply_rotary_emb_hf(xq, xk, cos, sin, 4)[0], oq, atol=1e-3)


def _sdpa_oracle(q, k, v, k_cache, v_cache, start, causal=True):
    caches = t(k_cache.copy()), t(v_cache.copy())
    out = torch.ops.llama.sdpa_with_kv_cache(t(q), t(k), t(v), *caches, start, q.shape[1], None, 0.0, causal, None)
    return out.numpy(), caches[0].numpy(), caches[1].numpy()


def test_sdpa_with_kv_cache_prefill_then_decode_matches_executorch(rng):
    """Prefill five tokens at 0, then decode one at 5, with grouped-query heads (4 query, 2 KV heads)."""
    k_cache, v_cache = (np.zeros((1, 16, 2, 8), np.float32) for _ in range(2))
    ours_k, ours_v = k_cache.copy(), v_cache.copy()
    for start, seq in ((0, 5), (5, 1)):
        q = rng.standard_normal((1, seq, 4, 8)).astype(np.float32)
        k, v = (rng.standard_normal((1, seq, 2, 8)).astype(np.float32) for _ in range(2))
        oracle, k_cache, v_cache = _sdpa_oracle(q, k, v, k_cache, v_cache, start)
        out = llm.sdpa_with_kv_cache(q, k, v, ours_k, ours_v, start, seq, None, 0.0, True, None)
        np.testing.assert_allclose(out, oracle, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(ours_k, k_cache)
        np.testing.assert_array_equal(ours_v, v_cache)


def test_sdpa_checks_fail_for_a_cache_written_one_slot_off_or_a_missing_mask(rng):
    q = rng.standard_normal((1, 4, 4, 8)).astype(np.float32)
    k, v = (rng.standard_normal((1, 4, 2, 8)).astype(np.float32) for _ in range(2))
    base = rng.standard_normal((1, 16, 2, 8)).astype(np.float32)
    oracle, _, _ = _sdpa_oracle(q, k, v, base, base, 3)
    shifted = llm.sdpa_with_kv_cache(q, k, v, base.copy(), base.copy(), 4, 4, None, 0.0, True, None)
    unmasked = llm.sdpa_with_kv_cache(q, k, v, base.copy(), base.copy(), 3, 4, None, 0.0, False, None)
    assert not np.allclose(shifted[:, :1], oracle[:, :1], atol=1e-3)
    assert not np.allclose(unmasked, oracle, atol=1e-3)


def test_sdpa_refuses_positions_outside_the_cache():
    cache = np.zeros((1, 4, 1, 8), np.float32)
    with pytest.raises(ValueError, match="outside the cache of 4"):
        llm.sdpa_with_kv_cache(np.ones((1, 2, 1, 8)), np.ones((1, 2, 1, 8)), np.ones((1, 2, 1, 8)), cache,
                               cache.copy(), 3, 2)


def test_views_and_embedding_match_torch(rng):
    x = rng.standard_normal((3, 7, 5)).astype(np.float32)
    np.testing.assert_array_equal(llm.slice_copy(x, 1, 2, 6), torch.ops.aten.slice_copy.Tensor(t(x), 1, 2, 6).numpy())
    np.testing.assert_array_equal(llm.slice_copy(x, 0, 1, 99, 2), t(x)[1::2].numpy())
    np.testing.assert_array_equal(llm.select_copy(x, 1, -1), torch.ops.aten.select_copy.int(t(x), 1, -1).numpy())
    table = rng.standard_normal((11, 4)).astype(np.float32)
    tokens = np.array([[3, 0, 10, 3]])
    np.testing.assert_array_equal(llm.embedding(table, tokens), torch.nn.functional.embedding(t(tokens), t(table)))
    assert llm.select_as_symint(np.array([7, 9], np.int32), 0, -1) == 9
