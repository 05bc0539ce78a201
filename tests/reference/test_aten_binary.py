"""The binary ops of ET-VK's ``BinaryOp.cpp`` against torch, with the edges where their shaders differ.

Companions: the shader formulas a port might copy (floor for every rounding mode, a tolerant
``eq``, a ``min`` that drops NaN, ``pow`` through ``exp2(y·log2 x)``) fail the same comparison.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vkdiff import reference

A = np.array([-7.0, 7.0, -1.0, 5.0, -2.0, -2.0, 0.0, 1.0, np.nan, np.inf, -np.inf, 1.0, 3.0], np.float64)
B = np.array([2.0, -2.0, 3.0, 0.5, 2.0, 3.0, 0.0, np.nextafter(1.0, 2.0), 1.0, np.inf, 0.0, 0.0, -1.0], np.float64)

TORCH = {
    "aten.div.Tensor_mode": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "aten.pow.Tensor_Tensor": torch.pow, "aten.minimum.default": torch.minimum,
    "aten.eq.Tensor": torch.eq, "aten.lt.Tensor": torch.lt, "aten.le.Tensor": torch.le,
    "aten.gt.Tensor": torch.gt, "aten.ge.Tensor": torch.ge,
}


def _args(op: str, a, b) -> dict:
    second = "exponent" if op == "aten.pow.Tensor_Tensor" else "other"
    extra = {"rounding_mode": "floor"} if op == "aten.div.Tensor_mode" else {}
    return {"self": a, second: b, **extra}


def _same(ours, theirs) -> None:
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    if theirs.dtype == np.bool_:
        np.testing.assert_array_equal(ours, theirs)
        return
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    finite = ~np.isnan(theirs)
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=1e-13, atol=0)


@pytest.mark.parametrize("op", sorted(TORCH))
def test_binary_matches_torch(op, rng):
    a = np.concatenate([A, rng.standard_normal(32) * 3])
    b = np.concatenate([B, rng.standard_normal(32) * 3])
    ours = reference.evaluate(op, _args(op, a, b))
    _same(ours, TORCH[op](torch.from_numpy(a), torch.from_numpy(b)).numpy())


def test_trunc_division_and_logical_ops():
    _same(reference.evaluate("aten.div.Tensor_mode", {"self": A, "other": B, "rounding_mode": "trunc"}),
          torch.div(torch.from_numpy(A), torch.from_numpy(B), rounding_mode="trunc").numpy())
    _same(reference.evaluate("aten.div.Tensor_mode", {"self": A, "other": B, "rounding_mode": None}),
          torch.div(torch.from_numpy(A), torch.from_numpy(B)).numpy())
    p, q = np.array([True, True, False, False]), np.array([True, False, True, False])
    for op, fn in (("aten.logical_and.default", torch.logical_and), ("aten.logical_or.default", torch.logical_or),
                   ("aten.bitwise_and.Tensor", torch.bitwise_and), ("aten.bitwise_or.Tensor", torch.bitwise_or)):
        _same(reference.evaluate(op, {"self": p, "other": q}), fn(torch.from_numpy(p), torch.from_numpy(q)).numpy())


@pytest.mark.parametrize("mistake", ["floor for trunc", "tolerant eq", "min dropping NaN", "pow via exp2/log2"])
def test_shader_formulas_fail_the_same_check(mistake):
    ta, tb = torch.from_numpy(A), torch.from_numpy(B)
    with np.errstate(all="ignore"):
        if mistake == "floor for trunc":
            wrong, right = np.floor(A / B), torch.div(ta, tb, rounding_mode="trunc").numpy()
        elif mistake == "tolerant eq":
            wrong, right = np.abs(A - B) < 1e-5, torch.eq(ta, tb).numpy()
        elif mistake == "min dropping NaN":
            wrong, right = np.fmin(A, B), torch.minimum(ta, tb).numpy()
        else:
            wrong, right = np.exp2(B * np.log2(A)), torch.pow(ta, tb).numpy()
    with pytest.raises(AssertionError):
        _same(wrong, right)


@pytest.mark.parametrize("name", ["full", "full_like", "zeros", "zeros_like", "ones", "ones_like"])
def test_creation_ops_match_torch(name):
    """Shape, value and dtype (a float16 ``full`` past its range is inf, as torch gives it)."""
    like = np.ones((2, 3), np.float16)
    fill = {"fill_value": 0.3} if name.startswith("full") else {}
    args = {"self": like, **fill} if name.endswith("_like") else {"size": [2, 3], **fill}
    ours = reference.evaluate(f"aten.{name}.default", args)
    fn = getattr(torch, name)
    theirs = (fn(torch.from_numpy(like), *fill.values()) if name.endswith("_like")
              else fn([2, 3], *fill.values(), dtype=torch.float64)).numpy()
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs.astype(np.float64), rtol=1e-3 if name.endswith("_like") else 0)
    typed = reference.evaluate("aten.full.default", {"size": [2], "fill_value": 7, "dtype": "int32"})
    assert typed.dtype == np.int32 and (typed == 7).all()


@pytest.mark.parametrize("start, end, step", [(3, 70, 1), (40, -7, -3), (0, 5, 2)])
def test_arange_matches_torch(start, end, step):
    ours = reference.evaluate("aten.arange.start_step", {"start": start, "end": end, "step": step})
    np.testing.assert_array_equal(ours, torch.arange(start, end, step, dtype=torch.float64).numpy())
