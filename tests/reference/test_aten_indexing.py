"""The indexing, joining, ``where``, ``tan`` and tensor-scalar references against torch in float64 (int32 for
integer paths), at the edges the suites use.

Each companion test shows the comparison has teeth: a plausible wrong implementation (the one a shader
might use: a gather dim taken as given, negative indices not wrapped, ``pow`` on ``|x|``, a comparison
against the unrounded scalar...) fails the same check.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vkdiff import reference
from vkdiff.reference.tensor import indexing

F = torch.nn.functional
DTYPES = (np.float32, np.float16)


def _same(ours: np.ndarray, theirs: np.ndarray) -> None:
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    finite = ~np.isnan(theirs)
    np.testing.assert_array_equal(ours[finite], theirs[finite])


def _t(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x))


def test_cat_and_split_match_torch(rng):
    parts = [rng.standard_normal((2, 3, w)) for w in (1, 2, 3, 5)]
    _same(reference.evaluate("aten.cat.default", {"tensors": parts, "dim": -1}), torch.cat([_t(p) for p in parts], -1))
    ints = [rng.integers(-9, 9, (h, 3)).astype(np.int32) for h in (2, 1)]
    out = reference.evaluate("aten.cat.default", {"tensors": ints, "dim": 0})
    assert out.dtype == np.int32
    _same(out, torch.cat([_t(p) for p in ints], 0))
    x = rng.standard_normal((3, 5, 9))
    ours = reference.evaluate("aten.split_with_sizes_copy.default", {"self": x, "split_sizes": [3, 2, 4], "dim": -1})
    for a, b in zip(ours, torch.split(_t(x), [3, 2, 4], -1), strict=True):
        _same(a, b)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_gather_matches_torch(dim, rng):
    x = rng.standard_normal((4, 5, 6))
    index = rng.integers(0, x.shape[dim], (3, 5, 4) if dim in (2, -1) else (6, 3, 4)).astype(np.int32)
    if dim == 1:
        index = rng.integers(0, 5, (3, 7, 4)).astype(np.int32)
    ours = reference.evaluate("aten.gather.default", {"self": x, "dim": dim, "index": index})
    _same(ours, torch.gather(_t(x), dim, _t(index).long()))


def test_gather_with_the_dim_as_given_fails(rng):
    """ET-VK computes ``dim_whcn = ndim - dim - 1`` without normalizing: for ``dim=-1`` that gathers elsewhere."""
    x = rng.standard_normal((3, 5, 6))
    index = rng.integers(0, 3, (3, 5, 6)).astype(np.int32)
    wrong = indexing.gather(x, 0, index)  # dim_whcn = ndim - (-1) - 1 = 3 lies past a 3-D tensor's WHCN dims
    with pytest.raises(AssertionError):
        _same(wrong, torch.gather(_t(x), -1, _t(index).long()))


@pytest.mark.parametrize("dim", [0, 1, 2, 3, -1])
def test_index_select_matches_torch_on_every_dim(dim, rng):
    x = rng.standard_normal((3, 6, 3, 5))
    index = np.array([0, x.shape[dim] - 1, 0, 1], np.int32)
    ours = reference.evaluate("aten.index_select.default", {"self": x, "dim": dim, "index": index})
    _same(ours, torch.index_select(_t(x), dim, _t(index).long()))
    with pytest.raises(IndexError):
        indexing.index_select(x, dim, np.array([-1], np.int32))


@pytest.mark.parametrize("shape", [(67,), (5, 7), (4, 3, 6), (5, 2, 3, 5)])
def test_index_tensor_matches_torch_with_negative_indices(shape, rng):
    x = rng.standard_normal(shape)
    index = np.array([0, shape[0] - 1, -1, -shape[0], 1], np.int32)
    ours = reference.evaluate("aten.index.Tensor", {"self": x, "indices": [index]})
    _same(ours, _t(x)[_t(index).long()])
    with pytest.raises(IndexError):
        indexing.index_tensor(x, [np.array([shape[0]], np.int32)])


def test_index_tensor_without_wrapping_negatives_fails(rng):
    x = rng.standard_normal(9)
    index = np.array([-1, -9, 2], np.int32)
    wrong = x[np.clip(index, 0, None)]
    with pytest.raises(AssertionError):
        _same(wrong, _t(x)[_t(index).long()])


@pytest.mark.parametrize("shape,r", [((1, 8, 3, 5), 2), ((2, 9, 2, 3), 3), ((4, 3, 3), 2)])
def test_pixel_shuffle_matches_torch(shape, r, rng):
    x = rng.standard_normal(shape)
    _same(reference.evaluate("aten.pixel_shuffle.default", {"self": x, "upscale_factor": r}),
          F.pixel_shuffle(_t(x), r))


def test_pixel_shuffle_with_swapped_subpixels_fails(rng):
    x = rng.standard_normal((1, 8, 3, 5))
    y = x.reshape(1, 2, 2, 2, 3, 5).transpose(0, 1, 4, 3, 5, 2).reshape(1, 2, 6, 10)
    with pytest.raises(AssertionError):
        _same(y, F.pixel_shuffle(_t(x), 2))


@pytest.mark.parametrize("shape,dim,size,step", [((3, 5, 9), -1, 3, 2), ((3, 5, 9), 1, 2, 1), ((10,), 0, 4, 3),
                                                 ((2, 3, 4, 7), 0, 2, 1)])
def test_unfold_copy_matches_torch(shape, dim, size, step, rng):
    x = rng.standard_normal(shape)
    ours = reference.evaluate("aten.unfold_copy.default", {"self": x, "dimension": dim, "size": size, "step": step})
    _same(ours, _t(x).unfold(dim, size, step))


@pytest.mark.parametrize("dim", [0, 1, -1, None])
def test_repeat_interleave_matches_torch_and_tile_does_not(dim, rng):
    x = rng.standard_normal((3, 5, 6))
    ours = reference.evaluate("aten.repeat_interleave.self_int", {"self": x, "repeats": 3, "dim": dim})
    _same(ours, torch.repeat_interleave(_t(x), 3, dim))
    if dim is not None:
        with pytest.raises(AssertionError):
            _same(np.concatenate([x] * 3, axis=dim), torch.repeat_interleave(_t(x), 3, dim))


def test_where_keeps_nan_in_either_branch(rng):
    cond = rng.random((1, 5, 6)) < 0.5
    cond.reshape(-1)[:2] = [True, False]
    a, b = rng.standard_normal((3, 5, 6)), rng.standard_normal((5, 1))
    a.reshape(-1)[0], b.reshape(-1)[1] = np.nan, np.nan
    ours = reference.evaluate("aten.where.self", {"condition": cond, "self": a, "other": b})
    _same(ours, torch.where(_t(cond), _t(a), _t(b)))
    assert np.isnan(ours).any()


@pytest.mark.parametrize("dtype", DTYPES)
def test_tan_matches_torch_near_half_pi_and_far_out(dtype):
    from vkdiff.cases.kernel_suites.tensor.scalar_ops import tan_edges

    x = tan_edges(np.dtype(dtype), special=True).astype(np.float64)
    ours = reference.evaluate("aten.tan.default", {"self": x})
    theirs = torch.tan(_t(x)).numpy()
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    finite = np.isfinite(theirs)
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=1e-12)
    assert np.abs(ours[finite]).max() > 1e3


POW_BASES = np.array([-2.0, -1.5, -1.0, 0.0, -0.0, 1.0, 3.0, 0.5])


@pytest.mark.parametrize("exponent", [2.0, 3.0, -1.0, 0.5, 2.5, 0.0])
def test_pow_scalar_matches_torch(exponent):
    ours = reference.evaluate("aten.pow.Tensor_Scalar", {"self": POW_BASES, "exponent": exponent})
    theirs = torch.pow(_t(POW_BASES), exponent).numpy()
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    np.testing.assert_allclose(ours[~np.isnan(theirs)], theirs[~np.isnan(theirs)], rtol=1e-15)


def _power_of(x: np.ndarray, y: float) -> np.ndarray:
    """ET-VK's ``power_of`` (``binary_op_defs.glslh``): 0 for ``0 ** y`` (y ≠ 0), ``|x| ** y`` signed for odd y."""
    out = np.abs(x) ** y
    odd = abs(y - round(y)) < 1e-5 and int(round(y)) % 2 == 1
    out = np.where((x < 0) & odd, -out, out)
    return np.where(x == 0, 1.0 if y == 0 else 0.0, out)


@pytest.mark.parametrize("exponent", [-1.0, 0.5])
def test_pow_on_magnitudes_fails(exponent):
    theirs = torch.pow(_t(POW_BASES), exponent).numpy()
    with np.errstate(divide="ignore"), pytest.raises(AssertionError):
        _same(_power_of(POW_BASES, exponent), theirs)


COMPARE = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge}


@pytest.mark.parametrize("name", sorted(COMPARE))
@pytest.mark.parametrize("dtype,scalar", [(np.float32, 0.1), (np.float16, 0.1), (np.float32, float("inf")),
                                          (np.int32, 2), (np.int32, 1.5)])
def test_compare_scalar_matches_torch(name, dtype, scalar):
    if dtype == np.int32:
        x = np.array([2, 1, 3, -2], np.int32)
    else:
        s = np.asarray(scalar, dtype)
        x = np.array([s, np.nextafter(s, dtype(-np.inf)), np.nextafter(s, dtype(np.inf)), scalar, np.nan, np.inf,
                      -np.inf], np.float64).astype(dtype)
    ours = reference.evaluate(f"aten.{name}.Scalar", {"self": x, "other": scalar})
    theirs = COMPARE[name](_t(x), scalar).numpy()
    assert ours.dtype == np.bool_
    np.testing.assert_array_equal(ours, theirs)


def test_half_compare_against_the_unrounded_scalar_fails():
    """The shaders compare ``float(x)`` with the float32 scalar: ``float16(0.1) == 0.1`` is then false."""
    x = np.array([0.1, 0.2], np.float16)
    with pytest.raises(AssertionError):
        np.testing.assert_array_equal(x.astype(np.float32) == np.float32(0.1), torch.eq(_t(x), 0.1).numpy())
