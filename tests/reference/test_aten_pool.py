"""Pooling and upsampling references against torch in float64, at the edges where the shaders differ.

The companions show the checks have teeth: a max pool padding with zeros, an avg pool dividing by the
full window, a nearest upsample picking half-pixel sources (``upsample_2d.glsl``'s rule) and a
bilinear upsample with ``(in-1)/(out-1)`` at one output row all fail the same comparisons.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from vkdiff import reference

WINDOWS = (([2, 2], [2, 2], [0, 0], [1, 1]), ([3, 3], [2, 2], [1, 1], [1, 1]), ([3, 2], [1, 2], [1, 0], [1, 1]),
           ([3, 3], [1, 1], [1, 1], [2, 2]), ([3, 3], [2, 1], [1, 1], [1, 2]))
"""(kernel, stride, padding, dilation): stride = kernel, padding, non-square, dilation."""
ATEN = torch.ops.aten


def _close(ours, theirs) -> None:
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("window,ceil_mode", itertools.product(WINDOWS, (False, True)))
def test_max_pool_values_and_indices_match_torch(window, ceil_mode, rng):
    x = -np.abs(rng.standard_normal((2, 5, 9, 11))) - 0.5
    values, indices = reference.evaluate("aten.max_pool2d_with_indices.default",
                                         dict(zip(("self", "kernel_size", "stride", "padding", "dilation"),
                                                  (x, *window)), ceil_mode=ceil_mode))
    expected, expected_indices = ATEN.max_pool2d_with_indices(torch.tensor(x), *window, ceil_mode)
    _close(values, expected)
    np.testing.assert_array_equal(indices, expected_indices.numpy())
    assert indices.dtype == np.int64


@pytest.mark.parametrize("window,ceil_mode,include,divisor",
                         itertools.product(WINDOWS[:3], (False, True), (False, True), (None, 5)))
def test_avg_pool_matches_torch(window, ceil_mode, include, divisor, rng):
    x = rng.standard_normal((3, 8, 7))
    ours = reference.evaluate("aten.avg_pool2d.default", {"self": x, "kernel_size": window[0], "stride": window[1],
                                                          "padding": window[2], "ceil_mode": ceil_mode,
                                                          "count_include_pad": include, "divisor_override": divisor})
    _close(ours, ATEN.avg_pool2d(torch.tensor(x), *window[:3], ceil_mode, include, divisor))


SIZES = (([8, 12], None), ([7, 9], None), ([2, 3], None), ([1, 4], None), (None, [2.0, 2.0]), (None, [1.5, 1.5]),
         (None, [0.5, 0.5]))


@pytest.mark.parametrize("output_size,scales", SIZES)
def test_upsample_matches_torch(output_size, scales, rng):
    x = rng.standard_normal((2, 3, 4, 6))
    _close(reference.evaluate("aten.upsample_nearest2d.vec", {"input": x, "output_size": output_size,
                                                              "scale_factors": scales}),
           ATEN.upsample_nearest2d.vec(torch.tensor(x), output_size, scales))
    for align in (False, True):
        _close(reference.evaluate("aten.upsample_bilinear2d.vec", {"input": x, "output_size": output_size,
                                                                   "align_corners": align, "scale_factors": scales}),
               ATEN.upsample_bilinear2d.vec(torch.tensor(x), output_size, align, scales))


def _half_pixel_nearest(x: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """``upsample_2d.glsl``'s nearest: ``roundEven((o + 0.5) * in/out - 0.5)`` clamped."""
    rows = np.clip(np.rint((np.arange(out_h) + 0.5) * x.shape[-2] / out_h - 0.5), 0, x.shape[-2] - 1).astype(int)
    cols = np.clip(np.rint((np.arange(out_w) + 0.5) * x.shape[-1] / out_w - 0.5), 0, x.shape[-1] - 1).astype(int)
    return x[..., rows, :][..., cols]


@pytest.mark.parametrize("mistake", ["max pool pads with zeros", "avg pool divides by the full window",
                                     "half-pixel nearest", "align_corners at one row"])
def test_plausible_mistakes_fail_the_same_check(mistake, rng):
    """Each is what a shader might do: the comparison above tells it apart."""
    x = -np.abs(rng.standard_normal((1, 3, 4, 6))) - 0.5
    if mistake.startswith("max"):
        padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        wrong = ATEN.max_pool2d(torch.tensor(padded), [3, 3], [2, 2]).numpy()
        right = ATEN.max_pool2d(torch.tensor(x), [3, 3], [2, 2], [1, 1]).numpy()
        _close(reference.evaluate("aten.max_pool2d.default", {"self": x, "kernel_size": [3, 3], "stride": [2, 2],
                                                              "padding": [1, 1]}), right)
    elif mistake.startswith("avg"):
        wrong = ATEN.avg_pool2d(torch.tensor(x), [3, 3], [2, 2], [1, 1], True, True).numpy()
        right = reference.evaluate("aten.avg_pool2d.default", {"self": x, "kernel_size": [3, 3], "stride": [2, 2],
                                                               "padding": [1, 1], "ceil_mode": True,
                                                               "count_include_pad": False})
    elif mistake.startswith("half"):
        wrong = _half_pixel_nearest(x, 7, 9)
        right = reference.evaluate("aten.upsample_nearest2d.vec", {"input": x, "output_size": [7, 9],
                                                                   "scale_factors": None})
    else:
        wrong = np.full((1, 3, 1, 4), np.nan)  # source row 0 * (4 - 1) / (1 - 1) = 0 * inf: NaN everywhere
        right = reference.evaluate("aten.upsample_bilinear2d.vec", {"input": x, "output_size": [1, 4],
                                                                    "align_corners": True, "scale_factors": None})
        _close(right, ATEN.upsample_bilinear2d.vec(torch.tensor(x), [1, 4], True, None))
    with pytest.raises(AssertionError):
        _close(wrong, right)
