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
OPS = {"aten.tanh.default": torch.tanh, "aten.exp.default": torch.exp, "aten.neg.default": torch.neg,
       "aten.abs.default": torch.abs, "aten.sigmoid.default": torch.sigmoid}


@pytest.mark.parametrize("op", sorted(OPS))
def test_activation_matches_torch_in_float64(op, rng):
    x = np.concatenate([EDGES, rng.standard_normal(64) * 4])
    ours = reference.evaluate(op, {"self": x})
    theirs = OPS[op](torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(np.isfinite(ours), np.isfinite(theirs))
    np.testing.assert_allclose(ours[np.isfinite(ours)], theirs[np.isfinite(theirs)], rtol=1e-14, atol=0)


def test_a_textbook_tanh_fails_the_same_check():
    x = EDGES
    with np.errstate(over="ignore", invalid="ignore"):
        textbook = np.sinh(x) / np.cosh(x)
    theirs = torch.tanh(torch.from_numpy(x)).numpy()
    with pytest.raises(AssertionError):
        np.testing.assert_array_equal(np.isfinite(textbook), np.isfinite(theirs))
