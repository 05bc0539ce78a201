"""A float16 output judged against the kernel's own rounding (``Emulated``) as well as the tolerance policy."""

from __future__ import annotations

import numpy as np
import pytest

from vkdiff.datamodel import Status, Tolerance
from vkdiff.reference import arithmetic
from vkdiff.verdicts.compare import Emulated, ErrorStatistics

TOL = Tolerance.for_dtype(np.float16)


def _case(seed: str):
    """A float16 linear's exact output, its magnitude, and its emulation under both fma models."""
    rng = np.random.default_rng(list(seed.encode()))
    x = rng.standard_normal((6, 512)).astype(np.float16)
    w = (rng.integers(-8, 8, (16, 512)) * np.float16(0.004)).astype(np.float16).astype(np.float64)
    exact = x.astype(np.float64) @ w.T
    magnitude = np.abs(x.astype(np.float64)) @ np.abs(w).T
    models = {fma: arithmetic.dot_as(x, w, accumulate="float16", lanes=1, fused=fma == "fused")
              for fma in ("separate", "fused")}
    return exact, magnitude, Emulated(models=models, dtype="float16", arithmetic="float16, sequential")


def _stats(actual, exact, magnitude, emulated):
    return ErrorStatistics.from_arrays(actual.astype(np.float16), exact, TOL, magnitude, emulated=emulated)


@pytest.mark.parametrize("fma", ["separate", "fused"])
def test_a_kernel_rounding_as_modelled_passes_and_names_its_fma(fma):
    exact, magnitude, emulated = _case("fma")
    stats = _stats(emulated.models[fma][0], exact, magnitude, emulated)
    assert stats.status() is Status.PASS
    assert stats.arithmetic["rounding"].startswith(fma) and stats.arithmetic["beyond"] == 0


def test_a_wrong_code_hidden_by_the_float16_noise_bound_is_caught():
    """One product off by a code step (0.004 · x): inside 4·eps16·Σ|x||w|, outside the kernel's own rounding."""
    exact, magnitude, emulated = _case("code")
    actual = emulated.models["separate"][0].copy()
    actual[2, 5] += 0.004 * 0.8
    assert ErrorStatistics.from_arrays(actual.astype(np.float16), exact, TOL, magnitude).status() is Status.PASS
    stats = _stats(actual, exact, magnitude, emulated)
    assert stats.status() is Status.FAIL_NUMERIC and stats.mismatches == 1 and stats.first_mismatches == [[2, 5]]
    assert stats.arithmetic["beyond"] == 1 and stats.arithmetic["max_ulps"] >= 1
    assert "Beyond the kernel's own rounding: 1 / 96" in stats.message()


def test_stores_rounding_toward_zero_are_a_model_too():
    """A float32 accumulator stored as half by truncation (lavapipe's rgba16f images) is a correct kernel."""
    rng = np.random.default_rng(7)
    exact = rng.standard_normal((8, 8)) * 3
    emulated = Emulated(models={"any": (exact, np.abs(exact) * 2.0 ** -21)}, dtype="float16", arithmetic="float32")
    toward_zero = np.where(np.abs(exact.astype(np.float16)) > np.abs(exact),
                           np.nextafter(exact.astype(np.float16), np.float16(0)), exact.astype(np.float16))
    assert (toward_zero != exact.astype(np.float16)).any()
    stats = ErrorStatistics.from_arrays(toward_zero, exact, TOL, emulated=emulated)
    assert stats.status() is Status.PASS and "toward zero" in stats.arithmetic["rounding"]
    off = toward_zero.copy()
    off[3, 3] = np.nextafter(off[3, 3], np.float16(np.inf) * np.sign(off[3, 3]))
    off[3, 3] = np.nextafter(off[3, 3], np.float16(np.inf) * np.sign(off[3, 3]))
    assert ErrorStatistics.from_arrays(off, exact, TOL, emulated=emulated).status() is Status.FAIL_NUMERIC


def test_nan_is_outside_every_model():
    exact, magnitude, emulated = _case("nan")
    actual = emulated.models["fused"][0].copy()
    actual[0, 0] = np.nan
    stats = _stats(actual, exact, magnitude, emulated)
    assert stats.status() is Status.FAIL_NAN and stats.arithmetic["beyond"] == 1


def test_a_device_computing_in_another_order_is_judged_by_the_policy_alone():
    """Outputs spread one ulp or more off the model over every row and column: not a fault's shape."""
    exact, magnitude, emulated = _case("order")
    actual = emulated.models["separate"][0].copy()
    spread = np.random.default_rng(11).random(actual.shape) < 0.3
    actual[spread] = np.nextafter(np.nextafter(actual[spread].astype(np.float16), np.float16(np.inf)),
                                  np.float16(np.inf))
    stats = _stats(actual, exact, magnitude, emulated)
    assert stats.status() is Status.PASS
    assert stats.arithmetic["followed"] is False and stats.arithmetic["beyond"] > 10
    assert "Beyond the kernel's own rounding" not in stats.message()


@pytest.mark.parametrize("shape", ["row", "column"])
def test_a_fault_shaped_like_a_row_or_a_channel_is_judged_by_the_model(shape):
    exact, magnitude, emulated = _case(shape)
    actual = emulated.models["fused"][0].copy()
    if shape == "row":
        actual[4] += 0.003
    else:
        actual[:, 9] -= 0.003
    stats = _stats(actual, exact, magnitude, emulated)
    assert stats.arithmetic["followed"] is True and stats.status() is Status.FAIL_NUMERIC
