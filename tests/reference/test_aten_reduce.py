"""Reductions, softmax and norms against torch in float64, at the edges where their shaders break.

Companions show the checks have teeth: a softmax without max-subtraction overflows on logits
above 88 (float32 ``exp``), a one-pass variance ``E[x²] - E[x]²`` loses a large-mean row in
float32, an argmax that skips NaN picks another index, and the same comparisons fail.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vkdiff import reference

SPECIAL = (np.nan, np.inf, -np.inf)
DIMS = ([-1], [0], [1, 2], [-3, -1], None)
"""One dim, a negative one, two dims, two negative ones, every dim."""


def _data(rng: np.random.Generator, shape=(3, 5, 6), special: bool = False) -> np.ndarray:
    x = rng.standard_normal(shape) * 3
    x[0] = -np.abs(x[0]) - 1
    x[1] = 1.25
    x[2, 0, :] += 100.0
    if special:
        x[2, 1, 0], x[2, 2, 1], x[2, 3, 2] = SPECIAL
    return x


def _same(ours, theirs) -> None:
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    assert ours.shape == theirs.shape
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    np.testing.assert_array_equal(np.isinf(ours) * np.sign(ours), np.isinf(theirs) * np.sign(theirs))
    finite = np.isfinite(theirs)
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("op", ["sum.dim_IntList", "mean.dim", "amax.default", "amin.default"])
def test_reductions_match_torch(op, dims, keepdim, special, rng):
    x = _data(rng, special=special)
    name, overload = op.split(".")
    fn = getattr(getattr(torch.ops.aten, name), overload)
    theirs = fn(torch.from_numpy(x), [] if dims is None and name in ("amax", "amin") else dims, keepdim)
    _same(reference.evaluate(f"aten.{op}", {"self": x, "dim": dims, "keepdim": keepdim}), theirs.numpy())


@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [-1, 0, 1, None])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reductions_match_torch_bit_exact(op, dim, keepdim, special, rng):
    x = _data(rng, special=special)
    x[1, 2, 3] = x[1, 2, 1]
    theirs = getattr(torch, op)(torch.from_numpy(x), dim=dim, keepdim=keepdim).numpy()
    ours = reference.evaluate(f"aten.{op}.default", {"self": x, "dim": dim, "keepdim": keepdim})
    assert ours.shape == theirs.shape and ours.dtype == np.int64
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("unbiased", [True, False])
@pytest.mark.parametrize("dims", DIMS[:4])
def test_var_matches_torch(dims, unbiased, rng):
    x = _data(rng, special=True)
    x[2, 4, :] = 32752.0 + rng.standard_normal(6)
    theirs = torch.ops.aten.var.dim(torch.from_numpy(x), dims, unbiased, True).numpy()
    _same(reference.evaluate("aten.var.dim", {"self": x, "dim": dims, "unbiased": unbiased, "keepdim": True}),
          theirs)


@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("dim", [-1, 0, 1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_matches_torch(log, dim, special, rng):
    x = _data(rng, special=special)
    fn = torch.ops.aten._log_softmax.default if log else torch.ops.aten._softmax.default
    ours = reference.evaluate(f"aten._{'log_' if log else ''}softmax.default",
                              {"self": x, "dim": dim, "half_to_float": False})
    _same(ours, fn(torch.from_numpy(x), dim, False).numpy())


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", [(67,), (3, 5, 6), (2, 1, 7, 9)])
def test_native_layer_norm_matches_torch(shape, affine, rng):
    x = _data(rng, shape=shape) if len(shape) == 3 else rng.standard_normal(shape) * 3 + 5
    w, b = (rng.standard_normal(shape[-1]), rng.standard_normal(shape[-1])) if affine else (None, None)
    t = (lambda a: None if a is None else torch.from_numpy(a))
    theirs = torch.ops.aten.native_layer_norm.default(torch.from_numpy(x), [shape[-1]], t(w), t(b), 1e-5)
    ours = reference.evaluate("aten.native_layer_norm.default",
                              {"input": x, "normalized_shape": [shape[-1]], "weight": w, "bias": b, "eps": 1e-5})
    for o, e in zip(ours, theirs):
        _same(o, e.numpy())


@pytest.mark.parametrize("shape, group", [((2, 6, 5, 7), 3), ((1, 9, 3, 3), 3), ((2, 4, 6, 1), 4), ((2, 3, 1, 5), 1)])
def test_native_group_norm_matches_torch(shape, group, rng):
    n, c, h, w = shape
    x = rng.standard_normal(shape) * 3
    x[0, : c // group] = 1.25
    weight, bias = rng.standard_normal(c), rng.standard_normal(c)
    theirs = torch.ops.aten.native_group_norm.default(torch.from_numpy(x), torch.from_numpy(weight),
                                                      torch.from_numpy(bias), n, c, h * w, group, 1e-5)
    ours = reference.evaluate("aten.native_group_norm.default", {"input": x, "weight": weight, "bias": bias, "N": n,
                                                                 "C": c, "HxW": h * w, "group": group, "eps": 1e-5})
    for o, e in zip(ours, theirs):
        _same(o, e.numpy())


def test_native_batch_norm_no_training_matches_torch(rng):
    x = rng.standard_normal((2, 6, 5, 7)) * 3
    weight, bias, mean = (rng.standard_normal(6) for _ in range(3))
    var = rng.uniform(0.1, 4, 6)
    var[0] = 0.0
    args = [torch.from_numpy(a) for a in (x, weight, bias, mean, var)]
    theirs = torch.ops.aten._native_batch_norm_legit_no_training.default(*args, 0.1, 1e-5)
    ours = reference.evaluate("aten._native_batch_norm_legit_no_training.default",
                              {"input": x, "weight": weight, "bias": bias, "running_mean": mean, "running_var": var,
                               "momentum": 0.1, "eps": 1e-5})
    for o, e in zip(ours, theirs):
        _same(o, e.numpy())


def test_magnitudes_bound_the_terms(rng):
    x = _data(rng)
    out, magnitude = reference.evaluate_with_magnitude("aten.sum.dim_IntList", {"self": x, "dim": [-1]})
    np.testing.assert_allclose(magnitude, np.abs(x).sum(-1))
    assert (magnitude >= np.abs(out)).all()
    (_, mean, rstd), (out_mag, mean_mag, rstd_mag) = reference.evaluate_with_magnitude(
        "aten.native_layer_norm.default",
        {"input": x, "normalized_shape": [6], "weight": np.ones(6), "bias": np.zeros(6), "eps": 1e-5})
    assert out_mag.shape == x.shape and mean_mag.shape == mean.shape and rstd_mag.shape == rstd.shape
    assert (mean_mag >= np.abs(mean)).all() and (rstd_mag >= 0).all()


def _naive_softmax(x: np.ndarray, dim: int) -> np.ndarray:
    """exp(x) / Σ exp(x) in float32, without subtracting the max (what a shader might do)."""
    e = np.exp(x.astype(np.float32))
    return e / e.sum(axis=dim, keepdims=True)


def test_companion_naive_softmax_fails_on_logits_above_88(rng):
    x = rng.standard_normal((4, 12)) + 100.0
    expected = torch.softmax(torch.from_numpy(x), -1).numpy()
    np.testing.assert_allclose(reference.evaluate("aten._softmax.default", {"self": x, "dim": -1,
                                                                            "half_to_float": False}), expected)
    with np.errstate(over="ignore", invalid="ignore"), pytest.raises(AssertionError):
        _same(_naive_softmax(x, -1), expected)


def test_companion_one_pass_variance_fails_on_a_large_mean(rng):
    x = (32752.0 + rng.standard_normal((3, 6))).astype(np.float32)
    expected = torch.var(torch.from_numpy(x.astype(np.float64)), dim=-1).numpy()
    _same(reference.evaluate("aten.var.dim", {"self": x, "dim": [-1]}), expected)
    n = np.float32(6)
    one_pass = ((x * x).sum(-1) / n - (x.sum(-1) / n) ** 2) * n / (n - 1)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(one_pass, expected, rtol=1e-3)


def test_companion_argmax_skipping_nan_fails():
    x = np.array([[1.0, np.nan, 3.0, 2.0]])
    expected = torch.argmax(torch.from_numpy(x), dim=-1).numpy()
    np.testing.assert_array_equal(reference.evaluate("aten.argmax.default", {"self": x, "dim": -1}), expected)
    with pytest.raises(AssertionError):
        np.testing.assert_array_equal(np.nanargmax(x, axis=-1), expected)
