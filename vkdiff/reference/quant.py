"""Affine quantization primitives, bit-exact with torchao 0.18 (numpy only).

This module re-implements the subset of ``torchao.quantization.quant_primitives``
that the ET-VK quantized linear paths depend on:

* ``_choose_qparams_affine`` for ``MappingType.SYMMETRIC`` and
  ``MappingType.ASYMMETRIC``,
* ``quantize_affine`` (integer zero-point domain),
* ``dequantize_affine``.

Exactness contract: for float32 and float16 inputs every function performs the
same IEEE operations, in the same dtype and in the same order, as torchao on
CPU, so integer codes, zero points and scales match bit for bit. In
particular:

* all qparam arithmetic happens in the *input* dtype and the scale is cast to
  ``scale_dtype`` only at the very end;
* quantization multiplies by the reciprocal of the scale,
  ``x * (1 / scale)``, instead of dividing by it (torchao writes
  ``input * (1.0 / scale)``); the two differ in the last ulp for some inputs;
* rounding is round-half-to-even (``torch.round`` == ``np.rint``).

bfloat16 is not representable in numpy and is therefore not supported.
float64 inputs are accepted (the same formulas are evaluated in float64), but
torchao itself only quantizes float32/float16/bfloat16, so there is no torchao
counterpart to be exact against.

Block sizes follow torchao's convention: ``block_size[i]`` is the number of
consecutive elements along axis ``i`` that share one (scale, zero_point) pair.
For an input of shape ``[N, K]``:

==========================  ==================
granularity                 block_size
==========================  ==================
per tensor                  ``(N, K)``
per output channel (axis 0) ``(1, K)``
per group of ``gs`` along K ``(1, gs)``
per token (rows of ``x``)   ``(1, K)``
==========================  ==================
"""

from __future__ import annotations

from typing import Literal, Optional, Sequence

import numpy as np

__all__ = [
    "int_range",
    "get_reduction_params",
    "choose_qparams_affine",
    "choose_qparams_group_symmetric",
    "choose_qparams_per_token_asymmetric",
    "quantize_affine",
    "dequantize_affine",
]

_FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))

Mapping = Literal["symmetric", "asymmetric"]


def int_range(bits: int, signed: bool = True) -> tuple[int, int]:
    """Returns the representable integer range of a ``bits``-wide integer.

    Matches torchao's ``_DTYPE_TO_QVALUE_BOUNDS`` for ``torch.int{bits}`` /
    ``torch.uint{bits}``.

    Args:
        bits: Bit width, 1 to 8 (torch.int1 .. torch.int8).
        signed: Two's complement range if True, unsigned range otherwise.

    Returns:
        ``(qmin, qmax)``: ``(-2**(bits-1), 2**(bits-1) - 1)`` when signed,
        ``(0, 2**bits - 1)`` when unsigned. E.g. int4 -> ``(-8, 7)``.

    Raises:
        ValueError: If ``bits`` is outside ``[1, 8]``.
    """
    if not 1 <= bits <= 8:
        raise ValueError(f"bits must be in [1, 8], got {bits}")
    if signed:
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return 0, 2**bits - 1


def _as_float_array(x: np.ndarray, name: str) -> np.ndarray:
    """Returns ``x`` as an ndarray, checking it is float16/32/64."""
    arr = np.asarray(x)
    if arr.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"{name} must be float16/float32/float64, got {arr.dtype}")
    return arr


def get_reduction_params(
    block_size: Sequence[int], input_shape: Sequence[int]
) -> tuple[list[int], list[int]]:
    """Splits ``input_shape`` into blocks, exactly like torchao's helper.

    For every axis ``i``: if ``1 < block_size[i] < input_shape[i]`` the axis is
    split into ``(input_shape[i] // block_size[i], block_size[i])`` and the
    inner (block) axis is reduced; if ``block_size[i] == input_shape[i]`` (and
    > 1) the whole axis is reduced; if ``block_size[i] == 1`` it is kept.

    Example:
        ``block_size=(3, 3, 2, 10)``, ``input_shape=(3, 3, 10, 10)`` gives
        ``shape_for_reduction=[3, 3, 5, 2, 10]`` and
        ``reduction_dims=[0, 1, 3, 4]``.

    Args:
        block_size: Elements per block along each axis.
        input_shape: Shape of the tensor being quantized.

    Returns:
        ``(shape_for_reduction, reduction_dims)``: the shape to reshape the
        (C-contiguous) input to, and the axes of that shape to reduce over.

    Raises:
        ValueError: On rank mismatch or a block size that does not divide its
            axis.
    """
    if len(block_size) != len(input_shape):
        raise ValueError(
            f"block_size {tuple(block_size)} has rank != input rank {len(input_shape)}"
        )
    shape_for_reduction: list[int] = []
    reduction_dims: list[int] = []
    cur = 0
    for b, n in zip(block_size, input_shape):
        b, n = int(b), int(n)
        if b != n and b > 1:
            if n % b != 0:
                raise ValueError(f"block size {b} does not divide axis of size {n}")
            shape_for_reduction += [n // b, b]
            reduction_dims.append(cur + 1)
            cur += 2
        else:
            shape_for_reduction.append(n)
            if b != 1:
                reduction_dims.append(cur)
            cur += 1
    return shape_for_reduction, reduction_dims


def _shape_after_reduction(
    shape_for_reduction: Sequence[int], reduction_dims: Sequence[int]
) -> list[int]:
    """Returns ``shape_for_reduction`` with every reduced axis set to 1."""
    out = list(shape_for_reduction)
    for d in reduction_dims:
        out[d] = 1
    return out


def choose_qparams_affine(
    x: np.ndarray,
    block_size: Sequence[int],
    qmin: int,
    qmax: int,
    *,
    mapping: Mapping = "symmetric",
    eps: Optional[float] = None,
    scale_dtype: Optional[np.dtype] = None,
    zero_point_dtype: Optional[np.dtype] = None,
    keepdim: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Chooses per-block (scale, zero_point) exactly like torchao.

    Mirrors ``torchao.quantization.quant_primitives._choose_qparams_affine``
    (``MappingType.SYMMETRIC`` / ``ASYMMETRIC``). All arithmetic is done in
    ``x.dtype``; per block ``b``::

        min_neg = min(min(x_b), 0)          max_pos = max(max(x_b), 0)
        SYMMETRIC:
            scale = max(-min_neg, max_pos) / ((qmax - qmin) / 2)
            zero_point = int((qmax + qmin + 1) / 2)       # 0 for signed ranges
            scale = max(scale, eps)
        ASYMMETRIC:
            scale = max((max_pos - min_neg) / (qmax - qmin), eps)
            zero_point = clip(qmin - round_half_even(min_neg / scale), qmin, qmax)

    then ``scale.astype(scale_dtype)`` and ``zero_point.astype(zero_point_dtype)``.

    Args:
        x: Input, float16/float32/float64, any rank.
        block_size: torchao block size (see module docstring).
        qmin: Smallest quantized value (e.g. -8 for int4).
        qmax: Largest quantized value (e.g. 7 for int4).
        mapping: ``"symmetric"`` or ``"asymmetric"``.
        eps: Lower clamp for the scale. ``None`` means torchao's default,
            ``np.finfo(x.dtype).smallest_normal`` (2**-126 for float32), which
            is what ``IntxWeightOnlyConfig`` and
            ``Int8DynamicActivationIntxWeightConfig`` use.
        scale_dtype: dtype of the returned scale; ``None`` keeps ``x.dtype``.
        zero_point_dtype: dtype of the returned zero point; ``None`` gives
            ``x.dtype`` for symmetric (torchao keeps the float ``full_like``)
            and ``int32`` for asymmetric, as in torchao.
        keepdim: If False the reduced axes are dropped
            (shape = ``shape_for_reduction`` without ``reduction_dims``); if
            True the result has shape ``[x.shape[i] // block_size[i]]``.

    Returns:
        ``(scale, zero_point)`` with the shapes described under ``keepdim``.

    Raises:
        ValueError: On an unknown mapping or invalid block size.
        TypeError: If ``x`` is not a float array.
    """
    x = _as_float_array(x, "x")
    if mapping not in ("symmetric", "asymmetric"):
        raise ValueError(f"unsupported mapping {mapping!r}")
    dt = x.dtype
    eps_v = np.finfo(dt).smallest_normal if eps is None else eps
    shape_r, dims = get_reduction_params(block_size, x.shape)
    xr = x.reshape(shape_r)
    axes = tuple(dims)
    min_neg = np.minimum(np.min(xr, axis=axes), dt.type(0))
    max_pos = np.maximum(np.max(xr, axis=axes), dt.type(0))
    if mapping == "symmetric":
        amax = np.maximum(-min_neg, max_pos)
        scale = amax / dt.type(float(qmax - qmin) / 2)
        zero_point = np.full_like(scale, int((qmax + qmin + 1) / 2))
        scale = np.maximum(scale, dt.type(eps_v))
        zp_dtype = np.dtype(dt if zero_point_dtype is None else zero_point_dtype)
    else:
        scale = (max_pos - min_neg) / dt.type(float(qmax - qmin))
        scale = np.maximum(scale, dt.type(eps_v))
        zero_point = dt.type(qmin) - np.rint(min_neg / scale)
        zero_point = np.clip(zero_point, dt.type(qmin), dt.type(qmax))
        zp_dtype = np.dtype(np.int32 if zero_point_dtype is None else zero_point_dtype)
    if keepdim:
        out_shape = [int(n) // int(b) for n, b in zip(x.shape, block_size)]
        scale = scale.reshape(out_shape)
        zero_point = zero_point.reshape(out_shape)
    s_dtype = np.dtype(dt if scale_dtype is None else scale_dtype)
    return np.asarray(scale, dtype=s_dtype), np.asarray(zero_point).astype(zp_dtype)


def choose_qparams_group_symmetric(
    w: np.ndarray,
    group_size: int,
    bits: int = 4,
    eps: Optional[float] = None,
    scale_dtype: Optional[np.dtype] = np.float32,
) -> tuple[np.ndarray, np.ndarray]:
    """Group-wise symmetric qparams, as ``IntxWeightOnlyConfig`` computes them.

    Equivalent to torchao ``choose_qparams_affine(w, MappingType.SYMMETRIC,
    block_size=(1, ..., 1, group_size), target_dtype=torch.int8,
    quant_min=qmin, quant_max=qmax, zero_point_dtype=torch.int8,
    keepdim=True)`` with ``(qmin, qmax) = int_range(bits)``, which is exactly
    what ``IntxWeightOnlyConfig(weight_dtype=torch.int{bits},
    granularity=PerGroup(group_size))`` and
    ``Int8DynamicActivationIntxWeightConfig`` store. Groups are consecutive
    runs of ``group_size`` elements along the last axis; with ``G = K //
    group_size``, for every row ``r`` and group ``g``, computed in ``w.dtype``::

        amax = max(-min(min(w[r, g*gs:(g+1)*gs]), 0), max(max(w[r, g*gs:(g+1)*gs]), 0))
        scale[r, g] = max(amax / ((qmax - qmin) / 2), eps)     # int4: amax / 7.5
        zero_point[r, g] = 0

    The scale is cast to ``scale_dtype`` at the end (torchao's
    ``scale_dtype``; a no-op for float32 weights).

    Args:
        w: Weight, float16/float32/float64, shape ``[..., K]`` (typically
            ``[N, K]``, row-major, K = input channels).
        group_size: Elements per group along the last axis; must divide K.
        bits: Signed integer width (4 -> range [-8, 7]).
        eps: Lower clamp for the scale; ``None`` (default) uses torchao's
            default ``np.finfo(w.dtype).smallest_normal``. Pass
            ``np.finfo(np.float32).eps`` to emulate configs that clamp with
            the machine epsilon instead.
        scale_dtype: dtype of the returned scale (``None`` keeps ``w.dtype``).

    Returns:
        ``(scale, zero_point)``, both of shape ``[..., K // group_size]``;
        ``zero_point`` is int8 and all zeros.
    """
    w = _as_float_array(w, "w")
    if w.ndim < 1 or group_size <= 0 or w.shape[-1] % group_size != 0:
        raise ValueError(f"group_size {group_size} must divide K={w.shape[-1:]}")
    qmin, qmax = int_range(bits, signed=True)
    block = (1,) * (w.ndim - 1) + (group_size,)
    return choose_qparams_affine(
        w,
        block,
        qmin,
        qmax,
        mapping="symmetric",
        eps=eps,
        scale_dtype=scale_dtype,
        zero_point_dtype=np.int8,
        keepdim=True,
    )


def choose_qparams_per_token_asymmetric(
    x: np.ndarray,
    qmin: int = -128,
    qmax: int = 127,
    eps: Optional[float] = None,
    zero_point_dtype: np.dtype = np.int8,
    scale_dtype: Optional[np.dtype] = None,
    keepdim: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-token asymmetric qparams of the int8 dynamic-activation path.

    Equivalent to torchao ``choose_qparams_affine(x, MappingType.ASYMMETRIC,
    block_size=(1, ..., 1, K), target_dtype=torch.int8, quant_min=qmin,
    quant_max=qmax, zero_point_dtype=...)`` as called by
    ``IntxUnpackedToInt8Tensor``'s ``int8_asym_per_token`` activation
    quantization (``Int8DynamicActivationIntxWeightConfig``). Per token ``t``
    (one row along the last axis), computed in ``x.dtype``::

        min_neg = min(min(x[t, :]), 0);  max_pos = max(max(x[t, :]), 0)
        scale[t] = max((max_pos - min_neg) / (qmax - qmin), eps)
        zp[t] = clip(qmin - round_half_even(min_neg / scale[t]), qmin, qmax)

    i.e. the zero point is "nudged" to the integer that represents 0.0 exactly.

    Args:
        x: Activations, float16/float32/float64, shape ``[..., K]``.
        qmin: Smallest quantized value (int8: -128).
        qmax: Largest quantized value (int8: 127).
        eps: Lower clamp for the scale; ``None`` uses torchao's default
            ``np.finfo(x.dtype).smallest_normal``.
        zero_point_dtype: ``np.int8``/``np.int32`` for integer zero points or
            ``np.float32`` for float ones (value is the same integer).
        scale_dtype: dtype of the scale (``None`` keeps ``x.dtype``).
        keepdim: False (torchao's per-token path) returns shape
            ``x.shape[:-1]``; True returns ``x.shape[:-1] + (1,)``.

    Returns:
        ``(scale, zero_point)`` of shape ``x.shape[:-1]`` (or with a trailing 1).
    """
    x = _as_float_array(x, "x")
    if x.ndim < 1:
        raise ValueError("x must have at least one axis")
    block = (1,) * (x.ndim - 1) + (x.shape[-1],)
    # Degenerate K == 1 makes block_size[-1] == 1, i.e. no reduction; torchao
    # then treats every element as its own block which is the same thing.
    scale, zp = choose_qparams_affine(
        x,
        block,
        qmin,
        qmax,
        mapping="asymmetric",
        eps=eps,
        scale_dtype=scale_dtype,
        zero_point_dtype=zero_point_dtype,
        keepdim=keepdim,
    )
    return scale, zp


def quantize_affine(
    x: np.ndarray,
    block_size: Sequence[int],
    scale: np.ndarray,
    zero_point: Optional[np.ndarray],
    qmin: int,
    qmax: int,
    output_dtype: np.dtype = np.int8,
) -> np.ndarray:
    """Affine quantization with integer zero point, bit-exact with torchao.

    With ``s`` / ``z`` broadcast from their per-block value to every element
    of the block (see :func:`get_reduction_params`)::

        q = clip(round_half_even(x * (1 / s)) + z, qmin, qmax).astype(output_dtype)

    ``1 / s`` is evaluated in ``s.dtype``; the product in
    ``result_type(x, s)``; ``z`` is converted to that float dtype before the
    add (torch type promotion). ``zero_point=None`` (or empty) means ``z = 0``.

    Args:
        x: Float input (float16/float32/float64), any rank.
        block_size: torchao block size, same rank as ``x``.
        scale: Per-block scales; any shape with one element per block, in
            block row-major order (e.g. ``[N, K // gs]`` for ``(1, gs)``).
        zero_point: Per-block integer zero points, same layout as ``scale``,
            or None.
        qmin: Lower clamp bound.
        qmax: Upper clamp bound.
        output_dtype: dtype of the returned codes (int8 for torchao's
            ``IntxUnpackedToInt8Tensor.qdata``; uint8 for uint sub-byte types).

    Returns:
        Quantized codes, same shape as ``x``, dtype ``output_dtype``.
    """
    x = _as_float_array(x, "x")
    scale = _as_float_array(scale, "scale")
    shape_r, dims = get_reduction_params(block_size, x.shape)
    shape_a = _shape_after_reduction(shape_r, dims)
    xr = x.reshape(shape_r)
    s = scale.reshape(shape_a)
    inv = s.dtype.type(1) / s
    y = np.rint(xr * inv)
    if zero_point is not None and np.size(zero_point) > 0:
        y = y + np.asarray(zero_point).reshape(shape_a).astype(y.dtype)
    y = np.clip(y, y.dtype.type(qmin), y.dtype.type(qmax))
    return y.astype(output_dtype).reshape(x.shape)


def dequantize_affine(
    q: np.ndarray,
    block_size: Sequence[int],
    scale: np.ndarray,
    zero_point: Optional[np.ndarray],
    qmin: Optional[int] = None,
    qmax: Optional[int] = None,
    output_dtype: np.dtype = np.float32,
) -> np.ndarray:
    """Affine dequantization, bit-exact with torchao's ``dequantize_affine``.

    With per-block ``s`` / ``z`` broadcast over each block::

        d = q.astype(output_dtype)
        d = d - z.astype(output_dtype)          # skipped when zero_point is None
        out = (d * s).astype(output_dtype)

    ``d * s`` is evaluated in ``result_type(output_dtype, s.dtype)`` (e.g. a
    float16 output with float32 scales multiplies in float32, then rounds to
    float16), exactly as torch promotion does. Like torchao, ``qmin``/``qmax``
    are *not* applied: codes are not clamped.

    Args:
        q: Integer codes, any rank.
        block_size: torchao block size, same rank as ``q``.
        scale: Per-block scales (see :func:`quantize_affine`).
        zero_point: Per-block zero points (int or float), or None.
        qmin: Accepted for signature parity with torchao; unused.
        qmax: Accepted for signature parity with torchao; unused.
        output_dtype: float16/float32 (torchao) or float64.

    Returns:
        Dequantized array, same shape as ``q``, dtype ``output_dtype``.
    """
    del qmin, qmax  # torchao only validates them against the dtype bounds
    q = np.asarray(q)
    out_dt = np.dtype(output_dtype)
    if out_dt not in _FLOAT_DTYPES:
        raise TypeError(f"output_dtype must be a float dtype, got {out_dt}")
    shape_r, dims = get_reduction_params(block_size, q.shape)
    shape_a = _shape_after_reduction(shape_r, dims)
    d = q.reshape(shape_r).astype(out_dt)
    if zero_point is not None:
        d = d - np.asarray(zero_point).reshape(shape_a).astype(out_dt)
    d = d * np.asarray(scale).reshape(shape_a)
    return d.reshape(q.shape).astype(out_dt)
