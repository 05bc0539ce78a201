"""vkdiff.reference.quantized.cat against torch's quantized cat (``torch.cat`` on
quantized tensors, ``torch.ops.quantized.cat``) and a quantized_decomposed
dequantize -> cat -> quantize graph."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (quantized_decomposed ops)
from hypothesis import given, settings
from hypothesis import strategies as st

from vkdiff.reference.quantized import cat, quant

from .helpers import make_rng

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # quantized tensor deprecation

_QDTYPE = {np.dtype(np.int8): (torch.qint8, -128, 127), np.dtype(np.uint8): (torch.quint8, 0, 255)}


def _qtensor(codes: np.ndarray, scale: float, zp: int) -> torch.Tensor:
    return torch._make_per_tensor_quantized_tensor(torch.from_numpy(codes), scale, zp)


def _codes(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    _, lo, hi = _QDTYPE[np.dtype(dtype)]
    return rng.integers(lo, hi + 1, size=shape).astype(dtype)


def test_shared_qparams_concatenate_codes_unchanged(rng: np.random.Generator) -> None:
    a, b = _codes(rng, (3, 4), np.int8), _codes(rng, (3, 6), np.int8)
    out = cat.quantized_cat([a, b], [0.05, 0.05], [3, 3], axis=1)
    np.testing.assert_array_equal(out, np.concatenate([a, b], axis=1))
    assert out.dtype == np.int8
    ref = torch.cat([_qtensor(a, 0.05, 3), _qtensor(b, 0.05, 3)], dim=1)
    np.testing.assert_array_equal(out, ref.int_repr().numpy())
    # explicit output qparams equal to the shared ones: still a plain copy
    out2 = cat.quantized_cat([a, b], [0.05, 0.05], [3, 3], 1, out_scale=0.05, out_zero_point=3)
    np.testing.assert_array_equal(out2, out)


def test_requantization_worked_example() -> None:
    a = np.array([10, -10], np.int8)  # scale 0.5, zp 0 -> [5, -5]
    b = np.array([0, 8], np.int8)  # scale 0.25, zp 4 -> [-1, 1]
    out = cat.quantized_cat([a, b], [0.5, 0.25], [0, 4], out_scale=0.1, out_zero_point=-1)
    # 5 / 0.1 = 50 -> 49 ; -5 -> -51 ; -1 -> -11 ; 1 -> 9
    assert out.tolist() == [49, -51, -11, 9]


@settings(max_examples=40, deadline=None)
@given(
    dtype=st.sampled_from([np.int8, np.uint8]),
    axis=st.sampled_from([0, 1, -1]),
    n_inputs=st.sampled_from([1, 2, 3]),
    out_qparams=st.sampled_from([None, (0.01, 0), (0.37, 5), (1e-4, 10)]),
)
def test_matches_torch_quantized_cat(dtype, axis, n_inputs, out_qparams) -> None:
    rng = make_rng("test_matches_torch_quantized_cat", dtype, axis, n_inputs, out_qparams)
    qdtype, lo, hi = _QDTYPE[np.dtype(dtype)]
    tensors, scales, zps = [], [], []
    for _ in range(n_inputs):
        shape = [2, 3]
        shape[axis] = int(rng.integers(1, 5))
        tensors.append(_codes(rng, tuple(shape), dtype))
        scales.append(float(np.float32(10.0 ** rng.uniform(-3, 0))))
        zps.append(int(rng.integers(lo // 2, hi // 2 + 1)))
    qts = [_qtensor(t, s, z) for t, s, z in zip(tensors, scales, zps)]
    if out_qparams is None:
        ref = torch.cat(qts, dim=axis)  # first input's qparams
        kw = {}
    else:
        s_out, z_out = out_qparams[0], out_qparams[1] + (lo + hi + 1) // 2
        ref = torch.ops.quantized.cat(qts, dim=axis, scale=s_out, zero_point=z_out)
        kw = {"out_scale": s_out, "out_zero_point": z_out}
    ours = cat.quantized_cat(tensors, scales, zps, axis, qmin=lo, qmax=hi, **kw)
    assert ours.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(ours, ref.int_repr().numpy())


def _tie_case(rng: np.random.Generator):
    """An (input, output) qparam pair where some dequantized value times
    1/s_out lands exactly on a .5 tie in float32, with a nonzero output zp."""
    codes = np.arange(-128, 128, dtype=np.int8)
    for _ in range(20000):
        s_in = float(np.float32(rng.uniform(0.001, 0.1)))
        s_out = float(np.float32(rng.uniform(0.001, 0.1)))
        d = quant.dequantize_per_tensor(codes, s_in, 0)
        v = d * (np.float32(1) / np.float32(s_out))
        if (v - np.floor(v) == 0.5).any():
            plain = quant.quantize_per_tensor(d, s_out, 3)
            fused = quant.quantize_per_tensor(d, s_out, 3, fused=True)
            if (plain != fused).any():
                return codes, s_in, s_out
    raise AssertionError("no tie case found")


def test_rounding_mode_matters_and_is_checked(rng: np.random.Generator) -> None:
    """fused=True matches torch's quantized cat, fused=False matches a
    quantized_decomposed dequantize -> cat -> quantize graph; on a tie case the
    two disagree, so each oracle check rejects the other mode."""
    codes, s_in, s_out = _tie_case(rng)
    other = np.zeros(4, np.int8)
    fused = cat.quantized_cat([codes, other], [s_in, 0.02], [0, 0], 0, s_out, 3)
    plain = cat.quantized_cat([codes, other], [s_in, 0.02], [0, 0], 0, s_out, 3, fused=False)
    assert (fused != plain).any()
    ref = torch.ops.quantized.cat(
        [_qtensor(codes, s_in, 0), _qtensor(other, 0.02, 0)], dim=0, scale=s_out, zero_point=3
    ).int_repr().numpy()
    np.testing.assert_array_equal(fused, ref)
    qd = torch.ops.quantized_decomposed
    deq = torch.cat(
        [
            qd.dequantize_per_tensor(torch.from_numpy(codes), s_in, 0, -128, 127, torch.int8),
            qd.dequantize_per_tensor(torch.from_numpy(other), 0.02, 0, -128, 127, torch.int8),
        ]
    )
    graph = qd.quantize_per_tensor(deq, s_out, 3, -128, 127, torch.int8).numpy()
    np.testing.assert_array_equal(plain, graph)
    assert not np.array_equal(plain, ref) and not np.array_equal(fused, graph)


def test_cat_rejects_bad_inputs() -> None:
    a = np.zeros((2, 2), np.int8)
    with pytest.raises(ValueError):
        cat.quantized_cat([a, a], [0.1], [0, 0])
    with pytest.raises(TypeError):
        cat.quantized_cat([a.astype(np.float32)], [0.1], [0])
    with pytest.raises(ValueError):
        cat.quantized_cat([a], [0.1], [0.5])
