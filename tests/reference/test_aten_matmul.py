"""The float matmul references (``mm``, ``bmm``, ``addmm``, ``linear``) against torch in float64.

The companions show the checks have teeth: an addmm that broadcasts a ``[M, 1]`` bias along the
wrong axis, and a half matmul accumulated in float16 (what ET-VK's half buffer shaders do), fail
the same comparisons.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vkdiff import reference

SHAPES = ((13, 7, 6), (1, 9, 3), (5, 8, 12), (4, 1, 5))
"""(M, K, N): sizes ≡ 1, 2, 3 (mod 4), one row, K = 1."""


def _close(ours, theirs) -> None:
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("m,k,n", SHAPES)
def test_mm_bmm_linear_match_torch(m, k, n, rng):
    a, b = rng.standard_normal((m, k)) * 300, rng.standard_normal((k, n))
    _close(reference.evaluate("aten.mm.default", {"self": a, "mat2": b}), torch.mm(torch.tensor(a), torch.tensor(b)))
    batched_a, batched_b = rng.standard_normal((3, m, k)), rng.standard_normal((3, k, n))
    _close(reference.evaluate("aten.bmm.default", {"self": batched_a, "mat2": batched_b}),
           torch.bmm(torch.tensor(batched_a), torch.tensor(batched_b)))
    weight, bias = rng.standard_normal((n, k)), rng.standard_normal(n)
    for x in (a, batched_a):
        _close(reference.evaluate("aten.linear.default", {"input": x, "weight": weight, "bias": bias}),
               torch.nn.functional.linear(torch.tensor(x), torch.tensor(weight), torch.tensor(bias)))
        _close(reference.evaluate("aten.linear.default", {"input": x, "weight": weight, "bias": None}),
               torch.nn.functional.linear(torch.tensor(x), torch.tensor(weight)))


@pytest.mark.parametrize("bias_shape", [(6,), (13, 6), (13, 1), (1, 6)])
def test_addmm_broadcasts_self_with_alpha_and_beta(bias_shape, rng):
    a, b, bias = rng.standard_normal((13, 7)), rng.standard_normal((7, 6)), rng.standard_normal(bias_shape)
    ours = reference.evaluate("aten.addmm.default", {"self": bias, "mat1": a, "mat2": b, "beta": -1.5, "alpha": 0.75})
    _close(ours, torch.addmm(torch.tensor(bias), torch.tensor(a), torch.tensor(b), beta=-1.5, alpha=0.75))


def test_magnitudes_bound_the_error_of_each_output(rng):
    """The accumulation magnitude is the sum of absolute terms: never below |output|, equal for positive data."""
    a, b, bias = np.abs(rng.standard_normal((5, 8))), np.abs(rng.standard_normal((8, 4))), rng.standard_normal(4)
    out, magnitude = reference.evaluate_with_magnitude("aten.mm.default", {"self": a, "mat2": b})
    _close(magnitude, out)
    signed = -a
    signed[:, ::2] *= -1
    out, magnitude = reference.evaluate_with_magnitude("aten.linear.default",
                                                       {"input": signed, "weight": b.T, "bias": bias})
    assert (magnitude >= np.abs(out) - 1e-12).all() and (magnitude > np.abs(out) + 1e-9).any()
    _, magnitude = reference.evaluate_with_magnitude("aten.addmm.default", {"self": bias, "mat1": a, "mat2": b,
                                                                            "beta": -2.0, "alpha": 0.5})
    _close(magnitude, 0.5 * (a @ b) + 2.0 * np.abs(bias))


def test_half_overflow_is_left_to_the_runner():
    """Products past the half range stay finite in float64; the runner makes ATen's inf where the sum overflows."""
    a, b = np.array([[300.0, -300.0], [60000.0, 0.0]]), np.array([[250.0], [250.0]])
    out = reference.evaluate("aten.mm.default", {"self": a, "mat2": b})
    expected = torch.mm(torch.tensor(a, dtype=torch.float16), torch.tensor(b, dtype=torch.float16))
    assert out[0, 0] == 0.0 and float(expected[0, 0]) == 0.0
    with np.errstate(over="ignore"):
        assert np.isinf(out[1:].astype(np.float16)).all() and torch.isinf(expected[1]).all()


@pytest.mark.parametrize("mistake", ["column bias read as a row", "half accumulation"])
def test_plausible_mistakes_fail_the_same_check(mistake, rng):
    """Each is what a shader might do: the comparison above tells it apart."""
    if mistake.startswith("column"):
        a, b, bias = rng.standard_normal((5, 8)), rng.standard_normal((8, 12)), rng.standard_normal((5, 1))
        wrong = a @ b + bias.reshape(-1)[np.minimum(np.arange(5) * 4, 4)][:, None]
        right = torch.addmm(torch.tensor(bias), torch.tensor(a), torch.tensor(b)).numpy()
        assert np.allclose(reference.evaluate("aten.addmm.default", {"self": bias, "mat1": a, "mat2": b}), right)
    else:
        a, b = np.array([[300.0, -300.0, 1.0]]), np.array([[250.0], [250.0], [1.0]])
        with np.errstate(over="ignore", invalid="ignore"):
            wrong = (a.astype(np.float16) * b.T.astype(np.float16)).sum(axis=1, dtype=np.float16)[:, None]
        right = reference.evaluate("aten.mm.default", {"self": a, "mat2": b})
    with pytest.raises(AssertionError):
        _close(wrong, right)
