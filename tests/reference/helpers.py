"""Test helpers: deterministic RNGs, non-degenerate data, tolerances."""

from __future__ import annotations

import hashlib

import numpy as np


def seed_from(*key: object) -> int:
    """Returns a stable 64-bit seed derived from ``key`` (sha256 of its repr)."""
    digest = hashlib.sha256(repr(key).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def make_rng(*key: object) -> np.random.Generator:
    """Returns a numpy Generator seeded from ``key``."""
    return np.random.default_rng(seed_from(*key))


def random_weight(
    rng: np.random.Generator, shape: tuple[int, ...], dtype: type = np.float32
) -> np.ndarray:
    """Normal data with a different magnitude per row (never constant).

    Row magnitudes span 3 decades so that per-group scales differ.
    """
    rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
    mag = 10.0 ** rng.uniform(-2, 1, size=(rows, 1))
    data = (rng.standard_normal((rows, shape[-1])) * mag).reshape(shape)
    out = data.astype(dtype)
    assert out.size < 2 or np.ptp(out.astype(np.float64)) > 0, "degenerate data"
    return out


def random_codes(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform int4 codes in [-8, 7] as int8 (both extremes forced present)."""
    q = rng.integers(-8, 8, size=shape, dtype=np.int8)
    if q.size >= 2:
        flat = q.reshape(-1)
        flat[rng.integers(q.size)] = -8
        flat[rng.integers(q.size)] = 7
    return q


def assert_rel_close(actual: np.ndarray, expected: np.ndarray, rtol: float = 1e-6):
    """|a - e| <= rtol * max|e| elementwise (relative to the output's range)."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    scale = max(float(np.abs(expected).max(initial=0.0)), np.finfo(np.float64).tiny)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale)


def fp32_dot_bound(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Rigorous error bound of a float32 ``x @ w.T`` (gamma_K * |x| @ |w|.T)."""
    k = x.shape[-1]
    u = np.finfo(np.float32).eps / 2
    gamma = (k + 2) * u / (1 - (k + 2) * u)
    return gamma * (np.abs(x.astype(np.float64)) @ np.abs(w.astype(np.float64)).T)
