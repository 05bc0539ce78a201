"""Affine quantization primitives, bit-exact with torchao 0.18 (numpy only).

This module re-implements the subset of ``torchao.quantization.quant_primitives``
that the ET-VK quantized linear paths depend on:

* ``_choose_qparams_affine`` for ``MappingType.SYMMETRIC`` and
  ``MappingType.ASYMMETRIC``,
* ``quantize_affine`` (integer zero-point domain),
* ``dequantize_affine``,

plus the per-tensor int8 quantize/dequantize used by ET-VK's static ``q8ta``
ops (:func:`quantize_per_tensor`, :func:`dequantize_per_tensor`, bit-exact with
``torch.ops.quantized_decomposed`` and with the shaders' float32 formulas) and
ET-VK's own GPU choose-qparams (:func:`choose_qparams_per_row_etvk`), which does
*not* follow torchao (see its docstring).

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
    "quantize_per_token",
    "quantize_per_tensor",
    "dequantize_per_tensor",
    "choose_qparams_per_row_etvk",
    "choose_qparams_per_row",
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


def quantize_per_token(
    x: np.ndarray,
    scale: np.ndarray,
    zero_point: np.ndarray,
    qmin: int = -128,
    qmax: int = 127,
) -> np.ndarray:
    """Per-token (per-row) int8 quantization, torchao ``quantize_affine``.

    With one ``(scale, zero_point)`` per row of ``x[..., K]``::

        q[t, k] = clip(round_half_even(x[t, k] * (1 / scale[t])) + zero_point[t], qmin, qmax)

    exactly :func:`quantize_affine` with block ``(1, ..., 1, K)``. The zero
    point may be integer (int8/int32) or float (torchao's
    ``per_token_dynamic_quant(zero_point_dtype=torch.float32)``): it must be
    integral and then the codes are identical.

    Args:
        x: float16/float32/float64 ``[..., K]``.
        scale: ``prod(x.shape[:-1])`` per-row scales (any shape).
        zero_point: Same number of integral zero points.
        qmin: Lower clamp bound.
        qmax: Upper clamp bound.

    Returns:
        int8 codes of ``x.shape``.

    Raises:
        ValueError: On a size mismatch or a non-integral zero point.
    """
    x = _as_float_array(x, "x")
    k = x.shape[-1]
    rows = x.reshape(-1, k)
    m = rows.shape[0]
    s = _as_float_array(scale, "scale").reshape(-1)
    z = np.asarray(zero_point).reshape(-1)
    if s.size != m or z.size != m:
        raise ValueError(f"need {m} scales/zero points, got {s.size}/{z.size}")
    if z.dtype.kind == "f" and not np.array_equal(z, np.rint(z)):
        raise ValueError("zero points must be integral")
    q = quantize_affine(rows, (1, k), s.reshape(m, 1), z.reshape(m, 1), qmin, qmax, np.int8)
    return q.reshape(x.shape)


# --- per-tensor int8 (static q8ta ops) ----------------------------------------


def scalar_f32(v: object, name: str) -> np.float32:
    """Returns ``v`` (a Python/numpy scalar or 1-element array) as float32."""
    a = np.asarray(v)
    if a.size != 1:
        raise ValueError(f"{name} must be a scalar, got shape {a.shape}")
    return np.float32(a.reshape(()))


def scalar_int(v: object, name: str) -> int:
    """Returns ``v`` as a Python int, rejecting non-integral values."""
    a = np.asarray(v)
    if a.size != 1:
        raise ValueError(f"{name} must be a scalar, got shape {a.shape}")
    f = float(a.reshape(()))
    if f != int(f):
        raise ValueError(f"{name} must be integral, got {f}")
    return int(f)


def quantize_per_tensor(
    x: np.ndarray,
    scale: float,
    zero_point: int,
    qmin: int = -128,
    qmax: int = 127,
    output_dtype: np.dtype = np.int8,
    *,
    fused: bool = False,
) -> np.ndarray:
    """Per-tensor affine quantization with a reciprocal-multiply.

    float16/float32 ``x`` is evaluated in float32 (float16 is upcast first),
    float64 ``x`` in float64; with ``inv = 1 / scale`` computed in that dtype
    from ``scale`` rounded to float32 (the schemas' ``float scale`` is a
    float32 on the device)::

        fused=False:  q = clip(round_half_even(x * inv) + zero_point, qmin, qmax)
        fused=True:   q = clip(round_half_even(fma(x, inv, zero_point)), qmin, qmax)

    ``fused=False`` is ``torch.ops.quantized_decomposed.quantize_per_tensor``
    and the ET-VK shaders (``quantize_and_pack`` in ``common.glslh``,
    ``quantize_and_pack_4h4w``); ``fused=True`` is ATen's
    ``torch.quantize_per_tensor`` (fbgemm ``Quantize``), used by torch's
    quantized ``cat``. They differ only when ``x * inv`` lies within one
    float32 rounding of a ``.5`` tie. In ``fused`` mode for float32 the
    product-plus-zero point is evaluated in float64 (exact unless ``x * inv``
    is negligible next to the zero point) and rounded once to float32.
    GLSL ``round()`` leaves ties implementation-defined; exact ties are rare
    for real data and this reference always rounds them to even.

    Args:
        x: Float array, any shape.
        scale: Positive scalar scale.
        zero_point: Integral scalar zero point.
        qmin: Lower clamp bound (-128 for int8, 0 for uint8).
        qmax: Upper clamp bound.
        output_dtype: dtype of the returned codes.
        fused: See above.

    Returns:
        Codes, same shape as ``x``, dtype ``output_dtype``.
    """
    x = _as_float_array(x, "x")
    s = scalar_f32(scale, "scale")
    zp = scalar_int(zero_point, "zero_point")
    dt = np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(np.float32)
    xd = x.astype(dt, copy=False)
    inv = dt.type(1) / dt.type(s)
    with np.errstate(over="ignore", invalid="ignore"):
        if fused and dt == np.float32:
            y = np.rint((xd.astype(np.float64) * np.float64(inv) + zp).astype(np.float32))
        elif fused:
            y = np.rint(xd * inv + zp)
        else:
            y = np.rint(xd * inv) + dt.type(zp)
    return np.clip(y, qmin, qmax).astype(output_dtype)


def dequantize_per_tensor(
    q: np.ndarray,
    scale: float,
    zero_point: int,
    output_dtype: np.dtype = np.float32,
) -> np.ndarray:
    """Per-tensor affine dequantization, ``(q - zero_point) * scale``.

    ``q - zero_point`` is exact; the product is rounded once to
    ``output_dtype`` with ``scale`` rounded to float32 first. With
    ``output_dtype=float32`` this is bit-exact with
    ``torch.ops.quantized_decomposed.dequantize_per_tensor``, ATen's
    ``Tensor.dequantize()`` and the shaders' ``vec4(q - zp) * scale``; with
    float64 it is the exact value.

    Args:
        q: Integer codes, any shape.
        scale: Scalar scale.
        zero_point: Integral scalar zero point.
        output_dtype: float32 or float64.

    Returns:
        Array of ``q.shape`` and dtype ``output_dtype``.
    """
    q = np.asarray(q)
    if not np.issubdtype(q.dtype, np.integer):
        raise TypeError(f"codes must be integers, got {q.dtype}")
    out_dt = np.dtype(output_dtype)
    if out_dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"output_dtype must be float32/float64, got {out_dt}")
    s = scalar_f32(scale, "scale")
    zp = scalar_int(zero_point, "zero_point")
    d = q.astype(np.float64) - zp  # exact: |q - zp| < 2**17
    return (d * np.float64(s)).astype(out_dt)  # exact in f64, one rounding


# --- ET-VK's GPU choose_qparams ----------------------------------------------

#: ``SMALL_SCALE_THRESHOLD`` of ``choose_qparams_per_row.glsl`` (and fbgemm).
ETVK_SMALL_SCALE = np.float32(6.1e-5)


def choose_qparams_per_row_etvk(
    x: np.ndarray,
    qmin: int = -128,
    qmax: int = 127,
    zero_point_dtype: np.dtype = np.int8,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-row asymmetric qparams as ET-VK's GPU computes them.

    ET-VK lowers ``torchao.choose_qparams_affine`` (and
    ``etvk.choose_qparams_per_row``) to ``choose_qparams_per_row.glsl``, which
    ignores ``eps`` and ``mapping_type`` and implements fbgemm's
    ``ChooseQuantizationParams`` in float32, *not* torchao's formula. Per row
    (last axis), all in float32::

        lo = min(min(row[:K4*4]), 0);  hi = max(max(row[:K4*4]), 0)   # K4 = K // 4
        scale = (hi - lo) / (qmax - qmin)
        if scale == 0 or isinf(1 / scale): scale = 0.1
        if scale < 6.1e-5:                          # SMALL_SCALE_THRESHOLD
            a = 6.1e-5 / scale;  scale = 6.1e-5
            if lo == 0:   hi = 6.1e-5 * (qmax - qmin)
            elif hi == 0: lo = -6.1e-5 * (qmax - qmin)
            else:         lo, hi = lo * a, hi * a
        z_lo = qmin - lo / scale;        z_hi = qmax - hi / scale
        e_lo = |qmin| - |lo / scale|;    e_hi = |qmax| - |hi / scale|
        z = z_lo if e_lo < e_hi else z_hi
        zero_point = qmin if z < qmin else qmax if z > qmax else round(z)

    Consequences (vs :func:`choose_qparams_per_token_asymmetric`): an
    all-zero row gets ``scale = 0.1, zero_point = qmax`` (torchao: ``2**-126,
    qmin``); rows with range below ``255 * 6.1e-5 ~= 0.0156`` get scale
    ``6.1e-5`` instead of ``range / 255``; for other rows scale is bit-equal
    to torchao's and the zero point equal except at rounding ties. The
    shader reads ``K // 4`` texels, so for ``K % 4 != 0`` the last ``K % 4``
    elements are ignored (emulated here). ``round`` is GLSL's (ties
    implementation-defined); ties go to even here.

    Args:
        x: float32/float16 activations ``[..., K]``.
        qmin: Lower bound of the quantized range.
        qmax: Upper bound of the quantized range.
        zero_point_dtype: int8 (``zpint8`` shader mode), int32, or the float
            dtype (``zpinherit`` mode).

    Returns:
        ``(scale, zero_point)`` of shape ``x.shape[:-1]``; scale has
        ``x.dtype`` (the shader stores ``T(scale)``, so float16 inputs get a
        float16-rounded scale while the zero point used the float32 one).
    """
    x = _as_float_array(x, "x")
    if x.dtype == np.float64:
        raise TypeError("the ET-VK shader computes in float32/float16 only")
    if x.ndim < 1:
        raise ValueError("x must have at least one axis")
    f = np.float32
    k = x.shape[-1]
    rows = x.reshape(-1, k)[:, : (k // 4) * 4].astype(f)
    lo = np.minimum(np.min(rows, axis=1, initial=f(1e30)), f(0))
    hi = np.maximum(np.max(rows, axis=1, initial=f(-1e30)), f(0))
    rng = f(qmax - qmin)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scale = (hi - lo) / rng
        scale = np.where((scale == 0) | np.isinf(f(1) / scale), f(0.1), scale)
        small = scale < ETVK_SMALL_SCALE
        amp = ETVK_SMALL_SCALE / scale
        new_lo = np.where(lo == 0, lo, np.where(hi == 0, -ETVK_SMALL_SCALE * rng, lo * amp))
        new_hi = np.where(lo == 0, ETVK_SMALL_SCALE * rng, np.where(hi == 0, hi, hi * amp))
        lo = np.where(small, new_lo, lo).astype(f)
        hi = np.where(small, new_hi, hi).astype(f)
        scale = np.where(small, ETVK_SMALL_SCALE, scale).astype(f)
        lo_s = lo / scale
        hi_s = hi / scale
    z_lo = f(qmin) - lo_s
    z_hi = f(qmax) - hi_s
    e_lo = f(abs(qmin)) - np.abs(lo_s)
    e_hi = f(abs(qmax)) - np.abs(hi_s)
    z = np.where(e_lo < e_hi, z_lo, z_hi)
    zp = np.where(z < qmin, f(qmin), np.where(z > qmax, f(qmax), np.rint(z)))
    lead = x.shape[:-1]
    return (
        scale.astype(x.dtype).reshape(lead),
        zp.astype(zero_point_dtype).reshape(lead),
    )


def _fbgemm_qparams(lo: float, hi: float, qmin: int, qmax: int) -> tuple[float, int]:
    """fbgemm's ``ChooseQuantizationParams`` as ET-VK's test states it: double arithmetic, float32 scale."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / (qmax - qmin)
    with np.errstate(divide="ignore", over="ignore"):
        if np.float32(scale) == 0 or np.isinf(np.float32(1) / np.float32(scale)):
            scale = 0.1
    if scale < float(ETVK_SMALL_SCALE):
        original, scale = float(np.float32(scale)), float(ETVK_SMALL_SCALE)
        if lo == 0:
            hi = float(ETVK_SMALL_SCALE * np.float32(qmax - qmin))
        elif hi == 0:
            lo = float(-ETVK_SMALL_SCALE * np.float32(qmax - qmin))
        else:
            amplifier = float(np.float32(ETVK_SMALL_SCALE / np.float32(original)))
            lo, hi = float(np.float32(lo * amplifier)), float(np.float32(hi * amplifier))
    from_min, from_max = qmin - lo / scale, qmax - hi / scale
    z = from_min if abs(qmin) - abs(lo / scale) < abs(qmax) - abs(hi / scale) else from_max
    zero_point = qmin if z < qmin else qmax if z > qmax else int(np.rint(np.float32(z)))
    return float(np.float32(scale)), zero_point


def choose_qparams_per_row(input, quant_min: Optional[int] = None, quant_max: Optional[int] = None,
                           input_scales=None, input_zps=None) -> tuple[np.ndarray, np.ndarray]:
    """``etvk.choose_qparams_per_row``: per row of ``input [..., H, K]``, over all ``K`` values, the asymmetric
    qparams of ``test_choose_qparams_per_row.cpp``'s reference (the op's only definition; int8 range by default).

    Returns ``(scales, zero_points)`` of shape ``[H]`` (the caller's ``input_scales`` rank, as the C++ resize keeps
    it); zero points in ``input_zps``' dtype (int8, or the float dtype of the ``zpinherit`` shaders).
    """
    x = np.asarray(input, np.float64)
    qmin = -128 if quant_min is None else int(quant_min)
    qmax = 127 if quant_max is None else int(quant_max)
    rows = x.reshape(-1, x.shape[-2], x.shape[-1])[0]
    pairs = [_fbgemm_qparams(float(r.min()), float(r.max()), qmin, qmax) for r in rows]
    shape = (*np.shape(input_scales)[:-1], x.shape[-2]) if input_scales is not None else (x.shape[-2],)
    scales = np.array([p[0] for p in pairs], np.float64).reshape(shape)
    zp_dtype = np.asarray(input_zps).dtype if input_zps is not None else np.dtype(np.int8)
    return scales, np.array([p[1] for p in pairs]).astype(zp_dtype).reshape(shape)
