"""``et_vk.apply_rotary_emb_interleaved`` (EdgeTAM's RoPE) as kernel cases.

``x [B, T, C]`` (T tokens) with a fused table of ``T * C`` elements, flat ``(cos, sin)``
pairs of random angles. Shapes reach: T = 1; C = 4 (one texel), C % 8 == 4 (12, 36: the
C++ needs only ``C % 4 == 0``); B > 1 (texture depth); a long row (C = 256, T = 31). Every
case holds one all-zero token row and one all-equal row (when T allows). Flags:

* ``f4d``: the table as ``[1, T, C/2, 2]`` (``torch.view_as_real(...).unsqueeze(0)``; the C++
  checks only its element count and the shader indexes it flat);
* ``big``: pair norms log-uniform in ``[256, 6e4]`` (near float16's maximum; a rotation keeps
  the norm, so results stay at most ``sqrt(2)`` times larger and float16 may overflow to inf,
  as the reference then does).

Both storages of ``x`` (the table is always a buffer), fp32 and fp16 (the partitioner admits
float types only). T shrinks below the bound (the table with it).
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

OP = "et_vk.apply_rotary_emb_interleaved.default"

SHAPES = ((1, 7, 16), (1, 1, 16), (2, 5, 12), (1, 9, 4), (3, 4, 36), (1, 31, 256))
"""(B, T, C)."""

FLAGGED = {"f4d": ((1, 7, 16), (2, 5, 12)), "big": ((1, 7, 16), (3, 4, 36))}
"""Shapes each flag runs on."""

BIG_NORM = (256.0, 6.0e4)
"""Range of the pair norms of ``big`` inputs."""


def _x(shape: tuple[int, int, int], big: bool, rng: np.random.Generator) -> np.ndarray:
    """Pairs of random direction; norms normal-ish, or log-uniform over ``BIG_NORM``; a zero and an equal row."""
    b, t, c = shape
    angle = rng.uniform(-np.pi, np.pi, (b, t, c // 2))
    norm = (np.exp(rng.uniform(*np.log(BIG_NORM), angle.shape)) if big
            else np.abs(rng.standard_normal(angle.shape)) * rng.uniform(0.25, 3.0, (b, t, 1)))
    x = np.stack([norm * np.cos(angle), norm * np.sin(angle)], axis=-1).reshape(shape)
    if t > 1:
        x[0, 0] = 0.0
    if t > 2:
        x[-1, -1] = x[-1, -1, 0]
    return x


def make_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    shape = (case.size("B"), case.size("T"), case.size("C"))
    x = _x(shape, case.has("big"), rng).astype(case.np_dtype)
    angle = rng.uniform(-np.pi, np.pi, (shape[1], shape[2] // 2))
    table = np.stack([np.cos(angle), np.sin(angle)], axis=-1).astype(case.np_dtype)
    freqs = table.reshape(1, shape[1], shape[2] // 2, 2) if case.has("f4d") else table.reshape(shape[1], shape[2])
    return {"x": x, "freqs_cis": freqs}


def _flags(shape: tuple[int, int, int]) -> list[tuple[str, ...]]:
    return [()] + [(flag,) for flag, shapes in FLAGGED.items() if shape in shapes]


@register_test_suite(OP, make_args=make_args, resizable=("T",))
def rotary_interleaved_suite() -> Iterator[KernelCase]:
    for (b, t, c), dtype, storage in itertools.product(SHAPES, ("fp32", "fp16"), ("buffer", "texture3d")):
        for flags in _flags((b, t, c)):
            yield KernelCase(op=OP, name="apply_rotary_emb_interleaved", shape=(("B", b), ("T", t), ("C", c)),
                             dtype=dtype, storage=storage, flags=flags)
