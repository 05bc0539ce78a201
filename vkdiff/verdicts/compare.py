"""Metrics of an output against its reference: the only place verdicts on numbers are made.

The bound each element is held to is ``Tolerance`` (``vkdiff.datamodel.tolerance``). Where the
kernel's variant declares its arithmetic, each element is also held within ``tolerance.ulps``
of the reference evaluated with that arithmetic (``Emulated``), under the ``fma`` model and
store rounding the device follows (the one fewest elements stray from). A device whose
compiler computes in another order (NVIDIA's does for the float16 linears: 23-90% of the
outputs lie outside every declared model, spread over every row and column) does not
follow it; its outputs are then judged by the tolerance policy alone, and the metrics say
so (``followed``). A kernel fault is told apart by its shape: a misread code, scale or
zero point moves one output channel or one row, and nothing else (``_followed``).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np

from vkdiff.datamodel import STORE_ROUNDINGS, Status, Tolerance

MAX_REPORTED_INDICES = 5

STRAY = 0.01
"""Share of an output, past its worst row and its worst column, that may lie outside an emulated model on a
device that follows it (a rounding tie taken differently)."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class Emulated:
    """The reference with a kernel's rounding, under each ``fma`` model (``vkdiff.reference.arithmetic``)."""

    models: dict[str, tuple[np.ndarray, np.ndarray]]
    """``fma`` model name → (accumulator value before the store, slack), in the output's shape."""
    dtype: str
    """The output's dtype: the kernel stores the accumulator rounded to it."""
    arithmetic: str
    """What was emulated, in words (``Arithmetic.describe``)."""

    def closest(self, actual: np.ndarray, ulps: float) -> tuple[str, np.ndarray, np.ndarray]:
        """(model, ratio, ulps outside) for the ``fma`` model and store rounding the fewest elements stray from.

        A correct element lies between ``value ∓ ulps * slack``, each end rounded to the output dtype as the
        device's stores round (``STORE_ROUNDINGS``). The ratio is above 1 exactly outside (NaN is outside);
        ulps outside counts the distance in ulps of the output.
        """
        best = None
        for (name, (value, slack)), store in itertools.product(self.models.items(), STORE_ROUNDINGS):
            low = _round(value - ulps * slack, self.dtype, store)
            high = _round(value + ulps * slack, self.dtype, store)
            spacing = np.spacing(np.abs(value).astype(self.dtype)).astype(np.float64)
            with np.errstate(invalid="ignore"):
                distance = np.maximum(low - actual, actual - high)
                outside = np.where(np.isnan(actual), np.inf, np.maximum(distance, 0.0) / spacing)
                inside = np.abs(actual - value) / np.maximum(high - low, spacing)
            ratio = np.where(outside > 0, 1.0 + outside, np.minimum(inside, 1.0))
            count = int((outside > 0).sum())
            if best is None or count < best[0]:
                best = (count, f"{name} fma, stores round {store}", ratio, outside)
        return best[1], best[2], best[3]


def _followed(beyond: np.ndarray) -> bool:
    """Whether the elements outside a model are what a fault gives: with the worst row and the worst column
    (of the output viewed rows × last dim) set aside, at most ``STRAY`` of the rest."""
    grid = beyond.reshape(-1, beyond.shape[-1]) if beyond.ndim > 1 else beyond.reshape(1, -1)
    keep_rows = np.ones(grid.shape[0], bool)
    keep_cols = np.ones(grid.shape[1], bool)
    if grid.shape[0] > 1:
        keep_rows[np.argmax(grid.sum(axis=1))] = False
    if grid.shape[1] > 1:
        keep_cols[np.argmax(grid.sum(axis=0))] = False
    rest = grid[np.ix_(keep_rows, keep_cols)]
    return bool(rest.sum() <= STRAY * max(rest.size, 1))


def _round(values: np.ndarray, dtype: str, store: str) -> np.ndarray:
    """``values`` rounded to ``dtype`` to nearest (ties to even) or toward zero, held in float64."""
    values = np.asarray(values, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        nearest = values.astype(dtype)
        if store == "toward zero":
            nearest = np.where(np.abs(nearest.astype(np.float64)) > np.abs(values),
                               np.nextafter(nearest, np.zeros_like(nearest)), nearest)
    return nearest.astype(np.float64)


@dataclasses.dataclass(kw_only=True)
class ErrorStatistics:
    """Error metrics of one output against its reference (float64)."""

    total: int
    """Elements compared."""
    mismatches: int | None
    """Elements over tolerance (None when shapes differ)."""
    max_abs: float | None
    """Largest absolute error over finite elements."""
    max_rel: float | None
    """Largest relative error ``|a-e| / max(|e|, tiny)`` over finite elements."""
    sqnr_db: float | None
    """Signal-to-quantization-noise ratio, ``10 log10(sum e^2 / sum (a-e)^2)``; inf when exact."""
    nan_count: int = 0
    """NaN in the actual output where the reference is finite."""
    inf_count: int = 0
    """Inf in the actual output where the reference is finite."""
    unwritten: int = 0
    """Elements the kernel never wrote (poison still there)."""
    worst_index: list[int] | None = None
    """Index of the largest error over tolerance ratio."""
    first_mismatches: list[list[int]] = dataclasses.field(default_factory=list)
    """Up to five indices over tolerance, in order."""
    shape_mismatch: str = ""
    """``"actual (a,b) vs expected (c,d)"`` when shapes differ."""
    error_hist: dict[str, list] = dataclasses.field(default_factory=dict)
    """Histogram of ``log10(|a-e| / bound)`` (``edges``, ``counts``; exact elements in ``exact``)."""
    error_map: list[list[float]] | None = None
    """For failures: ``|a-e| / bound`` max-pooled to at most 32×32 over the output viewed 2-D (rows × last dim)."""
    arithmetic: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Against the emulated arithmetic, where declared: ``model``, ``rounding`` (the ``fma`` model and store
    rounding closest to the device), ``ulps``, ``followed`` (whether the device follows it: only then does it
    judge), ``beyond`` (elements outside what it stores), ``max_ulps``."""

    @classmethod
    def from_arrays(cls, actual: np.ndarray, expected: np.ndarray, tolerance: Tolerance,
                    magnitude: np.ndarray | None = None, unwritten: np.ndarray | None = None,
                    emulated: Emulated | None = None) -> "ErrorStatistics":
        """Compare element-wise; never raises on shape mismatch (records it, fields None).

        Most outputs are fully written and finite: those take a path with fewer passes over
        the arrays (the same numbers as the general one).
        """
        if actual.shape != expected.shape:
            return cls(total=int(expected.size), mismatches=None, max_abs=None, max_rel=None, sqnr_db=None,
                       shape_mismatch=f"actual {actual.shape} vs expected {expected.shape}")
        with np.errstate(invalid="ignore"):  # poison is a signalling NaN: its cast to float64 is not an error here
            a = np.asarray(actual, dtype=np.float64)
            e = np.asarray(expected, dtype=np.float64)
        bound = tolerance.bound(e, magnitude)
        safe_bound = np.maximum(bound, 1e-300)
        clean = (unwritten is None or not unwritten.any()) and bool(np.isfinite(a).all() and np.isfinite(e).all())
        if clean:
            diff = np.abs(a - e)
            over = diff > bound
            with np.errstate(over="ignore"):  # a huge error over a tiny bound is an infinite ratio
                ratio_all = diff / safe_bound
            ratio, nan_count, inf_count, signal = ratio_all, 0, 0, _sum_of_squares(e)
        else:
            written = np.ones(a.shape, bool) if unwritten is None else ~unwritten
            finite_ref = np.isfinite(e)
            nan = np.isnan(a) & finite_ref & written
            inf = np.isinf(a) & finite_ref & written
            with np.errstate(invalid="ignore"):
                diff = np.where(np.isfinite(a) & written & ~np.isnan(e), np.abs(a - e), 0.0)
            over = (over_bound(a, e, bound) & written) | ~written
            ratio = np.where(np.isfinite(diff), diff, np.inf) / safe_bound
            ratio_all = np.where(written & ~nan & ~inf, ratio, np.inf)
            nan_count, inf_count = int(nan.sum()), int(inf.sum())
            signal = float(np.sum(np.where(finite_ref, e, 0.0) ** 2))
        if tolerance.exact:  # an exact op (a copy) must keep the sign of a zero too
            over = over | zero_sign_differs(a, e)
        arithmetic: dict[str, Any] = {}
        if emulated is not None and tolerance.ulps:
            rounding, model_ratio, outside = emulated.closest(a, tolerance.ulps)
            beyond = model_ratio > 1
            followed = _followed(beyond)
            if followed:
                over = over | beyond
                ratio = np.maximum(ratio, model_ratio)
                ratio_all = np.maximum(ratio_all, model_ratio)
            finite = outside[np.isfinite(outside)]
            arithmetic = {"model": emulated.arithmetic, "rounding": rounding, "ulps": tolerance.ulps,
                          "followed": followed, "beyond": int(beyond.sum()),
                          "max_ulps": float(finite.max()) if finite.size else None}
        noise = _sum_of_squares(diff)
        bad = np.flatnonzero(over)
        worst = None
        if bad.size:
            worst = np.unravel_index(int(bad[np.argmax(ratio.reshape(-1)[bad])]), ratio.shape)
        return cls(
            total=int(e.size), mismatches=int(bad.size),
            max_abs=float(diff.max()) if diff.size else 0.0,
            max_rel=float((diff / np.maximum(np.abs(e), 1e-30)).max()) if diff.size else 0.0,
            sqnr_db=float("inf") if noise == 0 else float(10 * np.log10(max(signal, 1e-300) / noise)),
            nan_count=nan_count, inf_count=inf_count,
            unwritten=0 if unwritten is None else int(unwritten.sum()),
            worst_index=None if worst is None else [int(i) for i in worst],
            first_mismatches=[[int(i) for i in np.unravel_index(int(f), over.shape)] for f in bad[:MAX_REPORTED_INDICES]],
            error_hist=_histogram(ratio_all),
            error_map=_pooled(ratio_all) if bad.size else None,
            arithmetic=arithmetic,
        )

    def status(self) -> Status:
        """The verdict these numbers give (unwritten output is a broken kernel contract)."""
        if self.shape_mismatch:
            return Status.FAIL_CHECK
        if self.unwritten:
            return Status.FAIL_CHECK
        if self.nan_count or self.inf_count:
            return Status.FAIL_NAN
        if self.mismatches:
            return Status.FAIL_NUMERIC
        return Status.PASS

    def message(self) -> str:
        """numpy-style summary of what went wrong.

        Example::

            >>> tol = Tolerance.for_dtype(np.float32)
            >>> stats = ErrorStatistics.from_arrays(np.array([1.0, 2.5]), np.array([1.0, 2.0]), tol)
            >>> print(stats.message())
            Mismatched elements: 1 / 2 (50%)
            Mismatch at indices: [[1]]
            Max absolute difference: 0.5
            Max relative difference: 0.25
        """
        if self.shape_mismatch:
            return f"Shape mismatch: {self.shape_mismatch}"
        lines = []
        if self.unwritten:
            lines.append(f"Unwritten elements: {self.unwritten} / {self.total}")
        if self.nan_count or self.inf_count:
            lines.append(f"NaN: {self.nan_count}, Inf: {self.inf_count} where the reference is finite")
        if self.mismatches:
            pct = 100.0 * self.mismatches / max(self.total, 1)
            lines.append(f"Mismatched elements: {self.mismatches} / {self.total} ({pct:.3g}%)")
            lines.append(f"Mismatch at indices: {self.first_mismatches}")
        if self.arithmetic.get("beyond") and self.arithmetic.get("followed"):
            lines.append(f"Beyond the kernel's own rounding: {self.arithmetic['beyond']} / {self.total} elements "
                         f"outside what {self.arithmetic['model']} ({self.arithmetic['rounding']}) stores, "
                         f"by up to {self.arithmetic['max_ulps']:.4g} ulp")
        lines.append(f"Max absolute difference: {self.max_abs:.6g}")
        lines.append(f"Max relative difference: {self.max_rel:.6g}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """Fields by name (a shallow copy: results never mutate the lists)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


HIST_EDGES = [float(e) for e in range(-8, 5)]
"""log10 bins of error/bound: 1e-8 … 1e4; 0 is the tolerance edge."""


def zero_sign_differs(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Zeros whose sign differs from the reference's (only an exact op, a copy, is held to it)."""
    return (actual == 0) & (expected == 0) & (np.signbit(actual) != np.signbit(expected))


def over_bound(actual: np.ndarray, expected: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Elements of ``actual`` (float64) over ``bound`` from ``expected``; a NaN or an infinity on either side is within
    only against the same NaN or infinity (the element-wise rule every verdict on numbers uses)."""
    with np.errstate(invalid="ignore", over="ignore"):
        far = np.abs(actual - expected) > bound
    special = ~np.isfinite(actual) | ~np.isfinite(expected)
    same = (actual == expected) | (np.isnan(actual) & np.isnan(expected))
    return np.where(special, ~same, far)


def _sum_of_squares(values: np.ndarray) -> float:
    """``sum(values**2)`` without BLAS (``np.vdot`` would wake an OpenBLAS pool of one thread per core per verdict)."""
    return float(np.add.reduce(np.square(values), axis=None))


def _histogram(ratio: np.ndarray) -> dict[str, list]:
    """Decade histogram of the non-zero ratios (``bincount`` of the decade: ``np.histogram`` costs twice as much)."""
    flat = ratio.reshape(-1)
    positive = flat[flat > 0]
    logs = np.log10(np.clip(positive, 10.0 ** HIST_EDGES[0], 10.0 ** HIST_EDGES[-1]))
    bins = len(HIST_EDGES) - 1
    decades = np.minimum((logs - HIST_EDGES[0]).astype(np.intp), bins - 1)
    counts = np.bincount(decades, minlength=bins)
    return {"edges": HIST_EDGES, "counts": [int(c) for c in counts], "exact": int(flat.size - positive.size)}


def _pooled(ratio: np.ndarray, size: int = 32) -> list[list[float]]:
    """Max-pool the error ratio of an output (viewed rows × last dim) to at most ``size``×``size``."""
    grid = ratio.reshape(-1, ratio.shape[-1]) if ratio.ndim > 1 else ratio.reshape(1, -1)
    rows = np.array_split(np.arange(grid.shape[0]), min(size, grid.shape[0]))
    cols = np.array_split(np.arange(grid.shape[1]), min(size, grid.shape[1]))
    pooled = [[float(np.max(grid[np.ix_(r, c)])) for c in cols] for r in rows]
    return [[v if np.isfinite(v) else 1e30 for v in row] for row in pooled]


def assert_within(actual: np.ndarray, expected: np.ndarray, tolerance: Tolerance,
                  magnitude: np.ndarray | None = None) -> ErrorStatistics:
    """Assertion helper for tests: raises AssertionError with the numpy-style message."""
    __tracebackhide__ = True
    stats = ErrorStatistics.from_arrays(actual, expected, tolerance, magnitude)
    if stats.status() is not Status.PASS:
        raise AssertionError(stats.message())
    return stats
