"""The activations of ET-VK's ``unary_op`` shaders against torch, at the edges where shaders break.

The companion shows the check has teeth: a tanh written as ``sinh/cosh`` (the textbook
formula a shader might use) is NaN where ``cosh`` overflows, and the same comparison fails.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vkdiff import reference

EDGES = np.array([-1e4, -88.8, -20.0, -13.5, -1e-30, -0.0, 0.0, 1e-30, 0.5, 13.5, 88.8, 1e4], np.float64)
"""Saturation (|x| ≥ 13), the float32 exp limit (88.7), denormal-sized and signed zeros."""
ROUNDING = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -3.0, 1e6 + 0.5], np.float64)
"""Ties: ``torch.round`` goes to even, GLSL's ``round`` may not."""
SPECIAL = np.array([np.nan, np.inf, -np.inf], np.float64)
"""Where ATen defines propagation: every activation here keeps NaN, and infinities follow the formula."""

F = torch.nn.functional
OPS = {
    "aten.tanh.default": (torch.tanh, {}), "aten.exp.default": (torch.exp, {}), "aten.neg.default": (torch.neg, {}),
    "aten.abs.default": (torch.abs, {}), "aten.sigmoid.default": (torch.sigmoid, {}),
    "aten.cos.default": (torch.cos, {}), "aten.sin.default": (torch.sin, {}), "aten.sqrt.default": (torch.sqrt, {}),
    "aten.rsqrt.default": (torch.rsqrt, {}), "aten.log10.default": (torch.log10, {}),
    "aten.round.default": (torch.round, {}), "aten.relu.default": (torch.relu, {}),
    "aten.relu6.default": (F.relu6, {}), "aten.hardswish.default": (F.hardswish, {}),
    "aten.hardsigmoid.default": (F.hardsigmoid, {}),
    "aten.clamp.default": (lambda x, min, max: torch.clamp(x, min, max), {"min": -0.75, "max": 2.0}),
    "aten.hardtanh.default": (lambda x, min_val, max_val: F.hardtanh(x, min_val, max_val),
                              {"min_val": -2.0, "max_val": 0.5}),
    "aten.hardshrink.default": (lambda x, lambd: F.hardshrink(x, lambd), {"lambd": 0.75}),
    "aten.leaky_relu.default": (lambda x, negative_slope: F.leaky_relu(x, negative_slope), {"negative_slope": 0.2}),
    "aten.gelu.default": (lambda x, approximate: F.gelu(x, approximate=approximate), {"approximate": "none"}),
}
"""Each op's torch counterpart and the scalar arguments it is checked with."""


def _same(ours: np.ndarray, theirs: np.ndarray) -> None:
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    np.testing.assert_array_equal(np.isinf(ours) * np.sign(ours), np.isinf(theirs) * np.sign(theirs))
    finite = np.isfinite(theirs)
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("op", sorted(OPS))
def test_activation_matches_torch_in_float64(op, rng):
    x = np.concatenate([EDGES, ROUNDING, SPECIAL, rng.standard_normal(64) * 4])
    fn, scalars = OPS[op]
    ours = reference.evaluate(op, {"self": x, **scalars})
    _same(ours, fn(torch.from_numpy(x), **scalars).numpy())


def test_gelu_tanh_and_clamp_without_bounds(rng):
    x = np.concatenate([EDGES, rng.standard_normal(64) * 4])
    ours = reference.evaluate("aten.gelu.default", {"self": x, "approximate": "tanh"})
    _same(ours, F.gelu(torch.from_numpy(x), approximate="tanh").numpy())
    _same(reference.evaluate("aten.clamp.default", {"self": x, "min": None, "max": 1.0}),
          torch.clamp(torch.from_numpy(x), max=1.0).numpy())


def test_bitwise_not_of_bool_and_int():
    flags = np.array([True, False, True])
    np.testing.assert_array_equal(reference.evaluate("aten.bitwise_not.default", {"self": flags}), ~flags)
    ints = np.array([0, 5, -7], np.int32)
    np.testing.assert_array_equal(reference.evaluate("aten.bitwise_not.default", {"self": ints}),
                                  torch.bitwise_not(torch.from_numpy(ints)).numpy())


@pytest.mark.parametrize("mistake", ["round half away from zero", "gelu with the tanh approximation",
                                     "relu that drops NaN"])
def test_plausible_mistakes_fail_the_same_check(mistake, rng):
    """Each is what a shader might do: the comparison above tells it apart."""
    x = np.concatenate([ROUNDING, SPECIAL, rng.standard_normal(16)])
    if mistake.startswith("round"):
        wrong, right = np.sign(x) * np.floor(np.abs(x) + 0.5), torch.round(torch.from_numpy(x)).numpy()
    elif mistake.startswith("gelu"):
        wrong = reference.evaluate("aten.gelu.default", {"self": x, "approximate": "tanh"})
        right = F.gelu(torch.from_numpy(x)).numpy()
    else:
        wrong, right = np.maximum(np.nan_to_num(x, nan=0.0), 0), torch.relu(torch.from_numpy(x)).numpy()
    with pytest.raises(AssertionError):
        _same(wrong, right)


def test_a_textbook_tanh_fails_the_same_check():
    x = EDGES
    with np.errstate(over="ignore", invalid="ignore"):
        textbook = np.sinh(x) / np.cosh(x)
    theirs = torch.tanh(torch.from_numpy(x)).numpy()
    with pytest.raises(AssertionError):
        np.testing.assert_array_equal(np.isfinite(textbook), np.isfinite(theirs))
