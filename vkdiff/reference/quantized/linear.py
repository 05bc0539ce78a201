"""Reference 4-bit group-wise symmetric linears (ET-VK ``linear_q4gsw`` and
``linear_dq8ca_q4gsw``).

Pure numpy, float64 accumulation. Consumes the tensors in exactly the layout
ET-VK stores them (see :mod:`vkdiff.reference.quantized.packing`).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from vkdiff.reference.quantized.packing import pack_q4_w4x8, unpack_int4_embedding, unpack_int4_linear
from vkdiff.reference.quantized.quant import (
    choose_qparams_group_symmetric,
    choose_qparams_per_row_etvk,
    choose_qparams_per_token_asymmetric,
    quantize_affine,
    quantize_per_token,
)

__all__ = [
    "dequantize_q4gsw_weight",
    "linear_float64",
    "linear_q4gsw",
    "linear_dq8ca_q4gsw",
    "linear_dq8ca_q4gsw_dynamic",
    "quantize_int4_group_symmetric",
    "dequantize_per_channel_weight",
    "weight_int8pack_mm",
    "linear_qcs4w",
    "linear_q8csw",
    "q4gsw_requant",
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
    codes = unpack_int4_linear(packed_weight, k).reshape(n, groups, group_size)
    s = scales[:, :n].T.astype(np.float64)  # [N, G]
    # One ufunc pass: int8 codes are cast to float64 inside the loop, so the
    # [N, K] float64 array is written once (no float64 temporary of the codes).
    w = np.multiply(codes, s[:, :, None], dtype=np.float64)
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
    w = dequantize_q4gsw_weight(packed_weight, scales, group_size, x.shape[-1])
    return linear_float64(x, w, bias)


def linear_float64(x: np.ndarray, w: np.ndarray, bias: Optional[np.ndarray] = None) -> np.ndarray:
    """``x @ w.T + bias`` in float64, for ``x [..., K]``, ``w [N, K]`` and ``bias [>=N]`` (extra entries ignored)."""
    x = np.asarray(x)
    k = x.shape[-1]
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


def _check_q4gsw_params(
    n: int, k: int, group_size: int, scales: np.ndarray, sums: Optional[np.ndarray]
) -> int:
    """Validates the transposed scales / weight sums; returns ``K // gs``."""
    if group_size <= 0 or k % group_size != 0:
        raise ValueError(f"group_size {group_size} must divide K={k}")
    groups = k // group_size
    for name, a in (("scales", scales), ("weight_sums", sums)):
        if a is not None and (a.ndim != 2 or a.shape[0] != groups or a.shape[1] < n):
            raise ValueError(f"{name} shape {a.shape} incompatible with [{groups}, >={n}]")
    return groups


def linear_dq8ca_q4gsw(
    x: np.ndarray,
    input_scale: np.ndarray,
    input_zero_point: np.ndarray,
    packed_weight: np.ndarray,
    weight_sums: np.ndarray,
    scales: np.ndarray,
    group_size: int,
    bias: Optional[np.ndarray] = None,
) -> np.ndarray:
    """Reference for ``et_vk.linear_dq8ca_q4gsw`` (int8 dynamic activations).

    The integer path of ``linear_dq8ca_q4gsw_tiled.glsl``. Per row ``m`` of
    ``x[..., K]`` (flattened to ``[M, K]``), with ``s_x = input_scale[m]``,
    ``z = input_zero_point[m]``, int4 codes ``c[n, k]`` (unpacked from
    ``packed_weight``), ``s_w[g, n] = scales[g, n]`` and ``ws = weight_sums``::

        q[m, k]    = clip(round_half_even(x[m, k] * (1 / s_x)) + z, -128, 127)   # int8
        acc[g,m,n] = sum_{k in group g} q[m, k] * c[n, k]                          # integer
        out[m, n]  = s_x * sum_g s_w[g, n] * (acc[g, m, n] - z * ws[g, n]) + bias[n]

    (The shader accumulates over the unsigned nibbles ``u = c + 8`` and
    subtracts ``(ws + 8*gs)*z - 8*(gs*z - sum_k q)``: the same integer.)

    Evaluation: with ``cs[g, n] = sum_{k in g} c[n, k]`` (the true code sums)
    the formula is regrouped, exactly, as::

        out[m, n] = s_x * ( sum_k (q[m, k] - z) * (c[n, k] * s_w[k // gs, n])
                            + z * sum_g s_w[g, n] * (cs[g, n] - ws[g, n]) ) + bias[n]

    Every product is exact in float64 (``q - z`` has 9 bits, ``c * s_w`` 27,
    ``cs - ws`` is an exact integer) and only the float64 sums, ``* s_x``
    and ``+ bias`` round, so rows with ``q == z`` everywhere give exactly
    ``bias``. The correction term is exactly zero when ``ws`` are the true
    sums (:func:`~vkdiff.reference.quantized.packing.weight_sums`) and otherwise
    reproduces what the op computes with the ``ws`` it is given. One float64
    GEMM keeps ``M=32, K=N=4096`` near the cost of :func:`linear_q4gsw`.

    ET-VK dispatch notes: this integer path only runs when ``x.shape[-2] > 1``
    on devices with int8 dot products. For ``x.shape[-2] == 1`` (gemv, even
    with leading batch dims) or without int8 dot products ET-VK computes the weight-only ``linear_q4gsw`` on the float
    input (reference: :func:`linear_q4gsw`); the eager CPU op
    ``torch.ops.et_vk.linear_dq8ca_q4gsw`` always does that, i.e. ignores
    ``input_scale`` / ``input_zero_point`` entirely.

    Args:
        x: float16/float32/float64 activations ``[..., K]``.
        input_scale: Per-row scales, ``prod(x.shape[:-1])`` elements.
        input_zero_point: Per-row integral zero points, int8/int32 or float32
            (identical results).
        packed_weight: uint8 ``[N, Kp // 2]`` linear-convention int4 codes.
        weight_sums: int32 ``[K // gs, N_padded]`` per-group code sums (ET-VK
            pads N to 8; padding ignored).
        scales: Transposed weight scales ``[K // gs, N_padded]``.
        group_size: Input channels per group; must divide K.
        bias: Optional ``[N]`` (or padded, extra entries ignored).

    Returns:
        float64 ``[..., N]``.
    """
    x = np.asarray(x)
    k = x.shape[-1]
    n = packed_weight.shape[0]
    scales = np.asarray(scales)
    weight_sums = np.asarray(weight_sums)
    groups = _check_q4gsw_params(n, k, group_size, scales, weight_sums)
    xm = x.reshape(-1, k)
    m = xm.shape[0]
    q = quantize_per_token(xm, input_scale, input_zero_point)
    s_x = np.asarray(input_scale, dtype=np.float64).reshape(m, 1)
    z = np.asarray(input_zero_point, dtype=np.float64).reshape(m, 1)
    codes = unpack_int4_linear(packed_weight, k).reshape(n, groups, group_size)
    s_w = scales[:, :n].astype(np.float64)  # [G, N]
    w = np.multiply(codes, s_w.T[:, :, None], dtype=np.float64).reshape(n, k)  # exact
    out = (q.astype(np.float64) - z) @ w.T  # exact terms, float64 sum
    ws_err = codes.sum(axis=2, dtype=np.int64).T - weight_sums[:, :n].astype(np.int64)
    if ws_err.any():
        out += z * (ws_err * s_w).sum(axis=0)
    out *= s_x
    if bias is not None:
        out += np.asarray(bias, dtype=np.float64)[:n]
    return out.reshape(*x.shape[:-1], n)


def linear_dq8ca_q4gsw_dynamic(
    x: np.ndarray,
    packed_weight: np.ndarray,
    weight_sums: np.ndarray,
    scales: np.ndarray,
    group_size: int,
    bias: Optional[np.ndarray] = None,
    qparams: str = "torchao",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The full dynamic path: choose per-row qparams, then :func:`linear_dq8ca_q4gsw`.

    Args:
        x: float16/float32 activations ``[..., K]``.
        packed_weight: See :func:`linear_dq8ca_q4gsw`.
        weight_sums: See :func:`linear_dq8ca_q4gsw`.
        scales: See :func:`linear_dq8ca_q4gsw`.
        group_size: See :func:`linear_dq8ca_q4gsw`.
        bias: See :func:`linear_dq8ca_q4gsw`.
        qparams: ``"torchao"``: :func:`~vkdiff.reference.quantized.quant.choose_qparams_per_token_asymmetric`
            (what the exported graph's ``torchao.choose_qparams_affine``
            means); ``"etvk"``: :func:`~vkdiff.reference.quantized.quant.choose_qparams_per_row_etvk`
            (what ET-VK's GPU computes for that node).

    Returns:
        ``(out, input_scale, input_zero_point)``: float64 ``[..., N]`` and
        the qparams used (shape ``x.shape[:-1]``; int8 zero points).
    """
    x = np.asarray(x)
    if qparams == "torchao":
        s_x, z = choose_qparams_per_token_asymmetric(x, zero_point_dtype=np.int8)
    elif qparams == "etvk":
        s_x, z = choose_qparams_per_row_etvk(x)
    else:
        raise ValueError(f"qparams must be 'torchao' or 'etvk', got {qparams!r}")
    out = linear_dq8ca_q4gsw(x, s_x, z, packed_weight, weight_sums, scales, group_size, bias)
    return out, s_x, z


# --- per-output-channel symmetric weights, float activations (QuantizedLinearQCSNW.cpp, QuantizedLinear.cpp) ---


def dequantize_per_channel_weight(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """``w[n, k] = codes[n, k] * scales[n]`` in float64 (exact), for codes ``[N, K]`` and ``scales [>= N]``.

    Extra scales (ET-VK pads them to a multiple of 4) are ignored.
    """
    codes = np.asarray(codes)
    if codes.ndim != 2 or not np.issubdtype(codes.dtype, np.integer):
        raise ValueError(f"codes must be 2-D integer [N, K], got {codes.dtype} {codes.shape}")
    s = np.asarray(scales).reshape(-1)
    if s.size < codes.shape[0]:
        raise ValueError(f"need >= {codes.shape[0]} per-channel scales, got {s.size}")
    return np.multiply(codes, s[: codes.shape[0], None], dtype=np.float64)


def _check_k(x: np.ndarray, k: int, what: str) -> np.ndarray:
    x = np.asarray(x)
    if x.shape[-1] != k:
        raise ValueError(f"{what}: input K={x.shape[-1]} != weight K={k}")
    return x


def weight_int8pack_mm(self: np.ndarray, mat2: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Reference for ``aten._weight_int8pack_mm``: float activations times int8 per-channel weights.

    In float64, for ``x [..., K]``, int8 ``w [N, K]`` (any int8 code, -128 included) and ``s [N]``::

        out[..., n] = s[n] * sum_k x[..., k] * w[n, k]

    ==============  =============  ====================================
    tensor          granularity    layout
    ==============  =============  ====================================
    ``mat2``        per element    int8 ``[N, K]`` (row = out channel)
    ``scales``      per channel N  ``[N]``
    ==============  =============  ====================================

    ATen takes a 2-D ``self``; ET-VK's ``check_linear_qcsnw_args`` also takes ``[B, M, K]`` (a batched
    linear fused by ``FuseQuantizedOpsTransform``): leading dims are batch dims.

    Args:
        self: Float activations ``[..., K]``.
        mat2: int8 weight ``[N, K]``.
        scales: Per-output-channel scales ``[N]``.

    Returns:
        float64 ``[..., N]``.
    """
    mat2 = np.asarray(mat2)
    x = _check_k(self, mat2.shape[-1], "weight_int8pack_mm")
    return linear_float64(x, dequantize_per_channel_weight(mat2, scales))


def linear_qcs4w(self: np.ndarray, weight: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Reference for ``et_vk.linear_qcs4w``: float activations times 4-bit per-channel weights.

    ``weight`` is uint8 ``[N, K/2]`` as ``FuseQuantizedOpsTransform``'s ``pack_4bit_weight_tensor`` packs
    it, even k in the HIGH nibble (:func:`~vkdiff.reference.quantized.packing.unpack_int4_embedding`'s order), each
    code stored as ``code + 8``. In float64::

        code[n, 2j]     = (weight[n, j] >> 4) - 8
        code[n, 2j + 1] = (weight[n, j] & 0xF) - 8
        out[..., n]     = scales[n] * sum_k x[..., k] * code[n, k]

    which is what ``linear_qcsnw_{tiled,coop}.glsl`` compute (``sum x * nibble - 8 * sum x``) and what
    ET-VK's own test reference (``_weight_int8pack_mm`` of the codes) gives. The eager
    ``torch.ops.et_vk.linear_qcs4w`` leaves out the ``- 8``.

    Args:
        self: Float activations ``[..., K]``.
        weight: uint8 ``[N, K / 2]``.
        scales: Per-output-channel scales ``[N]``.

    Returns:
        float64 ``[..., N]``.
    """
    codes = unpack_int4_embedding(weight)
    x = _check_k(self, codes.shape[1], "linear_qcs4w")
    return linear_float64(x, dequantize_per_channel_weight(codes, scales))


def linear_q8csw(x: np.ndarray, weights: np.ndarray, weight_scales: np.ndarray,
                 bias: Optional[np.ndarray] = None) -> np.ndarray:
    """Reference for ``et_vk.linear_q8csw``: float activations, int8 symmetric per-channel weights, bias.

    In float64, for ``w [N, K]`` and ``s``, ``bias`` of at least ``N`` entries (ET-VK pads both to a
    multiple of 4; the padding is ignored)::

        out[..., n] = s[n] * sum_k x[..., k] * w[n, k] + bias[n]

    ``QuantizedLinear.cpp`` registers the op without a Python schema (``custom_ops_lib.py`` defines none);
    its arguments are the C++'s ``(fp_input, weight_data, weight_scales_data, bias_data)``.

    Args:
        x: Float activations ``[..., K]``.
        weights: int8 ``[N, K]``.
        weight_scales: ``[N_padded]``.
        bias: Optional ``[N]`` / ``[N_padded]``.

    Returns:
        float64 ``[..., N]``.
    """
    weights = np.asarray(weights)
    x = _check_k(x, weights.shape[-1], "linear_q8csw")
    return linear_float64(x, dequantize_per_channel_weight(weights, weight_scales), bias)


def q4gsw_requant(latent: np.ndarray, scales: np.ndarray, group_size: int) -> np.ndarray:
    """Reference for ``et_vk.q4gsw_requant``: float latent weights re-quantized to packed 4-bit codes.

    In float32, for ``latent [N, K]`` and transposed group scales ``scales [ceil(K / gs), N]``::

        s          = scales[k // gs, n]
        code[n, k] = clip(round_half_even(latent[n, k] / s), -8, 7)   if s != 0, else 0

    then :func:`~vkdiff.reference.quantized.packing.pack_q4_w4x8` (the layout ``Q4gswLinear.cpp``'s forward reads),
    which is what ``q4gsw_requant.glsl`` writes: int32 ``[K4 * ceil(N4 / 2) * 4]``. The eager
    ``torch.ops.et_vk.q4gsw_requant`` computes the same codes and stores them as uint8 ``[N, K / 2]``, even
    k in the low nibble. The shader divides in float32 without correct rounding (~2.5 ulp): a quotient
    within that of a ``.5`` tie may round the other way there.

    ============  ============================  =======================
    tensor        granularity                   layout
    ============  ============================  =======================
    ``latent``    per element                   float32 ``[N, K]``
    ``scales``    per group of ``gs`` along K   float32 ``[K / gs, N]``
    ============  ============================  =======================

    ET-VK takes ``N`` and ``K`` multiples of 4 and ``group_size`` a multiple of 4 dividing K; elsewhere this
    is the eager op's codes in the same layout.

    Args:
        latent: Float weights ``[N, K]``.
        scales: ``[ceil(K / group_size), N]``.
        group_size: Group size along K.

    Returns:
        int32 ``[K4 * N8 * 4]``, ``K4 = ceil(K / 4)``, ``N8 = ceil(N / 8)``.
    """
    latent = np.asarray(latent, dtype=np.float32)
    scales = np.asarray(scales, dtype=np.float32)
    if latent.ndim != 2:
        raise ValueError(f"latent must be 2-D [N, K], got shape {latent.shape}")
    n, k = latent.shape
    if group_size <= 0:
        raise ValueError(f"group_size must be positive, got {group_size}")
    if scales.shape != (-(-k // group_size), n):
        raise ValueError(f"scales shape {scales.shape} != [ceil(K / group_size), N] = {(-(-k // group_size), n)}")
    full = scales.T[:, np.arange(k) // group_size]  # [N, K]
    nonzero = full != 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = np.clip(np.rint(latent / np.where(nonzero, full, np.float32(1))), -8, 7)
    return pack_q4_w4x8(np.where(nonzero, q, 0).astype(np.int8))

