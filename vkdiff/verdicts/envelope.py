"""Judging a launch against its spec envelope: what any conformant device may give (``vkdiff.reference.spec``).

After the tolerance policy has judged a float output, the envelope refines the verdict:

* a band with a portability rule that reaches outside ATen's tolerance on this case's
  inputs makes the shader wrong on *some* conformant device: ``FAIL_PORTABILITY`` on every
  device, whatever this one computed (unless it failed past the envelope too);
* an output outside ATen's tolerance whose every stray element lies in a band the device
  takes is ``PASS``, flagged ``spec-allowed:<trait>`` (the probed trait that shows the
  liberty). A band whose liberty the device's own probe says it does not take (a device
  that keeps subnormals, divides correctly rounded, or adds separately) explains nothing;
* an output outside every band, where the declared formula is the whole shader and means
  ATen's op at those elements, is ``FAIL_DRIVER``: the device broke the spec's precision;
* otherwise a failure keeps the status of what no liberty explains: ``FAIL_NAN`` whose every NaN
  a liberty gives (tanh through exp) and whose other stray elements none does (the shader's own
  formula) is ``FAIL_NUMERIC``, as on a device that does not take the liberty.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import numpy as np

from vkdiff.datamodel import Status
from vkdiff.reference.spec.envelope import Band, Envelope
from vkdiff.reference.spec.precision import ulp
from vkdiff.verdicts.compare import over_bound

SPEC_ALLOWED_FLAG = "spec-allowed"
"""Flag prefix: ``spec-allowed:<trait>`` for each probed trait whose liberty explains a stray element."""

TRAIT_OF: dict[str, str] = {
    "division": "div_f32_max_ulp", "exp": "exp_max_ulp", "log": "log_max_ulp",
    "inversesqrt": "inversesqrt_max_ulp", "sin_cos": "sin_cos_max_abs", "tanh": "tanh_large",
    "subnormal_flush": "f32_denorm", "contraction": "fma", "nan_clamp": "nan_clamp", "overflow": "overflow",
    "pow": "pow_max_ulp", "reassociation": "reassociation", "relaxed_precision": "relaxed_precision_f16",
    "nan_min_max": "nan_min_max", "round_half": "round_half",
}
"""The probed trait (``vkdiff.device.runtime.trait_probes.TRAITS``) that shows each liberty on a device (``overflow``,
``reassociation``, ``round_half``: no probe yet; the flag names the liberty)."""

JUDGED = (Status.FAIL_NUMERIC, Status.FAIL_NAN)
"""Statuses the envelope may explain or sharpen (a shape, unwritten or sync failure is never a liberty)."""


def trait_of(liberty: str, compute: str) -> str:
    return "f16_denorm" if liberty == "subnormal_flush" and compute == "float16" else TRAIT_OF[liberty]


REFUSED_BY: dict[str, Callable[[Any, str], bool]] = {
    "subnormal_flush": lambda value, compute: value == "preserved",
    "division": lambda value, compute: (compute == "float32" and isinstance(value, (int, float))
                                        and not isinstance(value, bool) and value <= 0.5),
    "contraction": lambda value, compute: value == "separate",
    "tanh": lambda value, compute: value == "saturates to +-1",
    "nan_clamp": lambda value, compute: value == "returns NaN",
    "relaxed_precision": lambda value, compute: value is False,
    "nan_min_max": lambda value, compute: value == "returns NaN",
}
"""Per liberty, the probed value that says a device does not take it (the division probe measures float32 only).
A liberty not here, or a trait not measured, may be taken."""


def refuses(liberty: str, compute: str, traits: Mapping[str, Any] | None) -> bool:
    """Whether the device's own probe says it does not take ``liberty``."""
    if not isinstance(traits, Mapping) or liberty not in REFUSED_BY:
        return False
    return REFUSED_BY[liberty](traits.get(trait_of(liberty, compute)), compute)


@dataclasses.dataclass(kw_only=True)
class Judgement:
    status: Status
    reason: str = ""
    flags: list[str] = dataclasses.field(default_factory=list)
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)


def _reaches(band: Band, expected: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Elements where the band holds a value outside ATen's tolerance."""
    nan_out = band.nan & ~np.isnan(expected)
    number_out = np.zeros(expected.shape, bool)
    for end in (band.lo, band.hi):
        number_out |= ~np.isnan(end) & over_bound(end, expected, bound)
    return nan_out | number_out


def _inside(band: Band, values: np.ndarray, bound: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Elements of ``values`` inside the band, widened by the tolerance and by one step of the output's dtype at each
    end (the device rounds what it stores)."""
    with np.errstate(invalid="ignore", over="ignore"):
        lo = band.lo - np.maximum(bound, ulp(band.lo, dtype))
        hi = band.hi + np.maximum(bound, ulp(band.hi, dtype))
        numeric = (values >= lo) & (values <= hi)
    exact_end = (values == band.lo) | (values == band.hi)  # an infinite end (inf - its width is NaN)
    return numeric | exact_end | (np.isnan(values) & band.nan)


def _where(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(mask)[0]), mask.shape))


def _label(envelope: Envelope, at: tuple[int, ...]) -> str:
    """An element as a reason names it: its index, or for a tuple's outputs the output and its index."""
    return envelope.locate(at[0]) if envelope.parts else str(list(at))


def _span(band: Band, at: tuple[int, ...]) -> str:
    lo, hi = float(band.lo[at]), float(band.hi[at])
    values = f"{lo:.7g}" if lo == hi else f"[{lo:.7g}, {hi:.7g}]"
    return values + (" or NaN" if band.nan[at] else "")


def judge(status: Status, actual: np.ndarray, expected: np.ndarray, bound: np.ndarray, envelope: Envelope,
          compute: str, traits: Mapping[str, Any] | None) -> Judgement | None:
    """The refined verdict, or None when the envelope changes nothing; a failure it cannot explain keeps its status
    (and reason), with how many elements no liberty explains and any portability finding in its metrics."""
    a, e = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    if a.shape != e.shape or status not in (Status.PASS, *JUDGED):
        return None
    bound = np.where(np.isfinite(bound), bound, 0.0)  # no width around a NaN or an infinity
    # Where the declared formula itself leaves ATen's tolerance, the shader computes something else than ATen's op
    # there (its own bug): no liberty explains those elements, and none makes them a portability finding.
    faithful = ~over_bound(envelope.exact, e, bound)
    portable = [(b, reach) for b in envelope.bands if b.rule for reach in [_reaches(b, e, bound) & faithful]
                if reach.any()]
    over = over_bound(a, e, bound) if status is not Status.PASS else np.zeros(e.shape, bool)
    takes = [b for b in envelope.bands if not any(refuses(lib, compute, traits) for lib in b.liberties)]
    covered = np.zeros(e.shape, bool)
    used: list[Band] = []
    for band in sorted(takes, key=lambda b: len(b.liberties)):
        newly = over & ~covered & faithful & _inside(band, a, bound, np.asarray(actual).dtype)
        if newly.any():
            used.append(band)
            covered |= newly
    explained = bool((covered | ~over).all())
    metrics = {"source": envelope.source, "compute": compute,
               "liberties": sorted({lib for b in used for lib in b.liberties})}
    if portable:
        band, reach = min(portable, key=lambda p: len(p[0].liberties))
        at = _where(reach)
        metrics["portability"] = {"liberties": list(band.liberties), "rule": band.rule, "elements": int(reach.sum()),
                                  "index": list(at), "also": sorted({b.liberties[0] for b, _ in portable
                                                                     if len(b.liberties) == 1} - set(band.liberties))}
    if portable and (status is Status.PASS or explained):
        here = "this device is within tolerance" if status is Status.PASS else "this device takes it"
        also = metrics["portability"]["also"]
        return Judgement(status=Status.FAIL_PORTABILITY, metrics=metrics, reason=(
            f"{band.rule}. Under {' and '.join(band.liberties)} ({envelope.source}) {int(reach.sum())} of {e.size} "
            f"elements may leave ATen's tolerance: at {_label(envelope, at)} a conformant device may give "
            f"{_span(band, at)} where ATen gives {float(e[at]):.7g} (±{float(bound[at]):.3g}); {here}"
            + (f" (also under {', '.join(also)})" if also else "")))
    if status is Status.PASS:
        return None
    if explained:
        traits_used = sorted({trait_of(lib, compute) for b in used for lib in b.liberties})
        return Judgement(status=Status.PASS, flags=[f"{SPEC_ALLOWED_FLAG}:{t}" for t in traits_used], metrics=metrics)
    stray = over & ~covered
    counts = envelope.counts(stray)
    metrics["unexplained"] = counts if envelope.parts else counts[0]  # a tuple's per output, as the tolerance counts
    with np.errstate(invalid="ignore"):
        gaps = np.abs(a - e)[stray]
    gaps = gaps[np.isfinite(gaps)]  # as the tolerance's max_abs: a NaN or infinite element counts, its size does not
    metrics["unexplained_max_abs"] = float(gaps.max()) if gaps.size else 0.0
    if envelope.complete and (faithful | ~stray).all():
        at = _where(stray)
        widest = envelope.bands[-1] if envelope.bands else None
        allowed = _span(widest, at) if widest is not None else f"{float(e[at]):.7g}"
        return Judgement(status=Status.FAIL_DRIVER, metrics=metrics, reason=(
            f"outside what the Vulkan spec allows for {envelope.source}: {int(stray.sum())} of {e.size} elements; at "
            f"{_label(envelope, at)} the device gives {float(a[at]):.7g}, a conformant device {allowed} (ATen "
            f"{float(e[at]):.7g})"))
    nan_stray = np.isnan(a) & ~np.isnan(e)
    numeric_stray = stray & ~np.isnan(a) & ~np.isnan(e)  # a NaN lost (ATen's NaN, the device's number) is NaN's too
    if status is Status.FAIL_NAN and nan_stray.any() and (numeric_stray == stray).all():
        at = _where(stray)
        return Judgement(status=Status.FAIL_NUMERIC, metrics=metrics, reason=(
            f"Mismatched elements: {int(over.sum())} / {e.size} ({int(stray.sum())} leave ATen's tolerance where no "
            f"liberty explains them, first at {_label(envelope, at)}: {float(a[at]):.7g}, ATen {float(e[at]):.7g}; "
            f"the other {int(nan_stray.sum())} are NaN, what {' and '.join(metrics['liberties'])} may give: "
            f"{envelope.source})"))
    return Judgement(status=status, metrics=metrics)
