"""SDPA without a KV cache update (``SDPA.cpp``): ``llama.custom_sdpa`` and ``et_vk.sdpa``, every route and edge.

``llama.custom_sdpa`` (LLM mode: ``query [1, T, Hq, D]`` over cache inputs ``[1, C, Hkv, D]`` up to
``P + T``, causal): one shape per AV route (id option ``route``): ``tiled`` (T > 1; GQA, and
non-GQA with D % 4 != 0 from ``P`` > 0), ``coop`` (T = 1, Hq == Hkv, and a group of 9 > 8),
``gqa_coop`` (T = 1 at ``P`` 0 and > 0), ``gqa_coop_tile2`` (profile ``adreno``, D4 odd).
``et_vk.sdpa`` (FUSED: ``[B, H, S, D]``): without a mask (``fused_sdpa_qk_tiled``) and with one
(``_bias``: full ``[B, H, S, L]``, ``[1, 1, 1, L]`` broadcast, a causal ``-inf`` mask with a given
``scale``), S = 1, D % 4 != 0, B > 1, and k/v of one head broadcast over H (matmul semantics; the
fused shader reads k head = q head). Both run fp32 and fp16 on buffer and texture3d, and with q on a buffer
and k/v on textures (``ktexture3d``: the shaders' one mixed-storage combination).

Edges (flags): ``large`` logits in [95, 160] (past float32's exp range unless the max is
subtracted), ``negative`` logits all in [-8, -0.5], ``big`` fp16 inputs with |q|, |v| in [256, 1024].
Below the bound: T (custom_sdpa), S and L (et_vk.sdpa).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

CUSTOM_SDPA = "llama.custom_sdpa.default"
FUSED_SDPA = "et_vk.sdpa.default"

DTYPES = ("fp32", "fp16")
STORAGES = ("buffer", "texture3d")
EDGE_FLAGS = ("large", "negative")
LARGE, NEGATIVE = (95.0, 150.0), (-8.0, -0.5)
"""Ranges of the scaled logits of the ``large`` and ``negative`` edges."""

CUSTOM_SHAPES: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = (
    ("tiled", (("T", 7), ("P", 0), ("C", 16), ("Hq", 4), ("Hkv", 2), ("D", 16))),
    ("tiled", (("T", 5), ("P", 6), ("C", 16), ("Hq", 4), ("Hkv", 4), ("D", 6))),
    ("coop", (("T", 1), ("P", 9), ("C", 16), ("Hq", 4), ("Hkv", 4), ("D", 16))),
    ("coop", (("T", 1), ("P", 3), ("C", 8), ("Hq", 9), ("Hkv", 1), ("D", 8))),
    ("gqa_coop", (("T", 1), ("P", 10), ("C", 16), ("Hq", 8), ("Hkv", 2), ("D", 16))),
    ("gqa_coop", (("T", 1), ("P", 0), ("C", 8), ("Hq", 4), ("Hkv", 2), ("D", 8))),
    ("gqa_coop_tile2", (("T", 1), ("P", 5), ("C", 12), ("Hq", 4), ("Hkv", 1), ("D", 12))),
)
"""(route, named sizes) of ``llama.custom_sdpa``; ``gqa_coop_tile2`` runs under the ``adreno`` profile."""

FUSED_SHAPES: tuple[tuple[tuple[str, int], ...], ...] = (
    (("B", 1), ("H", 4), ("Hkv", 4), ("S", 7), ("L", 9), ("D", 16)),
    (("B", 2), ("H", 3), ("Hkv", 3), ("S", 5), ("L", 13), ("D", 6)),
    (("B", 1), ("H", 2), ("Hkv", 2), ("S", 1), ("L", 7), ("D", 8)),
    (("B", 1), ("H", 4), ("Hkv", 4), ("S", 6), ("L", 6), ("D", 16)),
    (("B", 1), ("H", 4), ("Hkv", 1), ("S", 5), ("L", 7), ("D", 8)),
)
"""Named sizes of ``et_vk.sdpa``: ``q [B, H, S, D]``, ``k`` / ``v`` ``[B, Hkv, L, D]``."""
FUSED_MASKS = (None, "mask", "maskrow", "causal", None)
"""The mask flag of each ``FUSED_SHAPES`` entry: full ``[B, H, S, L]``, ``[1, 1, 1, L]``, causal ``[1, 1, S, L]``."""


def aligned_pair(q_shape: tuple[int, ...], k_shape: tuple[int, ...], logits: tuple[float, float],
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """q and k along one direction ``u`` (plus 1% noise) so every ``q·k / sqrt(D)`` lies in ``logits`` stretched
    by each query's factor in [1, 1.05] (away from zero)."""
    dim = q_shape[-1]
    u = rng.standard_normal(dim)
    u /= np.linalg.norm(u)
    target = rng.uniform(*logits, k_shape[:-1] + (1,)) * np.sqrt(dim)
    a = np.sqrt(max(abs(logits[0]), abs(logits[1]))) * rng.uniform(1.0, 1.05, q_shape[:-1] + (1,))
    q = a * u + 0.01 * rng.standard_normal(q_shape)
    k = target / np.sqrt(max(abs(logits[0]), abs(logits[1]))) * u + 0.01 * rng.standard_normal(k_shape)
    return q, k


def _big(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """|x| in [256, 1024], random signs."""
    return rng.uniform(256.0, 1024.0, shape) * rng.choice([-1.0, 1.0], shape)


def qkv(case: KernelCase, q_shape: tuple[int, ...], kv_shape: tuple[int, ...],
        rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, k, v in the case dtype: normals, or the case's edge."""
    v = rng.standard_normal(kv_shape)
    if case.has("large") or case.has("negative"):
        q, k = aligned_pair(q_shape, kv_shape, LARGE if case.has("large") else NEGATIVE, rng)
    elif case.has("big"):
        q, k, v = _big(q_shape, rng), 0.02 * rng.standard_normal(kv_shape), _big(kv_shape, rng)
    else:
        q, k = rng.standard_normal(q_shape), rng.standard_normal(kv_shape)
    return tuple(x.astype(case.np_dtype) for x in (q, k, v))


def custom_sdpa_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """Query ``[1, T, Hq, D]`` and caches ``[1, C, Hkv, D]`` (rows past ``P + T`` are drawn too, never read)."""
    t, p, c, hq, hkv, d = (case.size(n) for n in ("T", "P", "C", "Hq", "Hkv", "D"))
    query, key, value = qkv(case, (1, t, hq, d), (1, c, hkv, d), rng)
    return {"query": query, "key": key, "value": value, "start_pos": p, "attn_mask": None, "drpout_p": 0.0,
            "is_causal": True, "scale": None}


def fused_mask(case: KernelCase, rng: np.random.Generator) -> np.ndarray | None:
    """The case's additive mask: full, one broadcast row, or causal (``-inf`` above the diagonal)."""
    b, h, s, length = (case.size(n) for n in ("B", "H", "S", "L"))
    if case.has("mask"):
        return rng.uniform(-4.0, 4.0, (b, h, s, length)).astype(case.np_dtype)
    if case.has("maskrow"):
        return rng.uniform(-4.0, 4.0, (1, 1, 1, length)).astype(case.np_dtype)
    if case.has("causal"):
        future = np.arange(length)[None, :] > np.arange(s)[:, None]
        return np.where(future, -np.inf, rng.uniform(-1.0, 1.0, (s, length)))[None, None].astype(case.np_dtype)
    return None


def fused_sdpa_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """``q [B, H, S, D]``, ``k`` / ``v`` ``[B, Hkv, L, D]``, the mask flag's mask, ``scale`` 0.3 with ``causal``."""
    b, h, hkv, s, length, d = (case.size(n) for n in ("B", "H", "Hkv", "S", "L", "D"))
    q, k, v = qkv(case, (b, h, s, d), (b, hkv, length, d), rng)
    return {"q": q, "k": k, "v": v, "attn_mask": fused_mask(case, rng), "scale": 0.3 if case.has("causal") else None}


MIXED = {CUSTOM_SDPA: ("key", "value"), FUSED_SDPA: ("k", "v")}
"""The inputs that ``mixed`` cases put on textures while q and the output stay on buffers: the shaders' one mixed
storage combination (``[buffer, texture3d]`` in their yaml), which a partitioner may give."""


def _mixed(op: str) -> tuple[tuple[str, str], ...]:
    return tuple((f"storage.{name}", "texture3d") for name in MIXED[op])


def custom_case(route: str, shape: tuple[tuple[str, int], ...], dtype: str, storage: str,
                flags: tuple[str, ...] = (), mixed: bool = False) -> KernelCase:
    """One ``custom_sdpa`` case; the tile2 route under the ``adreno`` profile."""
    options = ((("route", route),) + ((("profile", "adreno"),) if route == "gqa_coop_tile2" else ())
               + (_mixed(CUSTOM_SDPA) if mixed else ()))
    return KernelCase(op=CUSTOM_SDPA, name="custom_sdpa", shape=shape, dtype=dtype, storage=storage,
                      options=options, flags=flags)


@register_test_suite(CUSTOM_SDPA, make_args=custom_sdpa_args, resizable=("T",))
def custom_sdpa_suite() -> Iterator[KernelCase]:
    for (route, shape), dtype, storage in itertools.product(CUSTOM_SHAPES, DTYPES, STORAGES):
        yield custom_case(route, shape, dtype, storage)
    for (route, shape), flag, dtype in itertools.product((CUSTOM_SHAPES[0], CUSTOM_SHAPES[4]), EDGE_FLAGS, DTYPES):
        yield custom_case(route, shape, dtype, "texture3d", (flag,))
    for (route, shape), storage in itertools.product((CUSTOM_SHAPES[0], CUSTOM_SHAPES[4]), STORAGES):
        yield custom_case(route, shape, "fp16", storage, ("big",))
    for (route, shape), dtype in itertools.product((CUSTOM_SHAPES[0], CUSTOM_SHAPES[2], CUSTOM_SHAPES[4]), DTYPES):
        yield custom_case(route, shape, dtype, "buffer", mixed=True)


def fused_case(shape: tuple[tuple[str, int], ...], dtype: str, storage: str, flags: tuple[str, ...],
               mixed: bool = False) -> KernelCase:
    return KernelCase(op=FUSED_SDPA, name="sdpa", shape=shape, dtype=dtype, storage=storage, flags=flags,
                      options=_mixed(FUSED_SDPA) if mixed else ())


@register_test_suite(FUSED_SDPA, make_args=fused_sdpa_args, resizable=("S", "L"))
def fused_sdpa_suite() -> Iterator[KernelCase]:
    for (shape, mask), dtype, storage in itertools.product(zip(FUSED_SHAPES, FUSED_MASKS), DTYPES, STORAGES):
        yield fused_case(shape, dtype, storage, (mask,) if mask else ())
    for flag, dtype in itertools.product(EDGE_FLAGS, DTYPES):
        yield fused_case(FUSED_SHAPES[0], dtype, "texture3d", (flag,))
    for storage in STORAGES:
        yield fused_case(FUSED_SHAPES[0], "fp16", storage, ("big",))
    for (shape, mask), dtype in itertools.product(((FUSED_SHAPES[0], None), (FUSED_SHAPES[2], "maskrow")), DTYPES):
        yield fused_case(shape, dtype, "buffer", (mask,) if mask else (), mixed=True)
