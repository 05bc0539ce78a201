"""The ops of an exported Llama block in float64: RMSNorm, rotary embeddings, SDPA over a KV cache, SymInt glue.

Semantics follow the ops' definitions, not any kernel:

* ``rms_norm(x, weight, eps) = x / sqrt(mean(x**2, -1) + eps) * weight`` (``et_vk.rms_norm``;
  its eager implementation computes in float32 and casts back to the input dtype);
* ``apply_rotary_emb`` is llama's interleaved convention: pairs ``(x[2i], x[2i+1])`` are
  rotated by ``(cos[s, i], sin[s, i])`` for sequence position ``s``;
  ``apply_rotary_emb_hf`` is Hugging Face's half-split ``rotate_half`` convention on the
  first ``rotary_dim = 2 * freqs.shape[-1]`` features (the rest passes through), with the
  tables read from ``start_pos``; ``apply_rotary_emb_interleaved`` (EdgeTAM) rotates the pairs of
  ``x [B, N, C]`` by a fused table whose flattened layout is ``[N, C]`` of ``(cos, sin)`` pairs;
* ``sdpa_with_kv_cache`` (``llama.sdpa_with_kv_cache``, layout ``[B, S, H, D]``) writes
  ``key``/``value`` into the caches at ``start_pos`` (in place: the caches are mutable
  arguments) and attends each query at absolute position ``start_pos + i`` to cache
  positions ``0 .. start_pos + S - 1`` (only those up to its own when ``is_causal``), with
  ``scale = 1/sqrt(D)`` by default and grouped-query heads: query head ``h`` reads KV head
  ``h // (Hq / Hkv)``.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

__all__ = ["rms_norm", "apply_rotary_emb", "apply_rotary_emb_hf", "apply_rotary_emb_interleaved",
           "sdpa_with_kv_cache", "embedding",
           "slice_copy", "select_copy", "select_as_symint", "update_cache", "custom_sdpa", "fused_sdpa"]


def rms_norm(x, weight, eps: float) -> np.ndarray:
    """``x * rsqrt(mean(x**2, -1) + eps) * weight``."""
    x = np.asarray(x, np.float64)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + float(eps)) * np.asarray(weight, np.float64)


def _rotate_pairs(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Interleaved rotation of ``x [B, S, H, D]`` by ``cos, sin [S, D/2]``."""
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    real, imag = pairs[..., 0], pairs[..., 1]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return np.stack([real * c - imag * s, real * s + imag * c], axis=-1).reshape(x.shape)


def apply_rotary_emb(xq, xk, freqs_cos, freqs_sin) -> tuple[np.ndarray, np.ndarray]:
    """Llama's interleaved RoPE on queries and keys ``[B, S, H, D]`` with tables ``[S, D/2]``."""
    cos, sin = np.asarray(freqs_cos, np.float64), np.asarray(freqs_sin, np.float64)
    return (_rotate_pairs(np.asarray(xq, np.float64), cos, sin),
            _rotate_pairs(np.asarray(xk, np.float64), cos, sin))


def _interleaved_tables(x_shape: tuple[int, ...], freqs_cis) -> tuple[np.ndarray, np.ndarray]:
    """``freqs_cis`` (any rank, ``N * C`` elements) as ``cos, sin [N, C/2]``: its flat ``(cos, sin)`` pairs."""
    _, n, c = x_shape
    pairs = np.asarray(freqs_cis, np.float64).reshape(n, c // 2, 2)
    return pairs[..., 0], pairs[..., 1]


def apply_rotary_emb_interleaved(x, freqs_cis) -> np.ndarray:
    """EdgeTAM's RoPE on ``x [B, N, C]``: pairs ``(x[2k], x[2k+1])`` times the complex ``freqs_cis`` pair ``k``."""
    x = np.asarray(x, np.float64)
    cos, sin = _interleaved_tables(x.shape, freqs_cis)
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    real, imag = pairs[..., 0], pairs[..., 1]
    return np.stack([real * cos - imag * sin, real * sin + imag * cos], axis=-1).reshape(x.shape)


def apply_rotary_emb_interleaved_accumulation(x, freqs_cis) -> tuple[np.ndarray, np.ndarray]:
    """Output and its magnitude ``|x_r·cos| + |x_i·sin|`` (the two products each element adds)."""
    a = np.abs(np.asarray(x, np.float64))
    cos, sin = (np.abs(t) for t in _interleaved_tables(a.shape, freqs_cis))
    pairs = a.reshape(*a.shape[:-1], -1, 2)
    magnitude = np.stack([pairs[..., 0] * cos + pairs[..., 1] * sin, pairs[..., 0] * sin + pairs[..., 1] * cos],
                         axis=-1).reshape(a.shape)
    return apply_rotary_emb_interleaved(x, freqs_cis), magnitude


def _rotate_half(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """``x * cos + rotate_half(x) * sin`` on the first ``cos.shape[-1]`` features of ``x [B, S, H, D]``."""
    dim = cos.shape[-1]
    rot, rest = x[..., :dim], x[..., dim:]
    half = dim // 2
    rotated = np.concatenate([-rot[..., half:], rot[..., :half]], axis=-1)
    return np.concatenate([rot * cos[None, :, None, :] + rotated * sin[None, :, None, :], rest], axis=-1)


def apply_rotary_emb_hf(xq, xk, freqs_cos, freqs_sin, start_pos: int) -> tuple[np.ndarray, np.ndarray]:
    """Hugging Face RoPE (``rotate_half``), tables ``[max_seq, rotary_dim]`` read from ``start_pos``."""
    seq = np.shape(xq)[1]
    cos = np.asarray(freqs_cos, np.float64)[int(start_pos):int(start_pos) + seq]
    sin = np.asarray(freqs_sin, np.float64)[int(start_pos):int(start_pos) + seq]
    return (_rotate_half(np.asarray(xq, np.float64), cos, sin), _rotate_half(np.asarray(xk, np.float64), cos, sin))


def apply_rotary_emb_accumulation(xq, xk, freqs_cos, freqs_sin) -> tuple[tuple, tuple]:
    """Outputs and their magnitudes ``|x_r·cos| + |x_i·sin|`` (the two products a rotation adds)."""
    cos, sin = np.abs(np.asarray(freqs_cos, np.float64)), np.abs(np.asarray(freqs_sin, np.float64))

    def magnitude(x) -> np.ndarray:
        pairs = np.abs(np.asarray(x, np.float64)).reshape(*np.shape(x)[:-1], -1, 2)
        c, s = cos[None, :, None, :], sin[None, :, None, :]
        return np.stack([pairs[..., 0] * c + pairs[..., 1] * s, pairs[..., 0] * s + pairs[..., 1] * c],
                        axis=-1).reshape(np.shape(x))

    return apply_rotary_emb(xq, xk, freqs_cos, freqs_sin), (magnitude(xq), magnitude(xk))


def apply_rotary_emb_hf_accumulation(xq, xk, freqs_cos, freqs_sin, start_pos: int) -> tuple[tuple, tuple]:
    """Outputs and their magnitudes ``|x|·|cos| + |rotate_half(x)|·|sin|`` (features past the rotary dims: ``|x|``)."""
    seq = np.shape(xq)[1]
    cos = np.abs(np.asarray(freqs_cos, np.float64)[int(start_pos):int(start_pos) + seq])
    sin = np.abs(np.asarray(freqs_sin, np.float64)[int(start_pos):int(start_pos) + seq])

    def magnitude(x) -> np.ndarray:
        x = np.abs(np.asarray(x, np.float64))
        dim, half = cos.shape[-1], cos.shape[-1] // 2
        rot = x[..., :dim]
        swapped = np.concatenate([rot[..., half:], rot[..., :half]], axis=-1)
        return np.concatenate([rot * cos[None, :, None, :] + swapped * sin[None, :, None, :], x[..., dim:]], axis=-1)

    return apply_rotary_emb_hf(xq, xk, freqs_cos, freqs_sin, start_pos), (magnitude(xq), magnitude(xk))


def _softmax(scores: np.ndarray) -> np.ndarray:
    shifted = scores - np.max(scores, axis=-1, keepdims=True)
    weights = np.exp(shifted)
    return weights / np.sum(weights, axis=-1, keepdims=True)


def sdpa_with_kv_cache(query, key, value, key_cache: np.ndarray, value_cache: np.ndarray, start_pos: int,
                       seq_len: int = 1, attn_mask=None, drpout_p: float = 0.0, is_causal: bool = False,
                       scale: Optional[float] = None) -> np.ndarray:
    """Update the caches at ``start_pos`` (in place) and attend over them: output ``[B, S, Hq, D]``.

    ``seq_len`` is taken from ``query`` (the serialized argument is the traced value).
    """
    q = np.asarray(query, np.float64)
    batch, seq, heads, dim = q.shape
    start = int(start_pos)
    if start < 0 or start + seq > key_cache.shape[1]:
        raise ValueError(f"sdpa_with_kv_cache: positions {start}..{start + seq - 1} outside the cache of "
                         f"{key_cache.shape[1]}")
    key_cache[:, start:start + seq] = np.asarray(key).astype(key_cache.dtype)
    value_cache[:, start:start + seq] = np.asarray(value).astype(value_cache.dtype)
    length = start + seq
    with np.errstate(invalid="ignore"):  # a device cache may hold signalling-NaN poison past what was written
        keys = np.asarray(key_cache[:, :length], np.float64)
        values = np.asarray(value_cache[:, :length], np.float64)
    group = heads // keys.shape[2]
    keys, values = np.repeat(keys, group, axis=2), np.repeat(values, group, axis=2)
    factor = 1.0 / np.sqrt(dim) if scale is None else float(scale)
    scores = np.einsum("bshd,bthd->bhst", q, keys) * factor
    if attn_mask is not None:
        scores = scores + np.asarray(attn_mask, np.float64)[..., :seq, :length]
    if is_causal:
        future = np.arange(length)[None, :] > (start + np.arange(seq))[:, None]
        scores = np.where(future[None, None], -np.inf, scores)
    return np.einsum("bhst,bthd->bshd", _softmax(scores), values)


def embedding(weight, indices, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> np.ndarray:
    """Rows of ``weight`` at ``indices``."""
    return np.asarray(weight, np.float64)[np.asarray(indices).astype(np.int64)]


def slice_copy(self, dim: int = 0, start: Optional[int] = None, end: Optional[int] = None,
               step: int = 1) -> np.ndarray:
    """``self[..., start:end:step, ...]`` along ``dim`` (PyTorch clamps out-of-range bounds, as slicing does)."""
    x = np.asarray(self)
    index = [slice(None)] * x.ndim
    index[int(dim)] = slice(None if start is None else int(start), None if end is None else int(end), int(step))
    return np.array(x[tuple(index)], np.float64)


def select_copy(self, dim: int, index: int) -> np.ndarray:
    """``self`` at ``index`` along ``dim`` (negative from the end), the dim removed."""
    return np.array(np.take(np.asarray(self), int(index), axis=int(dim)), np.float64)


def select_as_symint(x, dim: int, index: int) -> int:
    """The integer at ``index`` along ``dim`` of a 1-D integer tensor (``input_pos[-1]``)."""
    return int(np.take(np.asarray(x), int(index), axis=int(dim)))


# SDPA without a KV cache (llama.custom_sdpa, et_vk.sdpa) and update_cache: issue 22.


def update_cache(value, cache: np.ndarray, start_pos: int) -> np.ndarray:
    """Write ``value [1, S, H, D]`` into ``cache [1, C_max, H, D]`` at ``start_pos`` (in place, as the op mutates it).

    ``llama::update_cache`` returns a one-element placeholder; its effect is the write, so the reference returns
    the cache after it (float64), which is what a check compares.
    """
    seq, start = np.shape(value)[1], int(start_pos)
    if start < 0 or start + seq > cache.shape[1]:
        raise ValueError(f"update_cache: positions {start}..{start + seq - 1} outside the cache of {cache.shape[1]}")
    cache[:, start:start + seq] = np.asarray(value).astype(cache.dtype)
    return np.array(cache, np.float64)


def _cached_heads(query, key, value, start_pos: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Query ``[B, S, Hq, D]`` and the first ``start_pos + S`` cache rows, each query head with its KV head."""
    q = np.asarray(query, np.float64)
    length = int(start_pos) + q.shape[1]
    if int(start_pos) < 0 or length > np.shape(key)[1]:
        raise ValueError(f"custom_sdpa: positions {start_pos}..{length - 1} outside the cache of {np.shape(key)[1]}")
    keys, values = np.asarray(key, np.float64)[:, :length], np.asarray(value, np.float64)[:, :length]
    group = q.shape[2] // keys.shape[2]
    return q, np.repeat(keys, group, axis=2), np.repeat(values, group, axis=2)


def _custom_sdpa_scores(q: np.ndarray, keys: np.ndarray, start_pos: int, attn_mask, is_causal: bool,
                        scale: Optional[float]) -> np.ndarray:
    """Scaled logits ``[B, Hq, S, start_pos + S]``, the mask added, future positions -inf when causal."""
    factor = 1.0 / np.sqrt(q.shape[-1]) if scale is None else float(scale)
    scores = np.einsum("bshd,bthd->bhst", q, keys) * factor
    if attn_mask is not None:
        scores = scores + np.asarray(attn_mask, np.float64)
    if is_causal:
        future = np.arange(keys.shape[1])[None, :] > (int(start_pos) + np.arange(q.shape[1]))[:, None]
        scores = np.where(future[None, None], -np.inf, scores)
    return scores


def custom_sdpa(query, key, value, start_pos: int, attn_mask=None, drpout_p: float = 0.0, is_causal: bool = False,
                scale: Optional[float] = None) -> np.ndarray:
    """``llama.custom_sdpa``: queries at positions ``start_pos + i`` over cache rows ``0 .. start_pos + S - 1``.

    Layout ``[B, S, H, D]``; query head ``h`` reads KV head ``h // (Hq / Hkv)``; with ``is_causal`` a query sees
    rows up to its own position; ``attn_mask`` (additive) broadcasts over ``[B, Hq, S, start_pos + S]``.
    """
    q, keys, values = _cached_heads(query, key, value, start_pos)
    scores = _custom_sdpa_scores(q, keys, start_pos, attn_mask, is_causal, scale)
    return np.einsum("bhst,bthd->bshd", _softmax(scores), values)


def custom_sdpa_accumulation(query, key, value, start_pos: int, attn_mask=None, drpout_p: float = 0.0,
                             is_causal: bool = False, scale: Optional[float] = None) -> tuple[np.ndarray, np.ndarray]:
    """Output and ``Σ_t P_t |v_t| (2 + A_t + max A)``, ``A = |scale| Σ_d |q_d||k_td|``: a logit's rounding error
    scales with ``A`` and moves its weight relatively; the weights' and the sum's own rounding is the 2."""
    q, keys, values = _cached_heads(query, key, value, start_pos)
    scores = _custom_sdpa_scores(q, keys, start_pos, attn_mask, is_causal, scale)
    factor = abs(1.0 / np.sqrt(q.shape[-1]) if scale is None else float(scale))
    spread = np.einsum("bshd,bthd->bhst", np.abs(q), np.abs(keys)) * factor
    if attn_mask is not None:
        spread = spread + np.abs(np.nan_to_num(np.asarray(attn_mask, np.float64), neginf=0.0))
    weights = _softmax(scores)
    bound = weights * (2.0 + spread + np.max(np.where(weights > 0, spread, 0.0), axis=-1, keepdims=True))
    return np.einsum("bhst,bthd->bshd", weights, values), np.einsum("bhst,bthd->bshd", bound, np.abs(values))


def _fused_scores(q, k, attn_mask, scale: Optional[float]) -> tuple[np.ndarray, np.ndarray]:
    """``(q @ k^T * scale + attn_mask, |q| @ |k|^T * |scale| + |attn_mask|)`` over ``[B, H, S, L]``."""
    q, k = np.asarray(q, np.float64), np.asarray(k, np.float64)
    factor = 1.0 / np.sqrt(q.shape[-1]) if scale is None else float(scale)
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * factor
    spread = np.matmul(np.abs(q), np.swapaxes(np.abs(k), -1, -2)) * abs(factor)
    if attn_mask is not None:
        mask = np.asarray(attn_mask, np.float64)
        scores, spread = scores + mask, spread + np.abs(np.nan_to_num(mask, neginf=0.0))
    return scores, spread


def fused_sdpa(q, k, v, attn_mask=None, scale: Optional[float] = None) -> np.ndarray:
    """``et_vk.sdpa``: ``softmax(q @ k^T * scale + attn_mask) @ v`` on ``[B, H, S, D]``, scale ``1/sqrt(D)`` if None."""
    scores, _ = _fused_scores(q, k, attn_mask, scale)
    return np.matmul(_softmax(scores), np.asarray(v, np.float64))


def fused_sdpa_accumulation(q, k, v, attn_mask=None, scale: Optional[float] = None) -> tuple[np.ndarray, np.ndarray]:
    """Output and ``Σ_t P_t |v_t| (2 + A_t + max A)`` (see ``custom_sdpa_accumulation``)."""
    scores, spread = _fused_scores(q, k, attn_mask, scale)
    weights = _softmax(scores)
    bound = weights * (2.0 + spread + np.max(np.where(weights > 0, spread, 0.0), axis=-1, keepdims=True))
    values = np.asarray(v, np.float64)
    return np.matmul(weights, values), np.matmul(bound, np.abs(values))
