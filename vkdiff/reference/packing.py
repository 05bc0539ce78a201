"""ET-VK constant-tensor packing for 4-bit group-wise linear (numpy only).

Reproduces what ``executorch/backends/vulkan/patterns/quantized_linear.py`` and
``weight_packing_utils.py`` do to the torchao tensors at export time:

* int4 codes ``q[N, K]`` (int8 storage, values in [-8, 7]) are packed two per
  byte along K (:func:`pack_int4_linear`),
* group scales ``[N, K // gs]`` are transposed to ``[K // gs, N]`` and the
  width (N) is zero-padded to a multiple of 4 (:func:`transpose_scales`),
* for the dynamic-int8-activation variant (``linear_dq8ca_q4gsw``) the
  per-group sums of the codes are stored as int32 ``[K // gs, N]`` with the
  width zero-padded to a multiple of 8 (:func:`weight_sums`).

All arrays are C-contiguous, row-major; "width" is the last (innermost) axis.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

__all__ = [
    "pad_last_dim",
    "pack_int4_linear",
    "unpack_int4_linear",
    "transpose_scales",
    "untranspose_scales",
    "weight_sums",
]

INT4_MIN = -8
INT4_MAX = 7
INT4_OFFSET = 8


def pad_last_dim(a: np.ndarray, multiple: int) -> np.ndarray:
    """Zero-pads the last axis of ``a`` up to a multiple of ``multiple``.

    Mirrors ``torch.nn.functional.pad(a, (0, num_pad))`` as used by ET-VK's
    ``align_width_and_update_state_dict``: ``num_pad = (-W) % multiple`` zeros
    are appended at the end of the last axis; nothing else changes.

    Args:
        a: Array of rank >= 1.
        multiple: Alignment (>= 1). 1 means no padding.

    Returns:
        C-contiguous array of shape ``a.shape[:-1] + (ceil(W / multiple) * multiple,)``
        with the same dtype as ``a``.
    """
    if multiple < 1:
        raise ValueError(f"multiple must be >= 1, got {multiple}")
    a = np.asarray(a)
    num_pad = (-a.shape[-1]) % multiple
    if num_pad == 0:
        return np.ascontiguousarray(a)
    widths = [(0, 0)] * (a.ndim - 1) + [(0, num_pad)]
    return np.pad(a, widths, mode="constant", constant_values=0)


def _check_int4_codes(q: np.ndarray) -> np.ndarray:
    """Validates a 2-D integer array of int4 codes and returns it as ndarray."""
    q = np.asarray(q)
    if q.ndim != 2:
        raise ValueError(f"expected a 2-D [N, K] array, got shape {q.shape}")
    if not np.issubdtype(q.dtype, np.integer):
        raise TypeError(f"int4 codes must have an integer dtype, got {q.dtype}")
    if q.size and (q.min() < INT4_MIN or q.max() > INT4_MAX):
        raise ValueError(
            f"int4 codes out of [-8, 7]: got [{int(q.min())}, {int(q.max())}]"
        )
    return q


def pack_int4_linear(
    q: np.ndarray, inner_dim_padding: Optional[int] = None
) -> np.ndarray:
    """Packs signed int4 codes two per byte, ET-VK ``linear_q4gsw`` layout.

    For ``q`` of shape ``[N, K]`` the result ``p`` has shape ``[N, K // 2]``::

        p[n, j] = ((q[n, 2j + 1] + 8) << 4) | (q[n, 2j] + 8)

    i.e. each code is offset-binary (code + 8 in [0, 15]); the even-k code
    goes in the low nibble and the odd-k code in the high nibble. Example:
    ``[[-8, 7, 0, -1]] -> [[0xF0, 0x78]]``.

    Args:
        q: Integer array ``[N, K]`` with values in [-8, 7].
        inner_dim_padding: If given, K is first zero-padded (code 0, i.e.
            nibble 0x8) to a multiple of this value, as ET-VK's
            ``pack_4bit_weight_tensor(inner_dim_padding=8)`` does. The default
            ``None`` packs exactly ``K`` codes.

    Returns:
        uint8 array ``[N, K_padded // 2]``.

    Raises:
        ValueError: If ``q`` is not 2-D, has out-of-range values, or (after
            padding) an odd K.
    """
    q = _check_int4_codes(q)
    if inner_dim_padding is not None:
        q = pad_last_dim(q, inner_dim_padding)
    if q.shape[1] % 2 != 0:
        raise ValueError(f"K must be even to pack int4 pairs, got K={q.shape[1]}")
    u = (q.astype(np.int16) + INT4_OFFSET).astype(np.uint8)
    return np.ascontiguousarray((u[:, 1::2] << 4) | u[:, 0::2])


def unpack_int4_linear(packed: np.ndarray, k: Optional[int] = None) -> np.ndarray:
    """Inverse of :func:`pack_int4_linear`.

    For ``packed`` of shape ``[N, Kp // 2]``::

        q[n, 2j]     = (packed[n, j] & 0xF) - 8
        q[n, 2j + 1] = (packed[n, j] >> 4) - 8

    Args:
        packed: uint8 array ``[N, Kp // 2]``.
        k: Number of input channels to keep (drops K padding, like ET-VK's
            eager ``unpack_4bit_weight_tensor`` cropping to ``x.shape[-1]``).
            ``None`` keeps all ``Kp`` codes.

    Returns:
        int8 array ``[N, k or Kp]`` with values in [-8, 7].
    """
    packed = np.asarray(packed)
    if packed.ndim != 2 or packed.dtype != np.uint8:
        raise ValueError(f"expected 2-D uint8, got {packed.dtype} {packed.shape}")
    n, half = packed.shape
    out = np.empty((n, 2 * half), dtype=np.int8)
    out[:, 0::2] = (packed & 0x0F).astype(np.int8) - INT4_OFFSET
    out[:, 1::2] = (packed >> 4).astype(np.int8) - INT4_OFFSET
    if k is not None:
        if k > 2 * half:
            raise ValueError(f"k={k} exceeds the {2 * half} packed codes")
        out = np.ascontiguousarray(out[:, :k])
    return out


def transpose_scales(scales: np.ndarray, pad_to: int = 4) -> np.ndarray:
    """Transposes group scales to ET-VK's ``[K // gs, N_padded]`` layout.

    ``out[g, n] = scales[n, g]`` for ``n < N``; ``out[g, n] = 0`` for
    ``N <= n < N_padded``, ``N_padded = ceil(N / pad_to) * pad_to``.

    Args:
        scales: ``[N, G]`` array (torchao layout, G = K // group_size).
        pad_to: Width alignment (ET-VK uses 4 for linear_q4gsw scales).

    Returns:
        C-contiguous ``[G, N_padded]`` array, same dtype as ``scales``.
    """
    scales = np.asarray(scales)
    if scales.ndim != 2:
        raise ValueError(f"expected 2-D [N, G] scales, got shape {scales.shape}")
    return pad_last_dim(np.ascontiguousarray(scales.T), pad_to)


def untranspose_scales(scales_t: np.ndarray, n: int) -> np.ndarray:
    """Inverse of :func:`transpose_scales`: ``[G, N_padded] -> [N, G]``.

    ``out[n', g] = scales_t[g, n']`` for ``n' < n``; padding columns dropped.

    Args:
        scales_t: ``[G, N_padded]`` array.
        n: Number of real output channels (``N <= N_padded``).

    Returns:
        C-contiguous ``[n, G]`` array, same dtype.
    """
    scales_t = np.asarray(scales_t)
    if scales_t.ndim != 2 or not 0 <= n <= scales_t.shape[1]:
        raise ValueError(f"bad scales_t shape {scales_t.shape} for n={n}")
    return np.ascontiguousarray(scales_t[:, :n].T)


def weight_sums(q: np.ndarray, group_size: int, pad_to: int = 8) -> np.ndarray:
    """Per-group sums of int4 codes, ET-VK ``compute_per_group_sums`` layout.

    ``out[g, n] = sum_{k = g*gs}^{(g+1)*gs - 1} q[n, k]`` (exact, integer),
    for ``n < N``; zero for the padding columns up to
    ``N_padded = ceil(N / pad_to) * pad_to``.

    Args:
        q: Integer codes ``[N, K]`` (int4 values stored as int8).
        group_size: Codes per group along K; must divide K.
        pad_to: Width alignment (ET-VK uses 8).

    Returns:
        int32 array ``[K // group_size, N_padded]``.
    """
    q = np.asarray(q)
    if q.ndim != 2 or not np.issubdtype(q.dtype, np.integer):
        raise ValueError(f"expected 2-D integer [N, K], got {q.dtype} {q.shape}")
    n, k = q.shape
    if group_size <= 0 or k % group_size != 0:
        raise ValueError(f"group_size {group_size} must divide K={k}")
    sums = q.astype(np.int64).reshape(n, k // group_size, group_size).sum(axis=2)
    return pad_last_dim(sums.T.astype(np.int32), pad_to)
