"""Reference 4-bit group-wise symmetric linear (ET-VK ``linear_q4gsw``).

Pure numpy, float64 accumulation. Consumes the tensors in exactly the layout
ET-VK stores them (see :mod:`vkdiff.reference.packing`).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from vkdiff.reference.packing import unpack_int4_linear
from vkdiff.reference.quant import choose_qparams_group_symmetric, quantize_affine

__all__ = [
    "dequantize_q4gsw_weight",
    "linear_q4gsw",
    "quantize_int4_group_symmetric",
]


def dequantize_q4gsw_weight(
    packed_weight: np.ndarray, scales: np.ndarray, group_size: int, k: int
) -> np.ndarray:
    """Unpacks and dequantizes an ET-VK q4gsw weight to float64 ``[N, K]``.

    ``w[n, k] = code[n, k] * scales[k // group_size, n]`` evaluated in float64
    (exact: a 4-bit integer times a float32/float16 scale fits in 53 bits).

    Args:
        packed_weight: uint8 ``[N, Kp // 2]`` (see ``pack_int4_linear``),
            ``Kp >= k`` (K may have been padded before packing).
        scales: ``[K // group_size, N_padded]`` transposed scales,
            ``N_padded >= N``; padding columns are ignored.
        group_size: Input channels per group; must divide ``k``.
        k: Number of real input channels K.

    Returns:
        float64 array ``[N, K]``.
    """
    scales = np.asarray(scales)
    n = packed_weight.shape[0]
    if group_size <= 0 or k % group_size != 0:
        raise ValueError(f"group_size {group_size} must divide K={k}")
    groups = k // group_size
    if scales.ndim != 2 or scales.shape[0] != groups or scales.shape[1] < n:
        raise ValueError(
            f"scales shape {scales.shape} incompatible with [{groups}, >={n}]"
        )
    codes = unpack_int4_linear(packed_weight, k)
    s = scales[:, :n].T.astype(np.float64)  # [N, G]
    w = codes.reshape(n, groups, group_size).astype(np.float64) * s[:, :, None]
    return w.reshape(n, k)


def linear_q4gsw(
    x: np.ndarray,
    packed_weight: np.ndarray,
    scales: np.ndarray,
    group_size: int,
    bias: Optional[np.ndarray] = None,
) -> np.ndarray:
    """Reference for ``et_vk.linear_q4gsw``: ``out = x @ dequant(W).T + bias``.

    Semantics (all in float64)::

        code[n, k] = unpack_int4_linear(packed_weight)[n, k]        # [-8, 7]
        w[n, k]    = code[n, k] * scales[k // group_size, n]
        out[..., n] = sum_k x[..., k] * w[n, k] + bias[n]

    Args:
        x: Float input ``[..., K]`` (``[M, K]`` typically).
        packed_weight: uint8 ``[N, Kp // 2]``; low nibble = even k, high
            nibble = odd k, each code stored as ``code + 8``. Codes with
            ``k >= K`` (packing padding) are ignored.
        scales: Transposed scales ``[K // group_size, N_padded]`` as ET-VK
            stores them (``N_padded >= N``, extra columns ignored).
        group_size: Input channels per quantization group.
        bias: Optional ``[N]`` (or ``[N_padded]``, extra entries ignored).

    Returns:
        float64 array ``[..., N]``.
    """
    x = np.asarray(x)
    k = x.shape[-1]
    w = dequantize_q4gsw_weight(packed_weight, scales, group_size, k)
    # Flatten leading dims so the result does not depend on the batch layout.
    out = (x.reshape(-1, k).astype(np.float64) @ w.T).reshape(*x.shape[:-1], w.shape[0])
    if bias is not None:
        out = out + np.asarray(bias, dtype=np.float64)[: w.shape[0]]
    return out


def quantize_int4_group_symmetric(
    w: np.ndarray, group_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Quantizes a float weight to int4 codes + float32 group scales (torchao).

    Bit-exact with ``quantize_(nn.Linear, IntxWeightOnlyConfig(
    weight_dtype=torch.int4, granularity=PerGroup(group_size)))`` for float32
    weights (``weight.qdata``, ``weight.scale``)::

        scale[n, g] = max(amax(|w[n, g*gs:(g+1)*gs]|) / 7.5, 2**-126)   # float32
        code[n, k]  = clip(round_half_even(w[n, k] * (1 / scale[n, k // gs])), -8, 7)

    float16 weights are handled in float16 with the scale cast to float32
    before quantizing (torchao with ``scale_dtype=torch.float32``); float64
    weights are first cast to float32.

    Args:
        w: Float weight ``[N, K]`` (row = output channel).
        group_size: Group size along K; must divide K.

    Returns:
        ``(codes, scales)``: int8 ``[N, K]`` in [-8, 7] and float32
        ``[N, K // group_size]``.
    """
    w = np.asarray(w)
    if w.dtype == np.float64:
        w = w.astype(np.float32)
    if w.ndim != 2:
        raise ValueError(f"expected a 2-D [N, K] weight, got shape {w.shape}")
    scales, zeros = choose_qparams_group_symmetric(
        w, group_size, bits=4, scale_dtype=np.float32
    )
    codes = quantize_affine(w, (1, group_size), scales, zeros, -8, 7, np.int8)
    return codes, scales
