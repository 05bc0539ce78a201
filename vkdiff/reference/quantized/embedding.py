"""Reference 4-bit group-wise embedding (ET-VK ``et_vk.embedding_q4gsw``).

Pure numpy; the dequantized values are exact in float64.
"""

from __future__ import annotations

import numpy as np

from vkdiff.reference.quantized.packing import unpack_int4_embedding, unpack_int4_linear

__all__ = ["embedding_q4gsw"]


def embedding_q4gsw(
    indices: np.ndarray,
    packed_weight: np.ndarray,
    scales: np.ndarray,
    group_size: int,
    is_linear_weight: bool = False,
) -> np.ndarray:
    """Reference for ``et_vk.embedding_q4gsw``: a row gather of a dequantized table.

    With ``D = 2 * packed_weight.shape[1]`` and int4 codes ``c[v, d]``::

        is_linear_weight=False (embedding order, quantized_decomposed.embedding_4bit):
            c[v, 2j] = (packed[v, j] >> 4) - 8,   c[v, 2j+1] = (packed[v, j] & 0xF) - 8
        is_linear_weight=True (linear_q4gsw order, what ET-VK's export passes store):
            c[v, 2j] = (packed[v, j] & 0xF) - 8,  c[v, 2j+1] = (packed[v, j] >> 4) - 8

        out[i..., d] = c[indices[i...], d] * scales[indices[i...], d // group_size]

    evaluated exactly in float64 (the eager op and the shader multiply in
    float32, i.e. they return this value rounded to float32). ``scales`` is
    ``[V, D // group_size]`` row-major in both conventions (not the
    transposed ``[G, N]`` layout of ``linear_q4gsw``); a 1-D ``[V]`` is one
    group per row.

    ET-VK notes: the runtime requires ``D % 32 == 0``. The shader looks up
    one scale per 4 consecutive elements (``scales[v * G + d4 / group_size]``
    with ``d4`` the first of the 4), so it matches this reference only when
    ``group_size % 4 == 0``. With ``is_linear_weight=True`` the GPU reads
    the weight after ``prepack_quantized_linear_weight`` (the ``linear_q4gsw``
    block layout); this reference takes the op's argument, the
    ``[V, D // 2]`` bytes, as the eager op does.

    Args:
        indices: Integer indices, any shape, values in ``[0, V)``.
        packed_weight: uint8 ``[V, D // 2]``.
        scales: float16/float32 ``[V, D // group_size]`` (or ``[V]``).
        group_size: Elements per scale group along D; must divide D.
        is_linear_weight: Nibble order, see above.

    Returns:
        float64 ``indices.shape + (D,)``.

    Raises:
        ValueError: On shape mismatches or out-of-range indices.
    """
    packed_weight = np.asarray(packed_weight)
    idx = np.asarray(indices)
    if not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"indices must be integers, got {idx.dtype}")
    unpack = unpack_int4_linear if is_linear_weight else unpack_int4_embedding
    codes = unpack(packed_weight)
    v, d = codes.shape
    if group_size <= 0 or d % group_size != 0:
        raise ValueError(f"group_size {group_size} must divide D={d}")
    groups = d // group_size
    s = np.asarray(scales)
    if s.ndim == 1:
        s = s.reshape(-1, 1)
    if s.shape != (v, groups):
        raise ValueError(f"scales shape {np.asarray(scales).shape} != [{v}, {groups}]")
    if idx.size and (idx.min() < 0 or idx.max() >= v):
        raise ValueError(f"indices out of [0, {v}): [{idx.min()}, {idx.max()}]")
    flat = idx.reshape(-1)
    rows = np.multiply(
        codes[flat].reshape(-1, groups, group_size),
        s[flat].astype(np.float64)[:, :, None],
        dtype=np.float64,
    )
    return rows.reshape(*idx.shape, d)
