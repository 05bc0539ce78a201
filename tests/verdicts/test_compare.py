"""Metrics and tolerance policy."""

from __future__ import annotations


import numpy as np
import pytest

from vkdiff.datamodel import Status, Tolerance
from vkdiff.verdicts import compare
from vkdiff.verdicts.compare import ErrorStatistics



def test_exact_match_has_infinite_sqnr(rng):
    x = rng.standard_normal((4, 5))
    stats = ErrorStatistics.from_arrays(x, x, Tolerance.for_dtype(np.float32))
    assert stats.status() is Status.PASS
    assert stats.sqnr_db == float("inf") and stats.max_abs == 0.0


def test_over_tolerance_is_fail_numeric_with_worst_index(rng):
    e = rng.standard_normal((3, 7))
    a = e.copy()
    a[2, 5] += 1e-2
    a[0, 1] += 1e-3
    stats = ErrorStatistics.from_arrays(a, e, Tolerance.for_dtype(np.float32))
    assert stats.status() is Status.FAIL_NUMERIC
    assert stats.mismatches == 2 and stats.worst_index == [2, 5]
    assert stats.first_mismatches == [[0, 1], [2, 5]]
    assert stats.message().startswith("Mismatched elements: 2 / 21 (9.52%)")


def test_nan_is_fail_nan_and_unwritten_is_fail_check(rng):
    e = rng.standard_normal(6)
    a = e.copy()
    a[3] = np.nan
    assert ErrorStatistics.from_arrays(a, e, Tolerance.for_dtype(np.float32)).status() is Status.FAIL_NAN
    unwritten = np.zeros(6, bool)
    unwritten[3] = True
    stats = ErrorStatistics.from_arrays(a, e, Tolerance.for_dtype(np.float32), unwritten=unwritten)
    assert stats.status() is Status.FAIL_CHECK and stats.unwritten == 1 and stats.nan_count == 0


def test_shape_mismatch_is_recorded_not_raised():
    stats = ErrorStatistics.from_arrays(np.zeros((2, 3)), np.ones((3, 2)), Tolerance())
    assert stats.mismatches is None and stats.status() is Status.FAIL_CHECK
    assert stats.message() == "Shape mismatch: actual (2, 3) vs expected (3, 2)"


def test_magnitude_widens_the_bound_for_long_reductions():
    tol = Tolerance.for_dtype(np.float16)
    e = np.array([1.0])
    assert tol.bound(e, np.array([4096.0]))[0] > tol.bound(e, np.array([64.0]))[0] > tol.bound(e)[0]


def test_integers_are_exact():
    assert Tolerance.for_dtype(np.int32).exact
    stats = ErrorStatistics.from_arrays(np.array([1, 2, 4]), np.array([1, 2, 3]), Tolerance.for_dtype(np.int8))
    assert stats.mismatches == 1


def test_unknown_dtype_names_the_valid_set():
    with pytest.raises(ValueError, match="Unsupported dtype: complex64"):
        Tolerance.for_dtype(np.complex64)


def test_assert_within_raises_with_message():
    with pytest.raises(AssertionError, match="Max absolute difference: 1"):
        compare.assert_within(np.array([2.0]), np.array([1.0]), Tolerance.for_dtype(np.float32))
