"""The Vulkan spec's precision table, as intervals: what a conformant device may return for one operation.

Vulkan ("Precision and Operation of SPIR-V Instructions") makes additions, subtractions,
multiplications and conversions correctly rounded, and grants the rest a bound: ``x / y``
2.5 ULP, ``exp`` ``3 + 2|x|`` ULP, ``log`` 3 ULP (an absolute ``2^-21`` on [0.5, 2]),
``inversesqrt`` 2 ULP, ``sin``/``cos`` an absolute ``2^-11`` on [-π, π] (none outside),
and ``tan``, ``pow``, ``sqrt``, ``tanh`` are *inherited* from the formula the spec gives
for them. float16 arithmetic (``float16_t``, ``f16vec4``) has its own, wider column. Any
operand or result that is subnormal may be flushed to zero.

An ``Interval`` holds, per element, the lowest and highest value a device may give and
whether NaN is among them; every function here takes intervals and widens them by the
table's bound for one named *liberty* only when the caller's ``Spec`` grants it, so one
declaration of a shader's arithmetic evaluates both exactly and under each liberty.

Example::

    >>> s = Spec("float32", {"division"})
    >>> q = s.div(s.of(np.array([6.0])), s.of(np.array([3.0])))
    >>> float(q.lo[0]) < 2.0 < float(q.hi[0])        # 2.5 ULP either side of 2
    True
    >>> float(s.floor(q).lo[0])                      # so floor(6 / 3) may be 1
    1.0
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable

import numpy as np

__all__ = ["Interval", "LIBERTIES", "Spec", "flush_subnormals", "span", "ulp"]

LIBERTIES: dict[str, str] = {
    "division": "x / y may be 2.5 ULP off (not correctly rounded)",
    "exp": "exp and exp2 may be 3 + 2|x| ULP off (1 + 2|x| in float16)",
    "log": "log and log2 may be 3 ULP off, or 2^-21 absolute inside [0.5, 2] (2^-7 in float16)",
    "inversesqrt": "inversesqrt may be 2 ULP off (1 in float16); sqrt is inherited from 1 / inversesqrt",
    "sin_cos": "sin and cos may be 2^-11 off inside [-pi, pi] (2^-7 in float16) and are unbounded outside; "
               "tan is inherited from sin / cos",
    "tanh": "tanh is inherited from (exp(x) - exp(-x)) / (exp(x) + exp(-x)), which overflows where exp does",
    "pow": "pow(x, y) is inherited from exp2(y * log2(x)): log2's error, times y, and exp2's 3 + 2|x| ULP "
           "(1 + 2|x| in float16); undefined for x < 0, and for x = 0 with y <= 0",
    "nan_min_max": "min and max of a NaN operand are undefined: the other operand (or NaN) may come out",
    "round_half": "round(x) of a value half-way between two integers may go either way (the implementation's "
                  "choice)",
    "reassociation": "an expression not declared precise may be evaluated in another order of its operations "
                     "(a * b * c as a * (b * c))",
    "subnormal_flush": "a subnormal operand or result may be flushed to zero (no DenormPreserve)",
    "contraction": "a * b + c may be computed as one fma (one rounding) unless declared precise",
    "nan_clamp": "min, max and clamp of a NaN operand are undefined: a bound may come out instead of NaN",
    "overflow": "a finite value past a format's range converts to its largest finite value or to infinity",
    "relaxed_precision": "values the shader declares mediump (RelaxedPrecision) may be computed in float16: each "
                         "result rounded to it, infinite past 65504, builtins at float16's precision",
}
"""Each liberty the spec grants that an envelope evaluates, and the spec's words for it."""

_F16_COLUMN = {"exp": 1.0, "inversesqrt": 1.0, "log_abs": 2.0 ** -7, "sin_cos_abs": 2.0 ** -7}
_F32_COLUMN = {"exp": 3.0, "inversesqrt": 2.0, "log_abs": 2.0 ** -21, "sin_cos_abs": 2.0 ** -11}
_DIVISOR_RANGE = {"float32": (2.0 ** -126, 2.0 ** 126), "float16": (2.0 ** -14, 2.0 ** 14)}
"""Divisors over which the 2.5 ULP bound holds; outside it the spec gives none."""


@dataclasses.dataclass(frozen=True)
class Interval:
    """Per element: the lowest and highest value (float64, ±inf allowed) and whether NaN may come out."""

    lo: np.ndarray
    hi: np.ndarray
    nan: np.ndarray

    @property
    def point(self) -> np.ndarray:
        """The value of an exact evaluation (lo and hi agree there), NaN where NaN is possible."""
        return np.where(self.nan, np.nan, self.lo)


def ulp(values: np.ndarray, dtype: str) -> np.ndarray:
    """Spacing of ``dtype`` at ``|values|`` (its largest finite spacing past the range, its smallest at a NaN or an
    infinity)."""
    info = np.finfo(dtype)
    below_max = float(np.nextafter(info.max, info.max.dtype.type(0)))  # the spacing at the largest value is infinite
    capped = np.minimum(np.abs(np.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)), below_max)
    return np.spacing(capped.astype(dtype)).astype(np.float64)


def flush_subnormals(values: np.ndarray, dtype: str) -> np.ndarray:
    """``values`` with every subnormal of ``dtype`` replaced by a zero of its sign."""
    tiny = float(np.finfo(dtype).tiny)
    values = np.asarray(values, np.float64)
    return np.where((values != 0) & (np.abs(values) < tiny), np.copysign(0.0, values), values)


def span(*candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Elementwise min and max over candidate values, ignoring NaN, and where any was NaN."""
    stack = np.stack(np.broadcast_arrays(*candidates))
    nan = np.isnan(stack).any(axis=0)
    with np.errstate(invalid="ignore"):
        lo = np.where(np.isnan(stack), np.inf, stack).min(axis=0)
        hi = np.where(np.isnan(stack), -np.inf, stack).max(axis=0)
    all_nan = np.isnan(stack).all(axis=0)
    return np.where(all_nan, np.nan, lo), np.where(all_nan, np.nan, hi), nan


class Spec:
    """Evaluates a shader's arithmetic in ``dtype``, widened by the liberties in ``grant`` (none: exactly, in float64).

    ``used`` collects every liberty an evaluation met, granted or not, so a declaration is evaluated again only under
    the liberties it can take.
    """

    def __init__(self, dtype: str, grant: Iterable[str] = ()) -> None:
        self.dtype = str(np.dtype(dtype))
        self.grant = frozenset(grant)
        unknown = self.grant - set(LIBERTIES)
        if unknown:
            raise ValueError(f"Spec: unknown liberties {sorted(unknown)}; known: {', '.join(LIBERTIES)}")
        self.used: set[str] = set()
        self.relaxed = "relaxed_precision" in self.grant and self.dtype == "float32"
        """A mediump shader's float32 arithmetic computed in float16, every result rounded."""
        if self.relaxed:
            self.dtype = "float16"
        self.column = _F16_COLUMN if self.dtype == "float16" else _F32_COLUMN

    def _takes(self, liberty: str) -> bool:
        self.used.add(liberty)
        return liberty in self.grant

    def of(self, values, flushable: bool = True) -> Interval:
        """An operand as the shader reads it (a subnormal may read as zero; a float16 value the shader widens to
        compute with may be flushed as a float16 subnormal by the conversion)."""
        held = "float16" if np.asarray(values).dtype == np.float16 else self.dtype
        values = np.asarray(values, np.float64)
        if flushable and self._has_subnormal(values, held) and self._takes("subnormal_flush"):
            lo, hi, nan = span(values, flush_subnormals(values, held))
            return Interval(lo, hi, nan)
        return Interval(values, values, np.isnan(values))

    def _has_subnormal(self, values: np.ndarray, held: str | None = None) -> bool:
        tiny = float(np.finfo(held or self.dtype).tiny)
        with np.errstate(invalid="ignore"):
            return bool(((values != 0) & (np.abs(values) < tiny)).any())

    def result(self, iv: Interval) -> Interval:
        """A value the shader holds in ``dtype``: past its range infinite, a subnormal perhaps flushed to zero (and,
        relaxed, rounded to float16: half an ULP either way)."""
        out = self._in_range(iv, half_ulp=True)
        if self.relaxed:
            with np.errstate(invalid="ignore", over="ignore"):
                half = 0.5 * ulp(np.maximum(np.abs(np.nan_to_num(out.lo)), np.abs(np.nan_to_num(out.hi))), "float16")
            out = self._in_range(Interval(out.lo - half, out.hi + half, out.nan), half_ulp=True)
        if (self._has_subnormal(out.lo) or self._has_subnormal(out.hi)) and self._takes("subnormal_flush"):
            return self._hull(out, Interval(flush_subnormals(out.lo, self.dtype), flush_subnormals(out.hi, self.dtype),
                                            out.nan))
        return out

    @staticmethod
    def _hull(a: Interval, b: Interval) -> Interval:
        lo, _, nan_a = span(a.lo, b.lo)
        _, hi, nan_b = span(a.hi, b.hi)
        return Interval(lo, hi, a.nan | b.nan | nan_a | nan_b)

    def _ulps(self, iv: Interval, ulps, liberty: str) -> Interval:
        """``iv`` widened by ``ulps`` ULP of ``dtype`` at each end, when ``liberty`` is granted."""
        if not self._takes(liberty):
            return iv
        biggest = float(np.finfo(self.dtype).max)
        with np.errstate(invalid="ignore", over="ignore"):  # an exact zero stays zero (x * (1 / y) of x = 0)
            lo = np.where(iv.lo == 0, iv.lo, iv.lo - ulps * ulp(iv.lo, self.dtype))
            hi = np.where(iv.hi == 0, iv.hi, iv.hi + ulps * ulp(iv.hi, self.dtype))
        lo = np.where(lo < -biggest, -np.inf, np.where(lo > biggest, np.inf, lo))
        hi = np.where(hi > biggest, np.inf, np.where(hi < -biggest, -np.inf, hi))
        return Interval(lo, hi, iv.nan)

    def _absolute(self, iv: Interval, error, liberty: str) -> Interval:
        if not self._takes(liberty):
            return iv
        return Interval(iv.lo - error, iv.hi + error, iv.nan)

    @staticmethod
    def _map(fn, iv: Interval, *, increasing: bool = True) -> Interval:
        """A monotonic function of an interval (NaN where it gives NaN at either end)."""
        with np.errstate(all="ignore"):
            a, b = fn(iv.lo), fn(iv.hi)
        lo, hi = (a, b) if increasing else (b, a)
        return Interval(lo, hi, iv.nan | np.isnan(a) | np.isnan(b))

    def add(self, a: Interval, b: Interval) -> Interval:
        with np.errstate(invalid="ignore"):
            lo, hi = a.lo + b.lo, a.hi + b.hi
        return Interval(lo, hi, a.nan | b.nan | np.isnan(lo) | np.isnan(hi))

    def neg(self, a: Interval) -> Interval:
        return Interval(-a.hi, -a.lo, a.nan)

    def sub(self, a: Interval, b: Interval) -> Interval:
        return self.add(a, self.neg(b))

    def mul(self, a: Interval, b: Interval) -> Interval:
        with np.errstate(invalid="ignore"):
            lo, hi, nan = span(a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi)
        return Interval(lo, hi, a.nan | b.nan | nan)

    def const(self, value: float, like: Interval) -> Interval:
        """A literal of the shader, shaped as ``like`` (never flushed: a literal is what the GLSL says)."""
        return self.of(np.full(np.shape(like.lo), float(value)), flushable=False)

    def scale(self, a: Interval, c: float) -> Interval:
        return self.mul(a, self.const(c, a))

    def div(self, a: Interval, b: Interval) -> Interval:
        """``a / b``: 2.5 ULP for divisors in the spec's range, none (anything, NaN too) for another non-zero one; a
        non-zero over zero is IEEE's infinity."""
        straddles = (b.lo < 0) & (b.hi > 0)
        with np.errstate(all="ignore"):
            lo, hi, nan = span(a.lo / b.lo, a.lo / b.hi, a.hi / b.lo, a.hi / b.hi)
        lo, hi = np.where(straddles, -np.inf, lo), np.where(straddles, np.inf, hi)
        out = self._ulps(Interval(lo, hi, a.nan | b.nan | nan), 2.5, "division")
        if "division" in self.grant:
            small, large = _DIVISOR_RANGE.get(self.dtype, _DIVISOR_RANGE["float32"])
            unbounded = np.zeros(np.shape(out.lo), bool)
            for end in (np.abs(b.lo), np.abs(b.hi)):
                unbounded |= ((end > 0) & (end < small)) | (np.isfinite(end) & (end > large))
            out = Interval(np.where(unbounded, -np.inf, out.lo), np.where(unbounded, np.inf, out.hi),
                           out.nan | unbounded)
        return out

    def floor(self, a: Interval) -> Interval:
        return self._map(np.floor, a)

    def clamp(self, a: Interval, low: float, high: float) -> Interval:
        """GLSL ``clamp``; of a NaN, NaN exactly, and either bound (or NaN) when ``nan_clamp`` is granted."""
        out = Interval(np.clip(a.lo, low, high), np.clip(a.hi, low, high), a.nan)
        if not (a.nan.any() and self._takes("nan_clamp")):
            return out
        return Interval(np.where(a.nan, low, out.lo), np.where(a.nan, high, out.hi), a.nan)

    def exp(self, a: Interval) -> Interval:
        ulps = self.column["exp"] + 2 * np.maximum(np.abs(a.lo), np.abs(a.hi))
        exact = self._map(np.exp, a)
        finite = lambda v, x: np.where(np.isinf(v) & np.isfinite(x), np.sign(v) * np.finfo(np.float64).max, v)
        exact = Interval(finite(exact.lo, a.lo), finite(exact.hi, a.hi), exact.nan)  # e^x of a finite x is finite
        return self._ulps(self._in_range(exact), np.nan_to_num(ulps, posinf=1e300), "exp")

    def _in_range(self, iv: Interval, half_ulp: bool = False, dtype: str | None = None) -> Interval:
        """A value as ``dtype`` holds it: a finite one past the range (by half an ULP, for a rounded result) is
        infinite, or under ``overflow`` the largest finite value or infinite; an infinite one stays infinite."""
        info = np.finfo(dtype or self.dtype)
        largest = float(info.max)
        top_ulp = largest - float(np.nextafter(info.max, info.max.dtype.type(0)))
        biggest = largest + (top_ulp / 2 if half_ulp else 0.0)
        past = (np.abs(iv.lo) > biggest) | (np.abs(iv.hi) > biggest)
        saturates = bool((past & np.isfinite(iv.lo) & np.isfinite(iv.hi)).any()) and self._takes("overflow")

        def held(v: np.ndarray, end: int) -> np.ndarray:
            out = np.where(v > biggest, np.inf, np.where(v < -biggest, -np.inf, v))
            if saturates:  # the low end of a positive overflow, the high end of a negative one, may be finite
                finite_past = np.isfinite(v) & (np.abs(v) > biggest)
                out = np.where(finite_past & ((v > 0) == (end == 0)), np.sign(v) * largest, out)
            return out
        return Interval(held(iv.lo, 0), held(iv.hi, 1), iv.nan)

    def store(self, iv: Interval, dtype: str) -> Interval:
        """The shader's result converted to the output's ``dtype`` (an image or buffer of another width)."""
        if str(np.dtype(dtype)) == self.dtype or np.dtype(dtype).kind != "f":
            return iv
        return self._in_range(iv, half_ulp=True, dtype=str(np.dtype(dtype)))

    def log(self, a: Interval) -> Interval:
        return self._log_widened(self._map(np.log, a), a)

    def _log_widened(self, exact: Interval, a: Interval) -> Interval:
        """``log`` or ``log2`` of ``a`` (``exact``) widened by the spec's bound for them."""
        if not self._takes("log"):
            return exact
        near_one = (a.lo >= 0.5) & (a.hi <= 2.0)
        widened = self._ulps(exact, 3.0, "log")
        err = self.column["log_abs"]
        return Interval(np.where(near_one, exact.lo - err, widened.lo), np.where(near_one, exact.hi + err, widened.hi),
                        exact.nan)

    def inversesqrt(self, a: Interval) -> Interval:
        with np.errstate(all="ignore"):
            exact = self._map(lambda v: 1.0 / np.sqrt(v), a, increasing=False)
        return self._ulps(exact, self.column["inversesqrt"], "inversesqrt")

    def sqrt(self, a: Interval) -> Interval:
        """Inherited from ``1.0 / inversesqrt(x)``."""
        return self.div(self.const(1.0, a), self.inversesqrt(a))

    def _trig(self, fn, a: Interval) -> Interval:
        """``sin`` or ``cos`` over an interval (its extremes where the interval holds one), widened by the spec."""
        with np.errstate(all="ignore"):
            lo, hi, nan = span(fn(a.lo), fn(a.hi))
            wide = (a.hi - a.lo) >= 2 * math.pi
        lo, hi = np.where(wide, -1.0, lo), np.where(wide, 1.0, hi)
        lo, hi = self._extremes(fn, a, lo, hi)
        out = Interval(lo, hi, a.nan | nan)
        if not self._takes("sin_cos"):
            return out
        err = self.column["sin_cos_abs"]
        inside = (a.lo >= -math.pi) & (a.hi <= math.pi)
        return Interval(np.where(inside, out.lo - err, -np.inf), np.where(inside, out.hi + err, np.inf),
                        out.nan | ~inside)

    @staticmethod
    def _extremes(fn, a: Interval, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where a narrow interval holds a peak or trough of ``fn``, the ±1 there."""
        if not (a.lo != a.hi).any():
            return lo, hi
        shift = 0.0 if fn is np.cos else math.pi / 2
        with np.errstate(all="ignore"):
            k_lo, k_hi = np.ceil((a.lo - shift) / math.pi), np.floor((a.hi - shift) / math.pi)
        has = np.isfinite(k_lo) & np.isfinite(k_hi) & (k_hi >= k_lo)
        even = has & ((k_hi > k_lo) | (np.mod(k_lo, 2) == 0))
        odd = has & ((k_hi > k_lo) | (np.mod(k_lo, 2) == 1))
        return np.where(odd, -1.0, lo), np.where(even, 1.0, hi)

    def sin(self, a: Interval) -> Interval:
        return self._trig(np.sin, a)

    def cos(self, a: Interval) -> Interval:
        return self._trig(np.cos, a)

    def tan(self, a: Interval) -> Interval:
        """Inherited from ``sin(x) / cos(x)``; exactly, ``tan`` itself."""
        if not ({"sin_cos", "division"} & self.grant):
            self.used.update(("sin_cos", "division"))
            return self._map(np.tan, a)
        return self.div(self.sin(a), self.cos(a))

    def tanh(self, a: Interval) -> Interval:
        """Inherited from ``(exp(x) - exp(-x)) / (exp(x) + exp(-x))``; exactly, ``tanh`` itself."""
        if not self._takes("tanh"):
            self.used.update(("exp", "division"))
            return self._map(np.tanh, a)
        up, down = self.result(self.exp(a)), self.result(self.exp(self.neg(a)))
        return self.div(self.result(self.sub(up, down)), self.result(self.add(up, down)))

    def pow(self, a: Interval, y: float) -> Interval:
        """``pow(a, y)`` of a positive ``a``, inherited from ``exp2(y * log2(a))`` (each builtin at its own precision);
        exactly, ``pow`` itself."""
        if not self._takes("pow"):
            with np.errstate(all="ignore"):
                return self._map(lambda v: np.power(v, y), a, increasing=y >= 0)
        inner = Spec(self.dtype, self.grant | {"exp", "log"})
        log2 = inner.result(inner._log_widened(inner._map(np.log2, a), a))
        power = inner.result(inner.scale(log2, y))
        exact = inner._map(np.exp2, power)
        ulps = inner.column["exp"] + 2 * np.maximum(np.abs(power.lo), np.abs(power.hi))
        return inner._ulps(inner._in_range(exact), np.nan_to_num(ulps, posinf=1e300), "exp")

    def pow_of(self, a: Interval, y: Interval) -> Interval:
        """GLSL ``pow(a, y)`` of interval operands: exactly, ``a ** y``; under ``pow``, inherited from
        ``exp2(y * log2(a))`` where ``a > 0``, and anything at all where GLSL leaves it undefined."""
        if not self._takes("pow"):
            with np.errstate(all="ignore"):
                lo, hi, nan = span(*(np.power(p, q) for p in (a.lo, a.hi) for q in (y.lo, y.hi)))
            return Interval(lo, hi, a.nan | y.nan | nan)
        inner = Spec(self.dtype, self.grant | {"exp", "log"})
        positive = Interval(np.where(a.lo > 0, a.lo, 1.0), np.where(a.hi > 0, a.hi, 1.0), a.nan)
        log2 = inner.result(inner._log_widened(inner._map(np.log2, positive), positive))
        power = inner.result(inner.mul(log2, y))
        ulps = inner.column["exp"] + 2 * np.maximum(np.abs(power.lo), np.abs(power.hi))
        out = inner._ulps(inner._in_range(inner._map(np.exp2, power)), np.nan_to_num(ulps, posinf=1e300), "exp")
        undefined = (a.lo < 0) | ((a.lo <= 0) & (y.lo <= 0))
        return Interval(np.where(undefined, -np.inf, out.lo), np.where(undefined, np.inf, out.hi),
                        out.nan | undefined | y.nan)

    def _min_max(self, fn, a: Interval, b: Interval) -> Interval:
        """``min``/``max``: NaN propagated exactly (as ATen), and under ``nan_min_max`` the other operand (or NaN)."""
        with np.errstate(invalid="ignore"):
            lo, hi = fn(a.lo, b.lo), fn(a.hi, b.hi)
        out = Interval(lo, hi, a.nan | b.nan | np.isnan(lo) | np.isnan(hi))
        either = a.nan | b.nan
        if not (either.any() and self._takes("nan_min_max")):
            return out
        other_lo = np.where(a.nan, b.lo, a.lo)
        other_hi = np.where(a.nan, b.hi, a.hi)
        return Interval(np.where(either, other_lo, out.lo), np.where(either, other_hi, out.hi), out.nan)

    def minimum(self, a: Interval, b: Interval) -> Interval:
        return self._min_max(np.minimum, a, b)

    def abs(self, a: Interval) -> Interval:
        straddles = (a.lo < 0) & (a.hi > 0)
        lo, hi, _ = span(np.abs(a.lo), np.abs(a.hi))
        return Interval(np.where(straddles, 0.0, lo), hi, a.nan)

    def round(self, a: Interval) -> Interval:
        """GLSL ``round``: exactly, half to even (as ATen); under ``round_half`` a half-way value either way."""
        exact = self._map(np.round, a)
        with np.errstate(invalid="ignore"):
            half = (np.abs(a.lo - np.trunc(a.lo)) == 0.5) | (np.abs(a.hi - np.trunc(a.hi)) == 0.5)
        if not (half.any() and self._takes("round_half")):
            return exact
        return Interval(np.where(half, np.floor(a.lo), exact.lo), np.where(half, np.ceil(a.hi), exact.hi), exact.nan)
