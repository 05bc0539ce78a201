"""The data-movement references against torch, bit for bit, at the edges copies and conversions break on.

Each companion shows the check has teeth: a plausible wrong implementation (pads applied in the wrong order,
a conversion that truncates instead of rounding to nearest even, a flip that drops negative dims, a copy that
loses the sign of zero) fails the same comparison.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vkdiff import reference
from vkdiff.datamodel import Tolerance
from vkdiff.reference.tensor import movement
from vkdiff.verdicts.compare import ErrorStatistics

SPECIAL32 = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-40, -1e-40, 3.4e38], np.float32)
"""NaN, infinities, signed zeros, float32 subnormals and a value near the largest."""
TIES16 = np.array([1 + 2.0**-11, 1 + 3 * 2.0**-11, 65519.0, 65520.0, 2.0**-25, 3 * 2.0**-26, -2049.0], np.float32)
"""float32 values where float16 rounding decides (ties to even, the overflow threshold, the underflow tie)."""


def _bits(array) -> np.ndarray:
    """The raw bits (NaN payloads aside: every NaN is one pattern), so -0.0 differs from 0.0."""
    a = np.ascontiguousarray(np.asarray(array))
    if a.dtype.kind != "f":
        return a
    a = np.where(np.isnan(a), np.array(np.nan, a.dtype), a)
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def assert_bitwise(ours, theirs) -> None:
    __tracebackhide__ = True
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape, f"{ours.shape} vs {theirs.shape}"
    if theirs.dtype.kind == "f" and ours.dtype != theirs.dtype:
        ours = ours.astype(theirs.dtype)
    np.testing.assert_array_equal(_bits(ours), _bits(theirs))


def _data(rng, shape, dtype=np.float32) -> np.ndarray:
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    flat = x.reshape(-1)
    with np.errstate(over="ignore"):
        special = SPECIAL32.astype(dtype)[: flat.size]
    flat[rng.choice(flat.size, special.size, replace=False)] = special
    return x


def _t(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x))


@pytest.mark.parametrize("dims", [(2, 0, 1), (0, 2, 1), (-1, 0, -2)])
def test_permute_and_permute_copy(rng, dims):
    x = _data(rng, (3, 5, 6))
    for op in ("aten.permute.default", "aten.permute_copy.default"):
        assert_bitwise(reference.evaluate(op, {"self": x, "dims": list(dims)}), _t(x).permute(dims).numpy())


def test_clone_keeps_every_bit(rng):
    for dtype in (np.float32, np.float16):
        x = _data(rng, (2, 1, 7, 9), dtype)
        assert_bitwise(reference.evaluate("aten.clone.default", {"self": x, "memory_format": None}), _t(x).clone())


@pytest.mark.parametrize("op", ["aten._to_copy.default", "dim_order_ops._to_dim_order_copy.default"])
def test_dtype_conversions_round_to_nearest_even_and_truncate_to_int(rng, op):
    x = np.concatenate([TIES16, SPECIAL32, _data(rng, (40,))])
    half = reference.evaluate(op, {"self": x, "dtype": "float16"})
    assert_bitwise(half, _t(x).to(torch.float16).numpy())
    back = reference.evaluate(op, {"self": half, "dtype": "float32"})
    assert_bitwise(back, _t(half).to(torch.float32).numpy())
    finite = np.concatenate([np.array([-2.7, 2.7, -0.5, 1e6], np.float32), _data(rng, (30,))])
    finite = finite[np.isfinite(finite)]
    assert_bitwise(reference.evaluate(op, {"self": finite, "dtype": "int32"}), _t(finite).to(torch.int32).numpy())
    ints = rng.integers(-70000, 70000, 50).astype(np.int32)
    assert_bitwise(reference.evaluate(op, {"self": ints, "dtype": "float16"}), _t(ints).to(torch.float16).numpy())


def test_rounding_companion_truncation_fails():
    """A conversion that truncates the mantissa (round toward zero) differs from ATen on the ties."""
    truncated = (TIES16.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float16)
    with pytest.raises(AssertionError):
        assert_bitwise(truncated, _t(TIES16).to(torch.float16).numpy())


@pytest.mark.parametrize("shape, dims", [((1, 5, 1), [0, 2]), ((3, 1, 6), [-2]), ((3, 5, 6), [1]), ((1, 1, 5), [-3])])
def test_squeeze_copy(rng, shape, dims):
    x = _data(rng, shape)
    assert_bitwise(reference.evaluate("aten.squeeze_copy.dims", {"self": x, "dim": dims}),
                   torch.squeeze(_t(x), dims).numpy())


@pytest.mark.parametrize("shape, dim", [((5, 6), 0), ((5, 6), -1), ((67,), 0), ((7,), -2), ((2, 3, 5), 3)])
def test_unsqueeze_copy(rng, shape, dim):
    x = _data(rng, shape)
    assert_bitwise(reference.evaluate("aten.unsqueeze_copy.default", {"self": x, "dim": dim}),
                   torch.unsqueeze(_t(x), dim).numpy())


@pytest.mark.parametrize("shape, dim, index", [((3, 5, 6), 0, -1), ((2, 3, 5, 7), 3, 2), ((9, 6), -1, 5)])
def test_select(rng, shape, dim, index):
    x = _data(rng, shape)
    assert_bitwise(reference.evaluate("aten.select.int", {"self": x, "dim": dim, "index": index}),
                   _t(x).select(dim, index).numpy())


@pytest.mark.parametrize("shape, dim, start, end, step", [((3, 5, 10), 2, 1, 100, 3), ((2, 7, 5, 6), 1, -5, None, 2),
                                                          ((9, 9), -1, 0, 9, 4), ((67,), 0, -60, -1, 5)])
def test_slice_clamps_bounds_and_steps(rng, shape, dim, start, end, step):
    x = _data(rng, shape)
    theirs = torch.ops.aten.slice.Tensor(_t(x), dim, start, end, step).numpy()
    assert_bitwise(reference.evaluate("aten.slice.Tensor", {"self": x, "dim": dim, "start": start, "end": end,
                                                             "step": step}), theirs)


@pytest.mark.parametrize("shape, size", [((3, 1), [3, 7]), ((5, 6), [2, 3, 5, 6]), ((2, 1, 1, 9), [2, 3, -1, -1])])
def test_expand_copy(rng, shape, size):
    x = _data(rng, shape)
    assert_bitwise(reference.evaluate("aten.expand_copy.default", {"self": x, "size": size, "implicit": False}),
                   _t(x).expand(size).numpy())


@pytest.mark.parametrize("shape, repeats", [((3, 5, 6), [1, 1, 3]), ((2, 5), [2, 3, 1]), ((5,), [3])])
def test_repeat(rng, shape, repeats):
    x = _data(rng, shape)
    assert_bitwise(reference.evaluate("aten.repeat.default", {"self": x, "repeats": repeats}),
                   _t(x).repeat(repeats).numpy())


@pytest.mark.parametrize("shape, dims", [((3, 5, 6), [0, 1, 2]), ((2, 3, 5, 7), [-1, 0]), ((6,), [0])])
def test_flip(rng, shape, dims):
    x = _data(rng, shape)
    assert_bitwise(reference.evaluate("aten.flip.default", {"self": x, "dims": dims}), torch.flip(_t(x), dims))


def test_flip_companion_dropping_negative_dims_fails(rng):
    x = _data(rng, (2, 3, 5, 7))
    wrong = np.flip(x, axis=(0,)).copy()
    with pytest.raises(AssertionError):
        assert_bitwise(wrong, torch.flip(_t(x), [-1, 0]).numpy())


@pytest.mark.parametrize("pad, value", [([1, 2], 0.5), ([-1, 2, 1, -2], -1.5), ([0, 0, 0, 0, 1, 2, 1, 0], np.nan),
                                        ([3, 1, 2, 2], np.inf), ([-3, 4], 1e5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_constant_pad_nd_crops_and_fills(rng, pad, value, dtype):
    if dtype == np.float16 and value == 1e5:
        with pytest.raises(RuntimeError, match="cannot be converted to type c10::Half without overflow"):
            torch.constant_pad_nd(_t(np.zeros((2, 3), dtype)), pad, value)
        return
    x = _data(rng, (2, 3, 5, 7), dtype)
    ours = reference.evaluate("aten.constant_pad_nd.default", {"self": x, "pad": pad, "value": value})
    assert_bitwise(np.asarray(ours).astype(dtype), torch.constant_pad_nd(_t(x), pad, value).numpy())


def test_constant_pad_nd_on_int32(rng):
    x = rng.integers(-100, 100, (3, 5, 6)).astype(np.int32)
    assert_bitwise(reference.evaluate("aten.constant_pad_nd.default", {"self": x, "pad": [1, -2, 0, 1], "value": 7}),
                   torch.constant_pad_nd(_t(x), [1, -2, 0, 1], 7).numpy())


def test_constant_pad_companion_swapped_pairs_fails(rng):
    """Pads read outermost-first (the mistake of a port that walks the list the other way) give other sizes."""
    x = _data(rng, (3, 5, 6))
    wrong = movement.constant_pad_nd(x, [0, 1, 2, -1], 0.5)
    with pytest.raises(AssertionError):
        assert_bitwise(wrong, torch.constant_pad_nd(_t(x), [2, -1, 0, 1], 0.5).numpy())


@pytest.mark.parametrize("s, dtype", [(2.5, torch.float32), (0.1, torch.float16), (0.1, torch.float32),
                                      (1e5, torch.float16), (-7.75, torch.int32), (3, torch.float32),
                                      (-40000, torch.float16), (True, torch.float32)])
def test_scalar_tensor(s, dtype):
    name = str(dtype).removeprefix("torch.")
    assert_bitwise(reference.evaluate("aten.scalar_tensor.default", {"s": s, "dtype": name}),
                   torch.scalar_tensor(s, dtype=dtype).numpy())


def test_exact_verdict_catches_a_lost_sign_of_zero_and_a_flushed_subnormal():
    """The exact tolerance the runner gives these ops fails a copy that loses -0.0 or flushes a subnormal,
    which the float32 policy row would pass."""
    expected = np.array([-0.0, 1e-40, 1.0])
    for actual in (np.array([0.0, 1e-40, 1.0]), np.array([-0.0, 0.0, 1.0])):
        assert ErrorStatistics.from_arrays(actual, expected, Tolerance()).status().name == "FAIL_NUMERIC"
        assert ErrorStatistics.from_arrays(actual, expected, Tolerance.for_dtype(np.float32)).status().name == "PASS"
    assert ErrorStatistics.from_arrays(expected.copy(), expected, Tolerance()).status().name == "PASS"
