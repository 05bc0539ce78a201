"""The references a kernel case is judged against, computed before judging: seeded arguments, the float64
reference output, its tolerance, and (for a launch) the reference with the launched variant's rounding and
the outputs a correct device may give instead (contraction models).

Nothing here judges (``vkdiff.verdicts.kernels`` does). References are prepared once per
data id and shared by every device; ``prepared_stream`` computes the next ones on worker
threads while the device runs the current case.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import os
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Iterator, Sequence

import numpy as np

from vkdiff import reference
from vkdiff.cases.kernels import KernelCase, suite_of
from vkdiff.datamodel import FMA_MODELS, Arithmetic, Tolerance
from vkdiff.reference.ops import EXACT_OPS
from vkdiff.reference.spec.declarations import declaration_for
from vkdiff.reference.spec.envelope import Envelope
from vkdiff.reference.spec.envelope import compute_dtype as declared_compute
from vkdiff.reference.spec.envelope import evaluate as evaluate_envelope
from vkdiff.reference.spec.envelope import flushed_reference

Models = dict[str, tuple[np.ndarray, np.ndarray]]
"""``fma`` model name → (accumulator value before the store, slack) of a reference with a kernel's rounding."""

PREPARE_BLAS_THREADS = 1
"""BLAS threads for preparing references: float64 matmuls of kernel cases are small, and an
OpenBLAS pool per process spins every core (16 xdist workers × 16 threads on a GPU runner)."""


@dataclasses.dataclass(kw_only=True)
class Prepared:
    """A case's arguments and its expected output, computed once per data id."""

    args: dict[str, Any]
    """The op's arguments by schema name, as the launcher receives them."""
    expected: np.ndarray | tuple[np.ndarray, ...]
    """float64 reference output (a tuple for tuple-returning ops)."""
    magnitude: np.ndarray | None
    """Sum of absolute terms per output element (accumulation-aware tolerance)."""
    tolerance: Tolerance | tuple[Tolerance, ...]
    """Policy row for the output (per output of a tuple: its dtype's row, integers exact)."""
    past_range: np.ndarray | None = None
    """Elements whose finite reference the output dtype cannot hold, made ±inf in ``expected`` (None: none)."""
    emulations: dict[Arithmetic, Models | None] = dataclasses.field(default_factory=dict)
    """The reference with each declared arithmetic met so far (None: the op has no emulation)."""
    smaller: dict[str, "Prepared"] = dataclasses.field(default_factory=dict)
    """The references of the case's smaller runs by data id, computed ahead with ``smaller_constants`` kept
    (``prepare_smaller``); a smaller run not here is computed when it runs."""
    smaller_constants: frozenset[str] = frozenset()
    envelopes: dict[str, Envelope | None] = dataclasses.field(default_factory=dict)
    """The spec envelope per launched variant (``:relaxed`` appended where its SPIR-V is mediump; None: no liberty
    can move the output)."""
    flushed: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The reference on operands with their subnormals read as zero (``flushed_reference``), by compute dtype:
    computed here for the case's own dtype, which the envelope of most variants needs (one more reference)."""


@functools.lru_cache(maxsize=None)
def _blas_controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def capped_blas() -> contextlib.AbstractContextManager:
    """Limit numpy's BLAS to ``PREPARE_BLAS_THREADS`` threads inside the block."""
    return _blas_controller().limit(limits=PREPARE_BLAS_THREADS, user_api="blas")


def prepare_case(case: KernelCase, session_seed: int = 0) -> Prepared:
    """Seeded arguments and the reference output of a case; computed once and shared by every device."""
    return prepared_for(case, suite_of(case).make_args(case, np.random.default_rng(case.seed(session_seed))))


def prepared_for(case: KernelCase, args: dict[str, Any]) -> Prepared:
    """The reference output of ``case``'s op on ``args``, with its tolerance."""
    with capped_blas():
        expected, magnitude = reference.evaluate_with_magnitude(case.op, args)
    if isinstance(expected, tuple):
        tolerance = tuple(Tolerance.for_dtype(np.asarray(e).dtype if np.asarray(e).dtype.kind in "iub"
                                              else case.np_dtype) for e in expected)
        expected = tuple(np.asarray(e, np.float64) if np.asarray(e).dtype.kind == "f" else np.asarray(e)
                         for e in expected)
        return Prepared(args=args, expected=expected, magnitude=magnitude, tolerance=tolerance)
    exact = case.op in EXACT_OPS or np.asarray(expected).dtype.kind in "iub"  # copies, conversions, int outputs
    expected, past_range = overflowed(expected, case.np_dtype)
    return Prepared(args=args, expected=expected, magnitude=magnitude, past_range=past_range,
                    tolerance=Tolerance() if exact else Tolerance.for_dtype(case.np_dtype),
                    flushed=_flushed_ahead(case, args, expected))


def _flushed_ahead(case: KernelCase, args: dict[str, Any], expected: np.ndarray) -> dict[str, Any]:
    """``flushed_reference`` in the case's dtype, for a float output (what ``envelope`` would compute on the device's
    thread); empty for other outputs or dtypes."""
    compute = np.dtype(case.np_dtype).name
    if np.asarray(expected).dtype.kind != "f" or compute not in ("float16", "float32") or case.op not in reference.OPS:
        return {}
    with capped_blas():
        return {compute: flushed_reference(args, compute, reference.OPS[case.op].fn)}


def overflowed(expected: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray | None]:
    """The float64 reference with values past ``dtype``'s range made ±inf, as ATen computing in that dtype gives them
    (``exp(300)`` is inf in float32), and where that was done (None: nowhere). A kernel storing a finite value there
    is judged by the spec envelope: Vulkan's conversion may give the largest finite value instead."""
    if np.dtype(dtype).kind != "f":
        return expected, None
    with np.errstate(over="ignore", invalid="ignore"):
        cast = np.asarray(expected).astype(dtype)
    beyond = np.isinf(cast) & np.isfinite(expected)
    return (np.where(beyond, cast.astype(np.float64), expected), beyond) if beyond.any() else (expected, None)


def smaller_args(small: KernelCase, prepared: Prepared, constants: frozenset[str], session_seed: int) -> dict[str, Any]:
    """A smaller run's arguments: its own draw, with the graph's constants kept from the case's (a built graph is
    resized, its prepacked constants stay)."""
    drawn = suite_of(small).make_args(small, np.random.default_rng(small.seed(session_seed)))
    return {name: prepared.args[name] if name in constants else value for name, value in drawn.items()}


def prepare_smaller(case: KernelCase, prepared: Prepared, session_seed: int) -> None:
    """The smaller runs' references into ``prepared.smaller``, where every launcher of the op keeps the same
    constants (else, or where one raises, they are computed when they run, which reports why)."""
    from vkdiff.cases.kernels import below_bound
    from vkdiff.device.launchers.registry import LAUNCHERS

    kept = {launcher.constants for launcher in LAUNCHERS.get(case.op, [])}
    if len(kept) != 1:
        return
    prepared.smaller_constants = constants = kept.pop()
    for small in below_bound(case):
        try:
            prepared.smaller[small.data_id] = prepared_for(small, smaller_args(small, prepared, constants,
                                                                               session_seed))
        except Exception:  # the smaller run computes it again and records why
            return


def prepare_or_none(case: KernelCase, session_seed: int = 0) -> Prepared | None:
    """``prepare_case``, or None when it raises: ``run_kernel`` then prepares again and the verdict records why."""
    try:
        return prepare_case(case, session_seed)
    except Exception:  # the case's own run turns this into its status
        return None


@dataclasses.dataclass
class Overlap:
    """How reference preparation overlapped device work in this process (``benchmarks/bench_overlap.py``)."""

    preparing: float = 0.0
    """Seconds the preparation thread spent computing references."""
    waited: float = 0.0
    """Seconds the device loop waited for a reference not yet ready: the device idle because of references."""
    prepared: int = 0


PREPARE_THREADS = max(1, min(4, (os.cpu_count() or 1) // 4))
"""Threads preparing references (each with BLAS capped at one thread): a run of 4096×4096 linears needs more than
one to stay ahead of a fast GPU; a 2-core machine keeps one."""
AHEAD = 32
"""Data ids prepared ahead of the device. A 4096×4096 4-bit linear's reference takes 0.5-0.9 s: with 2 ahead and
one thread the H100 waited 9% of a sampled run for references, with 32 ahead and 4 threads 0.0% of the full
suite (``benchmarks/bench_overlap.py``)."""

OVERLAP = Overlap()
"""Totals over every ``prepared_stream`` of the process."""
_OVERLAP_LOCK = threading.Lock()


def _timed_prepare(case: KernelCase, session_seed: int) -> Prepared | None:
    tick = time.perf_counter()
    try:
        prepared = prepare_or_none(case, session_seed)
        if prepared is not None:
            prepare_smaller(case, prepared, session_seed)
        return prepared
    finally:
        with _OVERLAP_LOCK:
            OVERLAP.preparing += time.perf_counter() - tick
            OVERLAP.prepared += 1


def prepared_stream(cases: Sequence[KernelCase], session_seed: int = 0,
                    ahead: int = AHEAD) -> Iterator[tuple[KernelCase, Prepared | None]]:
    """Each case with its arguments and reference, prepared once per data id, ``ahead`` data ids in advance.

    Preparation runs on ``PREPARE_THREADS`` worker threads: numpy's BLAS and ufuncs and wgpu's
    native calls release the GIL, so the next references are computed while the device runs the
    current case; cases are yielded in order. A preparation that raised yields None (see ``prepare_or_none``).
    """
    groups = iter([list(group) for _, group in itertools.groupby(cases, key=lambda c: c.data_id)])
    with ThreadPoolExecutor(max_workers=PREPARE_THREADS, thread_name_prefix="vkdiff-prepare") as pool:
        queue: deque[tuple[list[KernelCase], Future]] = deque()

        def submit_next() -> None:
            group = next(groups, None)
            if group is not None:
                queue.append((group, pool.submit(_timed_prepare, group[0], session_seed)))

        for _ in range(ahead + 1):
            submit_next()
        while queue:
            group, future = queue.popleft()
            submit_next()
            tick = time.perf_counter()
            prepared = future.result()
            OVERLAP.waited += time.perf_counter() - tick
            for case in group:
                yield case, prepared


def emulation(op: str, prepared: Prepared, arithmetic: Arithmetic | None) -> Models | None:
    """The reference with a launched variant's rounding under each ``fma`` model (once per arithmetic; from
    ``prepared.args``, the true arguments), or None when the variant declares none or the op has no emulation."""
    if arithmetic is None or isinstance(prepared.expected, tuple):
        return None
    if arithmetic not in prepared.emulations:
        fmas = FMA_MODELS if arithmetic.accumulate != "float32" else ("fused",)
        models: Models = {}
        with capped_blas():
            for fma in fmas:
                got = reference.emulate(op, prepared.args, accumulate=arithmetic.accumulate, lanes=arithmetic.lanes,
                                        fused=fma == "fused", weight_only=arithmetic.weight_only)
                if got is None:
                    break
                models[fma if len(fmas) > 1 else "any"] = got
        prepared.emulations[arithmetic] = models or None
    return prepared.emulations[arithmetic]


def contractions(op: str, prepared: Prepared, output: Any) -> dict[str, np.ndarray]:
    """The outputs a correct device may give instead of the reference's integer output (``reference.contracted``:
    a compiler fusing a multiply into an add), by model name; none for a float or tuple output."""
    if isinstance(output, tuple) or np.asarray(output).dtype.kind not in "iu":
        return {}
    with capped_blas():
        return reference.contracted(op, prepared.args)


def compute_dtype(op: str, variant: str) -> str:
    """The dtype the launched variant computes in (its declaration's, else float16 for a half variant)."""
    return declared_compute(declaration_for(op, variant), variant)


def envelope(op: str, prepared: Prepared, variant: str, output: Any, relaxed: bool = False) -> Envelope | None:
    """The spec envelope of a float output, or of a tuple of them where a witness declares the shader
    (``vkdiff.reference.spec``), once per launched variant; None for an integer output, or where no liberty the spec
    grants can move it."""
    outputs = output if isinstance(output, tuple) else (output,)
    if any(np.asarray(o).dtype.kind != "f" for o in outputs) or isinstance(output, tuple) != isinstance(
            prepared.expected, tuple):
        return None
    key = f"{variant}:relaxed" if relaxed else variant
    if key not in prepared.envelopes:
        fn = reference.OPS[op].fn if op in reference.OPS else None
        with np.errstate(all="ignore"):
            prepared.envelopes[key] = evaluate_envelope(op, prepared.args, prepared.expected, variant, fn,
                                                        stored=np.asarray(outputs[0]).dtype.name,
                                                        past_range=prepared.past_range, relaxed=relaxed,
                                                        flushed=prepared.flushed)
    return prepared.envelopes[key]
