"""ET-VK tensor packing for the quantized linear / embedding ops (numpy only).

Reproduces what ``executorch/backends/vulkan/patterns/quantized_linear.py``,
``quantized_embedding.py`` and ``weight_packing_utils.py`` do to the torchao
tensors at export time:

* int4 codes ``q[N, K]`` (int8 storage, values in [-8, 7]) are packed two per
  byte along K (:func:`pack_int4_linear`),
* group scales ``[N, K // gs]`` are transposed to ``[K // gs, N]`` and the
  width (N) is zero-padded to a multiple of 4 (:func:`transpose_scales`),
* for the dynamic-int8-activation variant (``linear_dq8ca_q4gsw``) the
  per-group sums of the codes are stored as int32 ``[K // gs, N]`` with the
  width zero-padded to a multiple of 8 (:func:`weight_sums`),
* for the static int8 linear (``linear_q8ta_q8csw``) the per-output-channel
  sums of the int8 codes, zero-padded to a multiple of 4
  (:func:`weight_sums_per_channel`),
* 4-bit embedding tables: ``quantized_decomposed.embedding_4bit`` stores them
  in the opposite nibble order (:func:`pack_int4_embedding`); ET-VK's
  embedding passes repack them with :func:`pack_int4_linear` and call
  ``embedding_q4gsw(..., is_linear_weight=True)``,

and what the GPU does at run time to activations of ``linear_dq8ca_q4gsw``:
int8 codes in ``kPackedInt8_4H4W`` blocks plus per-group row sums
(:func:`pack_int8_4h4w`, :func:`quantize_and_pack_4h4w_with_group_sums`).

All arrays are C-contiguous, row-major; "width" is the last (innermost) axis.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from vkdiff.reference.quantized.quant import quantize_per_token

__all__ = [
    "pad_last_dim",
    "pack_int4_linear",
    "unpack_int4_linear",
    "transpose_scales",
    "untranspose_scales",
    "weight_sums",
    "weight_sums_per_channel",
    "pack_int4_embedding",
    "unpack_int4_embedding",
    "pack_int8_4h4w",
    "unpack_int8_4h4w",
    "quantize_and_pack_4h4w_with_group_sums",
    "pack_q4_w4x8",
    "pack_q8_linear_weight",
    "pack_q8_conv2d_weight",
    "pack_q8_conv2d_dw_weight",
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

    Note: ET-VK's export pass pads to 8, but ``linear_dq8ca_q4gsw_tiled.glsl``
    indexes the sums as ``ivec4 t_weight_sums[g * N4 + n4]`` with
    ``N4 = ceil(N / 4)``, i.e. a row stride of ``ceil(N / 4) * 4`` ints.
    The two agree only when ``N % 8`` is 0 or in 5..7; for ``N % 8`` in 1..4
    and more than one group the shader reads group ``g >= 1`` sums from the
    wrong offset. ``pad_to=4`` gives the layout the shader indexes.

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


def weight_sums_per_channel(q: np.ndarray, pad_to: int = 4) -> np.ndarray:
    """Per-output-channel sums of int8 codes (``linear_q8ta_q8csw`` layout).

    ``out[n] = sum_k q[n, k]`` (exact) for ``n < N``, zero up to
    ``ceil(N / pad_to) * pad_to``; int32. This is what ET-VK's
    ``make_linear_q8ta_q8csw_custom_op`` / ``make_q8ta_linear_custom_op``
    store (``weight.sum(dim=1).to(int32)`` padded to a multiple of 4).

    Args:
        q: Integer codes ``[N, K]``.
        pad_to: Width alignment (ET-VK uses 4).

    Returns:
        int32 array ``[N_padded]``.
    """
    q = np.asarray(q)
    if q.ndim != 2 or not np.issubdtype(q.dtype, np.integer):
        raise ValueError(f"expected 2-D integer [N, K], got {q.dtype} {q.shape}")
    return pad_last_dim(q.astype(np.int64).sum(axis=1).astype(np.int32), pad_to)


def pack_int4_embedding(q: np.ndarray) -> np.ndarray:
    """Packs int4 codes two per byte in the *embedding* nibble order.

    For ``q`` of shape ``[V, D]`` the result ``p`` has shape ``[V, D // 2]``::

        p[v, j] = ((q[v, 2j] + 8) << 4) | (q[v, 2j + 1] + 8)

    i.e. the even-index code goes in the HIGH nibble -- the reverse of
    :func:`pack_int4_linear`. This is the layout of
    ``quantized_decomposed.embedding_4bit`` weights and what
    ``et_vk.embedding_q4gsw(..., is_linear_weight=False)`` consumes
    (``embedding_q4gsw.glsl``, non-linear branch: element ``d`` is
    ``byte >> 4``, element ``d + 1`` is ``byte & 0xF``). ET-VK's export
    passes always repack to the linear order and pass
    ``is_linear_weight=True``. Example: ``[[-8, 7, 0, -1]] -> [[0x0F, 0x87]]``.

    Args:
        q: Integer array ``[V, D]`` in [-8, 7], ``D`` even.

    Returns:
        uint8 array ``[V, D // 2]``.
    """
    q = _check_int4_codes(q)
    if q.shape[1] % 2 != 0:
        raise ValueError(f"D must be even to pack int4 pairs, got D={q.shape[1]}")
    u = (q.astype(np.int16) + INT4_OFFSET).astype(np.uint8)
    return np.ascontiguousarray((u[:, 0::2] << 4) | u[:, 1::2])


def unpack_int4_embedding(packed: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_int4_embedding`.

    ``q[v, 2j] = (packed[v, j] >> 4) - 8``, ``q[v, 2j + 1] = (packed[v, j] & 0xF) - 8``.

    Args:
        packed: uint8 ``[V, D // 2]``.

    Returns:
        int8 ``[V, D]`` in [-8, 7].
    """
    packed = np.asarray(packed)
    if packed.ndim != 2 or packed.dtype != np.uint8:
        raise ValueError(f"expected 2-D uint8, got {packed.dtype} {packed.shape}")
    v, half = packed.shape
    out = np.empty((v, 2 * half), dtype=np.int8)
    out[:, 0::2] = (packed >> 4).astype(np.int8) - INT4_OFFSET
    out[:, 1::2] = (packed & 0x0F).astype(np.int8) - INT4_OFFSET
    return out


def pack_int8_4h4w(q: np.ndarray) -> np.ndarray:
    """Packs int8 codes ``[M, K]`` into ET-VK ``kPackedInt8_4H4W`` blocks.

    M and K are zero-padded to ``M4 * 4`` and ``K4 * 4`` (``M4 = ceil(M / 4)``,
    ``K4 = ceil(K / 4)``). Block ``(m4, k4)`` covers rows ``4*m4 .. 4*m4+3`` and
    columns ``4*k4 .. 4*k4+3``; it is one ``ivec4`` whose component ``r`` packs
    row ``4*m4 + r`` little-endian (``pack_into_int32`` in ``common.glslh``)::

        out[m4, k4, r] = sum_{j<4} (q[4*m4 + r, 4*k4 + j] & 0xFF) << (8 * j)   (as int32)

    Memory order is that of the buffer ``t_packed_int8_input[m4 * K4 + k4]``
    (``write_block`` in ``linear_int8_input_block.glslh``): C order of
    ``out``, so ``out.view(np.int8)`` on a little-endian host reads
    ``[M4, K4, 4 rows, 4 cols]``.

    Args:
        q: Integer codes in [-128, 127], shape ``[M, K]``.

    Returns:
        int32 array ``[M4, K4, 4]``.
    """
    q = np.asarray(q)
    if q.ndim != 2 or not np.issubdtype(q.dtype, np.integer):
        raise ValueError(f"expected 2-D integer [M, K], got {q.dtype} {q.shape}")
    if q.size and (q.min() < -128 or q.max() > 127):
        raise ValueError("int8 codes out of [-128, 127]")
    m, k = q.shape
    m4, k4 = -(-m // 4), -(-k // 4)
    padded = np.zeros((m4 * 4, k4 * 4), dtype=np.int8)
    padded[:m, :k] = q
    blocks = np.ascontiguousarray(padded.reshape(m4, 4, k4, 4).transpose(0, 2, 1, 3))
    return blocks.view("<i4").reshape(m4, k4, 4).astype(np.int32)


def unpack_int8_4h4w(packed: np.ndarray, m: int, k: int) -> np.ndarray:
    """Inverse of :func:`pack_int8_4h4w`, cropping to ``[m, k]``.

    ``q[4*m4 + r, 4*k4 + j] = sign_extend((packed[m4, k4, r] >> (8 * j)) & 0xFF)``.

    Args:
        packed: int32 ``[M4, K4, 4]`` (or the same number of int32s flat).
        m: Real number of rows, ``<= 4 * M4``.
        k: Real number of columns, ``<= 4 * K4``.

    Returns:
        int8 ``[m, k]``.
    """
    m4, k4 = -(-m // 4), -(-k // 4)
    packed = np.asarray(packed)
    if packed.dtype != np.int32 or packed.size != m4 * k4 * 4:
        raise ValueError(
            f"expected {m4 * k4 * 4} int32 for m={m}, k={k}; got {packed.dtype} {packed.shape}"
        )
    b = packed.reshape(m4, k4, 4).astype("<i4").view(np.int8).reshape(m4, k4, 4, 4)
    return np.ascontiguousarray(b.transpose(0, 2, 1, 3).reshape(m4 * 4, k4 * 4)[:m, :k])


def quantize_and_pack_4h4w_with_group_sums(
    x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, group_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Reference for ET-VK's ``quantize_and_pack_4h4w_with_group_sums`` shader.

    The first stage of ``linear_dq8ca_q4gsw`` for ``M > 1``: per-row int8
    quantization of the float activations ``x[M, K]``, packed into 4H4W
    blocks, plus the per-(group, row) sum of the int8 codes. With per-row
    ``scale[m]`` / integral ``zero_point[m]``::

        q[m, k] = clip(round_half_even(x[m, k] * (1 / scale[m])) + zero_point[m], -128, 127)
        packed  = pack_int8_4h4w(q)                               # [M4, K4, 4] int32
        sums[g, m] = sum_{k = g*gs}^{(g+1)*gs - 1} q[m, k]        # [G, M4 * 4] int32

    ``q`` is torchao's ``quantize_affine`` with block ``(1, K)`` (reciprocal
    computed in ``scale.dtype``, product in the wider of ``x`` / ``scale``), which
    is also what the shader evaluates (``round(vec4(x) * (1.0 / scale)) + zp``,
    GLSL ``round`` ties aside). ``sums`` is stored exactly like the shader's
    ``t_int8_input_sums[g * M4 + m4]`` ivec4 buffer (component = row within
    the block), i.e. **group-major** ``[G, M_padded]``, ``M_padded = 4 * M4``.

    Padding rows ``M <= m < M_padded``: ET-VK computes them from out-of-range
    input texels and scale texels (undefined values); they never reach the
    output. Here they are 0 in both ``packed`` and ``sums``; compare only
    rows ``< M``.

    Note: ``group_size`` must be a multiple of 4 (ET-VK uses ``K4_per_group =
    group_size / 4``). The shader's per-worker accumulation
    ``local_sum += dotPacked4x8AccSatEXT(block, 0x01010101, local_sum)``
    double-counts whenever one worker handles more than one block of a
    group, i.e. ``group_size / 4`` greater than the 16 (``group_size < 128``,
    ``o4w16``) or 32 (``group_size >= 128``, ``o2w32``) workers; this
    reference gives the true sums.

    Args:
        x: float16/float32 activations ``[M, K]``, ``K % group_size == 0``.
        scale: Per-row scales, ``M`` elements (any shape).
        zero_point: Per-row integral zero points (int8/int32 or float), ``M``
            elements.
        group_size: Group size along K; multiple of 4 dividing K.

    Returns:
        ``(packed, sums)``: int32 ``[M4, K4, 4]`` and int32 ``[K // group_size, 4 * M4]``.
    """
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"expected 2-D [M, K] activations, got shape {x.shape}")
    m, k = x.shape
    if group_size <= 0 or group_size % 4 or k % group_size:
        raise ValueError(f"group_size {group_size} must be a multiple of 4 dividing K={k}")
    q = quantize_per_token(x, scale, zero_point)
    packed = pack_int8_4h4w(q)
    m_pad = packed.shape[0] * 4
    sums = np.zeros((k // group_size, m_pad), dtype=np.int32)
    sums[:, :m] = q.astype(np.int64).reshape(m, k // group_size, group_size).sum(axis=2).T
    return packed, sums


def pack_q4_w4x8(q: np.ndarray) -> np.ndarray:
    """Packs int4 codes into ET-VK's ``W_4X8`` block layout (``pack_q4_linear_weight__w_4x8``, ``q4gsw_requant``).

    For codes ``q[N, K]`` with ``N4 = ceil(N / 4)``, ``K4 = ceil(K / 4)``, ``N8 = ceil(N4 / 2)``, the
    result is int32 ``[K4 * N8 * 4]``: one ``ivec4`` per ``(k4, n8)`` at ``(k4 * N8 + n8) * 4``, components
    ``(x_a, y_a, x_b, y_b)`` for the 4-row tiles ``n4_a = 2 * n8`` and ``n4_b = n4_a + 1``. In a tile word,
    byte ``b`` holds the codes at ``k = 4 * k4 + b``: rows ``n4 * 4 + {0, 1}`` in ``x`` and ``{2, 3}`` in
    ``y``, the even row in the low nibble::

        word |= (q[n4 * 4 + i, 4 * k4 + b] + 8) << (8 * b + 4 * (i % 2))    # x for i < 2, y for i >= 2

    A tile past ``N4`` (odd ``N4``) is ``0x88888888`` (code 0), and so is every code past ``N`` or ``K`` (ET-VK
    takes only multiples of 4). Example: ``N = 4``, ``K = 4``, all codes 0 gives ``[0x88888888] * 4``.

    Args:
        q: Integer codes ``[N, K]`` in [-8, 7].

    Returns:
        int32 array ``[K4 * N8 * 4]``.
    """
    q = _check_int4_codes(q)
    n, k = q.shape
    k4, n8 = -(-k // 4), -(-n // 8)
    codes = np.full((n8 * 8, k4 * 4), INT4_OFFSET, dtype=np.uint64)
    codes[:n, :k] = (q.astype(np.int64) + INT4_OFFSET).astype(np.uint64)
    tiles = codes.reshape(n8 * 2, 2, 2, k4, 4)  # [n4, x|y, row parity, k4, byte]
    shifts = (np.arange(4, dtype=np.uint64) * 8)[None, None, None, None, :] + (
        np.arange(2, dtype=np.uint64) * 4)[None, None, :, None, None]
    words = (tiles << shifts).sum(axis=(2, 4))  # [n4, x|y, k4]: disjoint nibbles, the sum is the OR
    blocks = words.reshape(n8, 2, 2, k4).transpose(3, 0, 1, 2)  # [k4, n8, tile a|b, x|y]
    return np.ascontiguousarray(blocks.reshape(-1).astype(np.uint32).view(np.int32))


def pack_q8_linear_weight(q: np.ndarray) -> np.ndarray:
    """Packs int8 weight codes into ET-VK's 8-bit linear blocks (``pack_q8_linear_weight``).

    For ``q[N, K]`` (``K % 4 == 0``) with ``N4 = ceil(N / 4)``, ``K4 = K / 4``, the result is int32
    ``[K4, N4 * 4]``: the 4×4 block of rows ``4 * n4 ..`` and columns ``4 * k4 ..`` is the ``ivec4`` at
    ``[k4, 4 * n4 : 4 * n4 + 4]`` (blocks transposed, ``packed[k4][n4]``), component ``i`` holding row
    ``4 * n4 + i``'s four codes, byte ``b`` = column ``4 * k4 + b``; rows past ``N`` are 0::

        packed[k4, 4 * n4 + i] = sum_b (q[4 * n4 + i, 4 * k4 + b] & 0xFF) << (8 * b)

    Example: ``q = [[1, 2, 3, 4]]`` gives ``[[0x04030201, 0, 0, 0]]``.

    Args:
        q: int8 codes ``[N, K]``.

    Returns:
        int32 ``[K4, N4 * 4]``.
    """
    q = np.asarray(q)
    if q.ndim != 2 or q.dtype != np.int8 or q.shape[1] % 4:
        raise ValueError(f"pack_q8_linear_weight needs int8 [N, K] with K % 4 == 0, got {q.dtype} {q.shape}")
    n, k = q.shape
    rows = np.zeros((-(-n // 4) * 4, k), np.int8)
    rows[:n] = q
    return np.ascontiguousarray(rows.view("<i4").T).astype(np.int32)


def pack_q8_conv2d_weight(matrix: np.ndarray, kernel_size, in_channels_per_group: int) -> np.ndarray:
    """Packs a conv's int8 weight matrix into ET-VK's 8-bit conv blocks (``pack_q8_conv2d_weights``).

    ``matrix`` is the fusion pattern's ``[OC, align4(KH·KW·ICg)]`` (column ``(kh·KW + kw)·ICg + ic``; a transposed
    conv's regrouped weight has the same layout). With ``OC4 = ceil(OC / 4)``, ``IC4 = ceil(ICg / 4)`` the result
    is int32 ``[KH·IC4, KW·OC4·4]``: one ``ivec4`` per block ``(block_x, block_y) = (oc4·KW + kw, kh·IC4 + ic4)``
    (texel ``(block_x, block_y)`` of a texture2d, word ``4·(block_y·KW·OC4 + block_x)`` of a buffer), lane
    ``r`` holding output channel ``4·oc4 + r``, byte ``b`` input channel ``4·ic4 + b`` (``pack_into_int32``,
    little-endian); channels past ``OC`` or ``ICg`` are 0, so each tap's channels start a fresh block::

        packed[kh·IC4 + ic4, (oc4·KW + kw)·4 + r] = sum_b (w[4·oc4 + r, kh, kw, 4·ic4 + b] & 0xFF) << (8·b)

    where ``w[oc, kh, kw, ic] = matrix[oc, (kh·KW + kw)·ICg + ic]``. Example: ``OC = 1``, 1×1, ``ICg = 3``,
    ``matrix = [[1, 2, 3, 0]]`` gives ``[[0x030201, 0, 0, 0]]``.

    Args:
        matrix: int8 ``[OC, align4(KH·KW·ICg)]``.
        kernel_size: ``(KH, KW)``.
        in_channels_per_group: ``ICg`` (the input's channels over ``groups``).

    Returns:
        int32 ``[KH·IC4, KW·OC4·4]``.

    Raises:
        ValueError: If ``matrix`` is not int8 2-D with ``align4(KH·KW·ICg)`` columns.
    """
    matrix = np.asarray(matrix)
    kh, kw = (int(k) for k in kernel_size)
    icg = int(in_channels_per_group)
    taps = kh * kw * icg
    if matrix.ndim != 2 or matrix.dtype != np.int8 or matrix.shape[1] != -(-taps // 4) * 4:
        raise ValueError(f"pack_q8_conv2d_weight needs int8 [OC, {-(-taps // 4) * 4}] for kernel {kh}x{kw} and "
                         f"ICg={icg}, got {matrix.dtype} {matrix.shape}")
    oc = matrix.shape[0]
    oc4, ic4 = -(-oc // 4), -(-icg // 4)
    w = np.zeros((oc4 * 4, kh, kw, ic4 * 4), np.int8)
    w[:oc, :, :, :icg] = matrix[:, :taps].reshape(oc, kh, kw, icg)
    blocks = w.reshape(oc4, 4, kh, kw, ic4, 4).transpose(2, 4, 0, 3, 1, 5)  # [kh, ic4, oc4, kw, lane, byte]
    return np.ascontiguousarray(blocks).view("<i4").reshape(kh * ic4, oc4 * kw * 4).astype(np.int32)


def pack_q8_conv2d_dw_weight(weight: np.ndarray) -> np.ndarray:
    """Packs a depthwise conv's int8 weight into ET-VK's 8-bit depthwise blocks (``pack_q8_conv2d_dw_weights``).

    ``weight`` is the fusion pattern's ``[KH, KW, C]`` (``C % 4 == 0``: the pattern asserts it; the shader reads
    whole words of 4 channels, so an unaligned ``C`` would shift every word). With ``KW4 = ceil(KW / 4)`` and
    ``C4 = C / 4`` the result is int32 ``[KH·KW4, C4·4]``: one ``ivec4`` per block ``(c4, k4)`` (texel ``(c4, k4)``
    of a texture2d, word ``4·(k4·C4 + c4)`` of a buffer), ``k4 = kh·KW4 + kw4``; lane ``r`` holds kernel column
    ``4·kw4 + r`` (0 past ``KW``: each kernel row starts a fresh block), byte ``b`` channel ``4·c4 + b``::

        packed[kh·KW4 + kw4, 4·c4 + r] = sum_b (weight[kh, 4·kw4 + r, 4·c4 + b] & 0xFF) << (8·b)

    Lanes are kernel columns and bytes channels -- transposed from :func:`pack_q8_conv2d_weight`'s blocks, where
    lanes are output channels. Example: ``weight[0, 0] = [1, 2, 3, 4]`` (1×1, C = 4) gives ``[[0x04030201, 0, 0,
    0]]``.

    Args:
        weight: int8 ``[KH, KW, C]``, ``C % 4 == 0``.

    Returns:
        int32 ``[KH·KW4, C]``.

    Raises:
        ValueError: If ``weight`` is not int8 3-D with ``C % 4 == 0``.
    """
    weight = np.asarray(weight)
    if weight.ndim != 3 or weight.dtype != np.int8 or weight.shape[2] % 4:
        raise ValueError(f"pack_q8_conv2d_dw_weight needs int8 [KH, KW, C] with C % 4 == 0, got {weight.dtype} "
                         f"{weight.shape}")
    kh, kw, c = weight.shape
    kw4 = -(-kw // 4)
    padded = np.zeros((kh, kw4 * 4, c), np.int8)
    padded[:, :kw] = weight
    words = np.ascontiguousarray(padded).view("<i4")  # [kh, kw4·4, c4]: the 4 channels of one tap
    return np.ascontiguousarray(words.reshape(kh, kw4, 4, c // 4).transpose(0, 1, 3, 2)).reshape(
        kh * kw4, c).astype(np.int32)
