"""The ops of an exported Llama block in float64: RMSNorm, rotary embeddings, SDPA over a KV cache, SymInt glue.

Semantics follow the ops' definitions, not any kernel:

* ``rms_norm(x, weight, eps) = x / sqrt(mean(x**2, -1) + eps) * weight`` (``et_vk.rms_norm``;
  its eager implementation computes in float32 and casts back to the input dtype);
* ``apply_rotary_emb`` is llama's interleaved convention: pairs ``(x[2i], x[2i+1])`` are
  rotated by ``(cos[s, i], sin[s, i])`` for sequence position ``s``;
  ``apply_rotary_emb_hf`` is Hugging Face's half-split ``rotate_half`` convention on the
  first ``rotary_dim = 2 * freqs.shape[-1]`` features (the rest passes through), with the
  tables read from ``start_pos``;
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

__all__ = ["rms_norm", "apply_rotary_emb", "apply_rotary_emb_hf", "sdpa_with_kv_cache", "embedding",
           "slice_copy", "select_copy", "select_as_symint"]


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
