"""A case's spec envelope: per liberty, the results a conformant device may give, around ATen's reference.

The declared formula (``declarations``) is evaluated exactly and then under each liberty it
meets, alone and all together; each evaluation's departure from the exact one, added to
ATen's reference, is that liberty's band. Where the formula is not finite exactly, its
band is taken as it stands. An op with no declaration gets the one liberty every float op
has: subnormal operands and results read as zero (its reference on flushed operands).

Example::

    >>> import numpy as np
    >>> env = evaluate("aten.div.Tensor_mode", {"self": np.array([6.0, 7.0]), "other": np.array([3.0, 2.0]),
    ...                                          "rounding_mode": "floor"}, np.array([2.0, 3.0]), "binary_floor_divide_buffer")
    >>> [(b.liberties, b.lo.tolist()) for b in env.bands]
    [(('division',), [1.0, 3.0])]
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import numpy as np

from vkdiff.reference.spec.declarations import Declaration, declaration_for
from vkdiff.reference.spec.precision import Spec, flush_subnormals, span

__all__ = ["Band", "Envelope", "compute_dtype", "evaluate"]


@dataclasses.dataclass(frozen=True)
class Band:
    """What a device taking ``liberties`` may give, per element (float64; NaN where ``nan`` allows it)."""

    liberties: tuple[str, ...]
    lo: np.ndarray
    hi: np.ndarray
    nan: np.ndarray
    rule: str = ""
    """The portability rule the shader breaks under these liberties ("" where they are the device's to take)."""


@dataclasses.dataclass(frozen=True)
class Envelope:
    """Every band of one launch, and how far the declared formula itself is from ATen's reference."""

    bands: tuple[Band, ...]
    exact: np.ndarray
    """The declared formula evaluated exactly (float64), for telling a shader's own formula from a device's error."""
    source: str
    complete: bool
    parts: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """A tuple-returning op's outputs (name, shape), whose elements the bands hold one after another; empty for one
    output, whose shape the bands have."""

    def counts(self, mask: np.ndarray) -> list[int]:
        """How many elements of ``mask`` are set in each output (one count for one output)."""
        if not self.parts:
            return [int(np.count_nonzero(mask))]
        ends = np.cumsum([int(np.prod(shape)) for _, shape in self.parts])[:-1]
        return [int(np.count_nonzero(part)) for part in np.split(np.ravel(mask), ends)]

    def locate(self, flat: int) -> str:
        """Where element ``flat`` of the flattened outputs lies: ``rstd [1, 0]``."""
        for name, shape in self.parts:
            size = int(np.prod(shape))
            if flat < size:
                return f"{name} {[int(i) for i in np.unravel_index(flat, shape)]}".strip()
            flat -= size
        return str([flat])


def evaluate(op: str, args: Mapping[str, Any], expected: np.ndarray | tuple[np.ndarray, ...], variant: str,
             reference: Callable[..., Any] | None = None, stored: str | None = None,
             past_range: np.ndarray | None = None, relaxed: bool = False,
             flushed: Mapping[str, Any] | None = None) -> Envelope | None:
    """The envelope of ``op``'s launched ``variant`` on ``args`` (schema names), its result stored as ``stored``
    (default: the dtype it computes in), or None when no liberty can move it.

    A tuple of outputs (``expected``) has an envelope only where a witness declares the shader, which computes them
    all; ``reference`` (the op's reference function) is needed only where no declaration describes the variant;
    ``past_range`` marks elements whose finite reference ``expected`` holds as ±inf because ``stored`` cannot;
    ``relaxed``: the variant's SPIR-V has ``RelaxedPrecision`` values (GLSL ``mediump``), so a declared formula is
    also evaluated as a device computing them in float16 may (a witness runs as the shader's own types say);
    ``flushed``: ``flushed_reference`` already computed, by compute dtype (the reference thread computes it ahead).
    """
    declared = declaration_for(op, variant)
    compute = compute_dtype(declared, variant)
    if declared is not None and declared.witness is not None:
        return _witnessed(declared, args, expected, compute)
    if isinstance(expected, tuple):
        return None
    expected = np.asarray(expected, np.float64)
    if declared is None:
        return _undeclared(args, expected, compute, stored or compute, reference, past_range, flushed or {})
    stored = stored or compute
    exact_spec = Spec(compute)
    with np.errstate(all="ignore"):
        exact = np.broadcast_to(exact_spec.store(declared.formula(exact_spec, args), stored).point, expected.shape)
    liberties = sorted(exact_spec.used | ({"relaxed_precision"} if relaxed and compute == "float32" else set()))
    bands = []
    for grant in _grants(liberties):
        spec = Spec(compute, grant)
        with np.errstate(all="ignore"):
            iv = spec.store(declared.formula(spec, args), stored)
        lo, hi, nan = (np.broadcast_to(a, expected.shape) for a in (iv.lo, iv.hi, iv.nan))
        bands.append(_around(expected, exact, lo, hi, nan, grant, _rule(declared, grant)))
    return Envelope(bands=tuple(bands), exact=exact, source=declared.source, complete=declared.complete)


def compute_dtype(declared: Declaration | None, variant: str) -> str:
    """The dtype ``variant`` computes in (its declaration's, else float16 for a half variant)."""
    if declared is not None:
        return declared.compute(variant)
    return "float16" if "half" in variant.split("_") else "float32"


def _grants(liberties: list[str]) -> list[tuple[str, ...]]:
    """Each liberty alone, then all of them together."""
    return [(lib,) for lib in liberties] + ([tuple(liberties)] if len(liberties) > 1 else [])


RELAXED_RULE = ("the shader declares its arithmetic mediump (RelaxedPrecision), which a device may compute in float16 "
                "(a float32 computation is portable)")
"""Where a declaration says nothing of ``relaxed_precision``: the shader chose mediump, so the shader is at fault."""


def _rule(declared: Declaration, grant: tuple[str, ...]) -> str:
    rules = {"relaxed_precision": RELAXED_RULE, **declared.rules}
    return next((rules[lib] for lib in grant if lib in rules), "")


def _witnessed(declared: Declaration, args: Mapping[str, Any], expected: np.ndarray | tuple[np.ndarray, ...],
               compute: str) -> Envelope:
    """Bands between the shader as written and as devices taking each liberty run it; a tuple-returning op's outputs
    flattened into one (``Envelope.parts`` says where each lies)."""
    outputs = expected if isinstance(expected, tuple) else (expected,)
    flat = np.concatenate([np.asarray(e, np.float64).reshape(-1) for e in outputs])

    def run(grant: frozenset) -> list[np.ndarray]:
        found = declared.witness(args, compute, grant)
        evaluations = found if isinstance(found, list) else [found if isinstance(found, tuple) else (found,)]
        return [np.concatenate([np.reshape(o, np.shape(e)).reshape(-1) for o, e in zip(one, outputs)])
                for one in evaluations]

    base = run(frozenset())[0]
    # Where the shader as written is finite and ATen not, or the other way (its own overflow, its own answer for one
    # element), it means something else than ATen's op: no liberty speaks there.
    own = np.isfinite(base) != np.isfinite(flat)
    bands = []
    for grant in _grants(list(declared.liberties)):
        lo, hi, nan = span(base, *run(frozenset(grant)))
        lo, hi = np.where(own, flat, lo), np.where(own, flat, hi)
        nan = np.where(own, np.isnan(flat), nan)
        bands.append(_around(flat, base, lo, hi, nan, grant, _rule(declared, grant)))
    if not isinstance(expected, tuple):  # one output: the bands in its shape
        shape = np.shape(expected)
        bands = [dataclasses.replace(b, lo=b.lo.reshape(shape), hi=b.hi.reshape(shape), nan=b.nan.reshape(shape))
                 for b in bands]
        return Envelope(bands=tuple(bands), exact=base.reshape(shape), source=declared.source,
                        complete=declared.complete)
    parts = tuple((name, tuple(np.shape(e))) for name, e in zip(declared.outputs or ("",) * len(outputs), outputs))
    return Envelope(bands=tuple(bands), exact=base, source=declared.source, complete=declared.complete, parts=parts)


def _around(expected: np.ndarray, exact: np.ndarray, lo: np.ndarray, hi: np.ndarray, nan: np.ndarray,
            grant: tuple[str, ...], rule: str) -> Band:
    """The band a granted evaluation gives, moved onto ATen's reference where the exact formula is finite."""
    finite = np.isfinite(exact) & np.isfinite(expected)
    with np.errstate(all="ignore"):
        moved_lo = np.where(finite & np.isfinite(lo), expected + (lo - exact), lo)
        moved_hi = np.where(finite & np.isfinite(hi), expected + (hi - exact), hi)
    return Band(liberties=grant, lo=moved_lo, hi=moved_hi, nan=np.asarray(nan, bool) | np.isnan(expected), rule=rule)


def _undeclared(args: Mapping[str, Any], expected: np.ndarray, compute: str, stored: str,
                reference: Callable[..., Any] | None, past_range: np.ndarray | None,
                flushed: Mapping[str, Any]) -> Envelope | None:
    """What the spec grants every float op, whatever its shader computes: subnormal operands and results read as zero
    (its reference on flushed operands), and a finite result past the stored dtype's range converted to its largest
    finite value or to infinity."""
    bands = [band for band in (_flushed(args, expected, compute, reference, flushed),
                               _overflowed(expected, stored, past_range)) if band is not None]
    if not bands:
        return None
    return Envelope(bands=tuple(bands), exact=expected, complete=False,
                    source="the op's reference: flushed operands, overflowing results converted")


def _subnormal(value: Any, compute: str) -> bool:
    """An array of floats holding a value below ``compute``'s smallest normal (zero aside)."""
    tiny = float(np.finfo(compute).tiny)
    return isinstance(value, np.ndarray) and value.dtype.kind == "f" and bool(
        ((value != 0) & (np.abs(value) < tiny)).any())


def flushed_reference(args: Mapping[str, Any], compute: str, reference: Callable[..., Any] | None) -> Any:
    """``reference`` on ``args`` with every operand's subnormals (in ``compute``) read as zero, as a device flushing
    them computes; None when no operand has one (or there is no reference)."""
    if reference is None or not any(_subnormal(v, compute) for v in args.values()):
        return None
    flushed = {k: flush_subnormals(v, compute).astype(v.dtype) if _subnormal(v, compute) else v
               for k, v in args.items()}
    with np.errstate(all="ignore"):
        return reference(**flushed)


def _flushed(args: Mapping[str, Any], expected: np.ndarray, compute: str, reference: Callable[..., Any] | None,
             known: Mapping[str, Any]) -> Band | None:
    other = known[compute] if compute in known else flushed_reference(args, compute, reference)
    if other is None and not _subnormal(expected, compute):
        return None
    candidates = [expected, flush_subnormals(expected, compute)]
    if isinstance(other, np.ndarray) and other.shape == expected.shape:
        candidates.append(np.asarray(other, np.float64))
    lo, hi, nan = span(*candidates)
    return Band(liberties=("subnormal_flush",), lo=lo, hi=hi, nan=nan)


def _overflowed(expected: np.ndarray, stored: str, past_range: np.ndarray | None) -> Band | None:
    if np.dtype(stored).kind != "f":
        return None
    largest = float(np.finfo(stored).max)
    with np.errstate(invalid="ignore"):
        past = np.isfinite(expected) & (np.abs(expected) > largest)
    if past_range is not None and np.shape(past_range) == expected.shape:
        past = past | past_range
    if not past.any():
        return None
    lo = np.where(past & (expected > 0), largest, np.where(past, -np.inf, expected))
    hi = np.where(past & (expected < 0), -largest, np.where(past, np.inf, expected))
    return Band(liberties=("overflow",), lo=lo, hi=hi, nan=np.isnan(expected))
