"""Convolutions and grid ops against torch in float64 (``torch.nn.functional``), at the family's edges.

The companions show the comparison has teeth: a convolution whose kernel is flipped (a true
convolution instead of ATen's cross-correlation), one padded on one side only, and a grid sampler
that unnormalizes with the other ``align_corners`` convention all FAIL the same check.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vkdiff import reference
from vkdiff.reference.tensor import conv, grid

F = torch.nn.functional

CONV2D = {
    "plain3x3": dict(c_in=5, c_out=7, k=3, stride=1, padding=1, dilation=1, groups=1),
    "stride2-pad2-dil2": dict(c_in=6, c_out=6, k=3, stride=2, padding=2, dilation=2, groups=1),
    "depthwise5x5": dict(c_in=6, c_out=6, k=5, stride=1, padding=2, dilation=1, groups=6),
    "groups3": dict(c_in=6, c_out=9, k=3, stride=(2, 1), padding=(0, 1), dilation=1, groups=3),
    "pointwise": dict(c_in=9, c_out=3, k=1, stride=1, padding=0, dilation=1, groups=1),
}
"""2-D geometries: channels % 4 in {1, 2, 3}, groups 1 / between / depthwise, stride, padding, dilation."""
TRANSPOSED = {
    "s2-op1": dict(c_in=5, c_out=3, k=3, stride=2, padding=1, output_padding=1, groups=1),
    "s3-op2-p0": dict(c_in=3, c_out=2, k=5, stride=3, padding=0, output_padding=2, groups=1),
    "groups2": dict(c_in=6, c_out=4, k=3, stride=2, padding=1, output_padding=0, groups=2),
}


def _close(ours: np.ndarray, theirs: np.ndarray) -> None:
    np.testing.assert_allclose(ours, theirs, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("name", sorted(CONV2D))
def test_conv2d_matches_torch(name, bias, rng):
    p = CONV2D[name]
    x = rng.standard_normal((1, p["c_in"], 9, 11)) * 300
    w = rng.standard_normal((p["c_out"], p["c_in"] // p["groups"], p["k"], p["k"]))
    b = rng.standard_normal(p["c_out"]) if bias else None
    args = dict(stride=p["stride"], padding=p["padding"], dilation=p["dilation"], groups=p["groups"])
    theirs = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), None if b is None else torch.from_numpy(b), **args)
    listed = {k: [v] if np.isscalar(v) else list(v) for k, v in args.items() if k != "groups"}
    ours = reference.evaluate("aten.convolution.default", {"input": x, "weight": w, "bias": b, **listed,
                                                           "transposed": False, "output_padding": [0],
                                                           "groups": p["groups"]})
    _close(ours, theirs.numpy())


@pytest.mark.parametrize("name", sorted(TRANSPOSED))
def test_conv_transpose2d_matches_torch(name, rng):
    p = TRANSPOSED[name]
    x = rng.standard_normal((1, p["c_in"], 5, 7))
    w = rng.standard_normal((p["c_in"], p["c_out"] // p["groups"], p["k"], p["k"]))
    b = rng.standard_normal(p["c_out"])
    theirs = F.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), stride=p["stride"],
                                padding=p["padding"], output_padding=p["output_padding"], groups=p["groups"])
    ours = conv.convolution(x, w, b, [p["stride"]] * 2, [p["padding"]] * 2, [1, 1], True,
                            [p["output_padding"]] * 2, p["groups"])
    _close(ours, theirs.numpy())


@pytest.mark.parametrize("groups,k,stride,padding,dilation", [(1, 1, 1, 0, 1), (6, 3, 2, 1, 1), (6, 5, 1, 4, 2),
                                                               (2, 3, 1, 0, 1)])
def test_conv1d_and_the_et_vk_variants_match_torch(groups, k, stride, padding, dilation, rng):
    x = rng.standard_normal((2, 6, 13))
    w = rng.standard_normal((6, 6 // groups, k))
    b = rng.standard_normal(6)
    theirs = F.conv1d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), stride, padding, dilation,
                      groups).numpy()
    _close(conv.convolution(x, w, b, [stride], [padding], [dilation], False, [0], groups), theirs)
    op = "et_vk.conv1d_pw.default" if k == 1 else "et_vk.conv1d_dw.default"
    clamped = reference.evaluate(op, {"input": x, "weight": w, "bias": b, "stride": [stride], "padding": [padding],
                                      "dilation": [dilation], "groups": groups, "output_min": -1.0,
                                      "output_max": None})
    _close(clamped, np.maximum(theirs, -1.0))


def test_conv_with_clamp_is_the_clamped_convolution_and_magnitude_bounds_it(rng):
    x, w, b = rng.standard_normal((1, 3, 6, 6)), rng.standard_normal((5, 3, 3, 3)), rng.standard_normal(5)
    args = {"input": x, "weight": w, "bias": b, "stride": [1, 1], "padding": [1, 1], "dilation": [1, 1],
            "transposed": False, "output_padding": [0, 0], "groups": 1, "output_min": -0.5, "output_max": 0.75}
    expected, magnitude = reference.evaluate_with_magnitude("et_vk.conv_with_clamp.default", args)
    theirs = torch.clamp(F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), padding=1),
                         -0.5, 0.75)
    _close(expected, theirs.numpy())
    unclamped = conv.convolution(x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    assert (np.abs(unclamped) <= magnitude + 1e-12).all() and (magnitude > 0).all()


def test_flipped_kernel_and_one_sided_padding_fail_the_same_comparison(rng):
    x, w = rng.standard_normal((1, 3, 7, 7)), rng.standard_normal((4, 3, 3, 3))
    theirs = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1).numpy()
    flipped = conv.convolution(x, w[:, :, ::-1, ::-1], None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    with pytest.raises(AssertionError, match="Mismatched elements"):
        _close(flipped, theirs)
    one_sided = conv.convolution(np.pad(x, ((0, 0), (0, 0), (2, 0), (2, 0))), w, None, [1, 1], [0, 0], [1, 1],
                                 False, [0, 0], 1)
    with pytest.raises(AssertionError, match="Mismatched elements"):
        _close(one_sided, theirs)


GRID_MODES = [(mode, padding, align) for mode in (0, 1) for padding in (0, 1, 2) for align in (False, True)]


@pytest.mark.parametrize("mode,padding,align", GRID_MODES)
def test_grid_sampler_matches_torch_outside_the_unit_square(mode, padding, align, rng):
    x = rng.standard_normal((2, 5, 6, 7))
    g = rng.uniform(-1.6, 1.6, (2, 4, 9, 2))
    g[0, 0, :3] = [[-1.0, -1.0], [1.0, 1.0], [-3.5, 2.25]]
    theirs = torch.ops.aten.grid_sampler_2d(torch.from_numpy(x), torch.from_numpy(g), mode, padding, align).numpy()
    ours = reference.evaluate("aten.grid_sampler_2d.default", {"input": x, "grid": g, "interpolation_mode": mode,
                                                                "padding_mode": padding, "align_corners": align})
    _close(ours, theirs)


def test_grid_sampler_with_the_other_align_corners_convention_fails(rng):
    x, g = rng.standard_normal((1, 3, 5, 6)), rng.uniform(-1.2, 1.2, (1, 4, 4, 2))
    theirs = torch.ops.aten.grid_sampler_2d(torch.from_numpy(x), torch.from_numpy(g), 0, 1, True).numpy()
    with pytest.raises(AssertionError, match="Mismatched elements"):
        _close(grid.grid_sampler_2d(x, g, 0, 1, False), theirs)


def test_grid_priors_matches_the_et_vk_custom_op():
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (registers et_vk.grid_priors)

    x = torch.zeros(1, 3, 5, 7, dtype=torch.float64)
    theirs = torch.ops.et_vk.grid_priors(x, 8, 0.5).numpy()
    _close(reference.evaluate("et_vk.grid_priors.default", {"self": x.numpy(), "stride": 8, "offset": 0.5}), theirs)
    assert theirs.shape == (35, 2) and theirs[1, 0] == 12.0 and theirs[7, 1] == 12.0
