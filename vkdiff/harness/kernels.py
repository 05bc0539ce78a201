"""Running kernel cases: seeded arguments → numpy reference → ET-VK launcher → comparison → Result.

Nothing here knows an op: the case's suite draws its arguments by schema name
(``vkdiff.cases.kernels``), ``vkdiff.reference`` computes the expected output of the op
of the same name, and the launcher registered under that name runs it
(``vkdiff.device.launchers``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import os
import threading
import time
import traceback
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Iterator, Sequence

import numpy as np

from vkdiff import reference
from vkdiff.reference.ops import EXACT_OPS
from vkdiff.cases.kernels import KernelCase, below_bound, suite_of
from vkdiff.device.boundary import is_device_lost
from vkdiff.device.context import DeviceContext
from vkdiff.device.graph import Launch
from vkdiff.executors.op_graph import OpGraph, ResizeError
from vkdiff.device.layouts import unwritten_mask
from vkdiff.verdicts.compare import Emulated, ErrorStatistics
from vkdiff.verdicts.program import PORT_STALE_FLAG
from vkdiff.verdicts.statuses import status_of_exception
from vkdiff.datamodel import DEVICE_LOST_FLAG, FMA_MODELS, Arithmetic, Result, Status, Tolerance, versions

UNMODELLED_FLAG = "unmodelled-arithmetic"
CONTRACTED_FLAG = "fma-contracted"
"""An integer output that follows one of the op's contraction models, not the reference's own rounding order."""
"""The variant declares its float16 arithmetic but the device computes in another order: only the tolerance
policy judged the output, which misses single wrong codes there (``vkdiff.verdicts.compare._followed``)."""

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
    emulations: dict[Arithmetic, Emulated | None] = dataclasses.field(default_factory=dict)
    """The reference with each declared arithmetic met so far (None: the op has no emulation)."""


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
    return Prepared(args=args, expected=overflowed(expected, case.np_dtype), magnitude=magnitude,
                    tolerance=Tolerance() if exact else Tolerance.for_dtype(case.np_dtype))


def overflowed(expected: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The float64 reference with values past ``dtype``'s range made ±inf, as ATen computing in that dtype
    gives them (``exp(300)`` is inf in float32): a kernel storing a finite value there is wrong."""
    if np.dtype(dtype).kind != "f":
        return expected
    with np.errstate(over="ignore", invalid="ignore"):
        cast = np.asarray(expected).astype(dtype)
    beyond = np.isinf(cast) & np.isfinite(expected)
    return np.where(beyond, cast.astype(np.float64), expected) if beyond.any() else expected


def prepare_or_none(case: KernelCase, session_seed: int = 0) -> Prepared | None:
    """``prepare_case``, or None when it raises: ``run_case`` then prepares again and records the failure."""
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
        return prepare_or_none(case, session_seed)
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


def base_result(case: KernelCase, device: str, status: Status, **fields: Any) -> Result:
    """A result of ``case`` on ``device`` with the case's identity filled in."""
    return Result(case=case.id, op=case.op, variant=case.variant, knobs=case.knobs, shape=case.sizes,
                  device=device, status=status.name, versions={**versions(), **fields.pop("versions", {})}, **fields)


def launch(ctx: DeviceContext, case: KernelCase, prepared: Prepared) -> Launch:
    """Run the case's op through its registered launcher on ``ctx``."""
    return build(ctx, case, prepared).launch()


def build(ctx: DeviceContext, case: KernelCase, prepared: Prepared) -> OpGraph:
    """The case's one-op graph, built for its own sizes (the upper bound of its smaller runs)."""
    return OpGraph(ctx, case.op, prepared.args, storage=case.storage, layout=case.layout, dtype=case.np_dtype,
                   **dict(case.options))


def check_below_bound(result: Result, graph: OpGraph, case: KernelCase, prepared: Prepared,
                      session_seed: int = 0) -> None:
    """Run the graph built for ``case`` again at each smaller size (``below_bound``), resized as ET-VK's
    backend does; the output sizes its resize functions give and the values are both checked.

    Each smaller run draws its own graph inputs and keeps the built constants and scalars. The
    first failure becomes the result's status; every run is listed in ``metrics["below_bound"]``.
    """
    runs = []
    for small in below_bound(case):
        drawn = suite_of(small).make_args(small, np.random.default_rng(small.seed(session_seed)))
        args = {name: prepared.args[name] if name in graph.launcher.constants else value
                for name, value in drawn.items()}
        expected = prepared_for(small, args)
        try:
            graph.resize(expected.args)
        except ResizeError:
            raise
        except Exception as exc:  # the op's own resize function threw (ET-VK's host code at execute)
            status, message = status_of_exception(exc)
            runs.append({"sizes": small.sizes, "status": status.name, "reason": message})
            if result.status == Status.PASS.name:
                result.status = status.name
                result.reason = f"below the bound: {small.id} on the graph built for {case.id}: {message}"
            break
        wanted = [tuple(np.shape(e)) for e in _outputs(expected.expected)]
        if graph.output_sizes != wanted:
            status = Status.FAIL_CHECK
            message = (f"output sizes {_listed(graph.output_sizes)} after resize, expected {_listed(wanted)} "
                       f"(the op's resize function did not follow its inputs)")
        else:
            launched = graph.launch()
            stats, _ = _statistics(launched, expected, case.op)
            status, message = stats.status(), stats.message()
            if status is Status.FAIL_NUMERIC and contraction_followed(launched, expected, case.op):
                status = Status.PASS
        runs.append({"sizes": small.sizes, "status": status.name, **({"reason": message} if status.is_failure()
                                                                         else {})})
        if status.is_failure() and result.status == Status.PASS.name:
            result.status = status.name
            result.reason = f"below the bound: {small.id} on the graph built for {case.id}: {message}"
    if runs:
        result.metrics["below_bound"] = runs


def _listed(sizes: Sequence[tuple[int, ...]]) -> str:
    return ", ".join(str(list(s)) for s in sizes)


def run_case(ctx: DeviceContext, case: KernelCase, *, session_seed: int = 0, repeat: int = 1,
             repro: str = "", prepared: Prepared | None = None) -> Result:
    """Run one kernel case on one device; never raises (failures become statuses).

    Args:
        prepared (Prepared | None): the case's arguments and reference, when already computed.
    """
    start = time.perf_counter()
    result = base_result(case, ctx.info.slug, Status.ERROR, seed=case.seed(session_seed), repro=repro,
                         device_info=ctx.info_dict, versions={"et_tree": ctx.builder.tree})
    try:
        prepared = prepared or prepare_case(case, session_seed)
        graph = build(ctx, case, prepared)
        first = graph.launch()
        record_launch(result, first, prepared)
        if result.status == Status.PASS.name:
            check_below_bound(result, graph, case, prepared, session_seed)
        for run in range(2, repeat + 1):
            differing = differing_elements(first.output, launch(ctx, case, prepared).output)
            if differing:
                total = sum(np.size(o) for o in _outputs(first.output))
                alone, result.status = result.status, Status.NONDETERMINISTIC.name
                result.reason = (f"run {run} of {repeat} differs bitwise from run 1 in {differing} of {total} output "
                                 f"elements (run 1 alone: {alone})")
                result.metrics["nondeterministic"] = {"run": run, "differing": differing, "total": total,
                                                      "first_run_status": alone}
                break
    except Exception as exc:  # every failure becomes a status; the run goes on
        status, reason = status_of_exception(exc)
        result.status, result.reason = status.name, reason
        result.shader = result.shader or getattr(exc, "shader", "") or ""
        if status is Status.ERROR:
            result.traceback = "".join(traceback.format_exception(exc))
        if is_device_lost(exc):
            result.flags = [*result.flags, DEVICE_LOST_FLAG]
    result.seconds = round(time.perf_counter() - start, 4)
    return result


def _outputs(output: Any) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(o) for o in output) if isinstance(output, tuple) else (np.asarray(output),)


def differing_elements(a: Any, b: Any) -> int:
    """Elements whose bits differ between two runs' outputs (NaN payloads included; shapes must agree)."""
    count = 0
    for x, y in zip(_outputs(a), _outputs(b)):
        x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return max(x.size, y.size)
        bits = x.view(np.uint8).reshape(x.size, -1) != y.view(np.uint8).reshape(y.size, -1)
        count += int(bits.any(axis=1).sum())
    return count


def emulated(op: str, prepared: Prepared, arithmetic: Arithmetic | None, dtype: Any) -> Emulated | None:
    """The reference with the launched variant's rounding (once per arithmetic; from ``prepared.args``, the true
    arguments), or None when the variant declares none or the op has no emulation."""
    if arithmetic is None or isinstance(prepared.expected, tuple):
        return None
    if arithmetic not in prepared.emulations:
        fmas = FMA_MODELS if arithmetic.accumulate != "float32" else ("fused",)
        models: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        with capped_blas():
            for fma in fmas:
                got = reference.emulate(op, prepared.args, accumulate=arithmetic.accumulate, lanes=arithmetic.lanes,
                                        fused=fma == "fused", weight_only=arithmetic.weight_only)
                if got is None:
                    break
                models[fma if len(fmas) > 1 else "any"] = got
        prepared.emulations[arithmetic] = (Emulated(models=models, dtype=np.dtype(dtype).name,
                                                    arithmetic=arithmetic.describe()) if models else None)
    return prepared.emulations[arithmetic]


def _statistics(launched: Launch, prepared: Prepared, op: str) -> tuple[ErrorStatistics, list[dict[str, Any]]]:
    """The worst output's statistics, and every output's when the op returns a tuple."""
    if not isinstance(launched.output, tuple):
        model = emulated(op, prepared, launched.arithmetic, np.asarray(launched.output).dtype)
        return ErrorStatistics.from_arrays(launched.output, prepared.expected, prepared.tolerance,
                                           prepared.magnitude, unwritten_mask(launched.output), model), []
    magnitudes = prepared.magnitude or (None,) * len(launched.output)
    each = [ErrorStatistics.from_arrays(np.asarray(out), np.asarray(exp).reshape(np.shape(out)), tol,
                                        None if mag is None else np.asarray(mag).reshape(np.shape(out)),
                                        unwritten_mask(out))
            for out, exp, tol, mag in zip(launched.output, prepared.expected, prepared.tolerance, magnitudes)]
    worst = max(each, key=lambda st: (st.status().is_failure(), st.status()))
    return worst, [st.to_dict() for st in each]


def contraction_followed(launched: Launch, prepared: Prepared, op: str) -> str | None:
    """The contraction model (``reference.contracted``) an integer output equals entirely, or None."""
    output = launched.output
    if isinstance(output, tuple) or np.asarray(output).dtype.kind not in "iu":
        return None
    with capped_blas():
        models = reference.contracted(op, prepared.args)
    return next((name for name, codes in models.items() if np.array_equal(np.asarray(output), codes)), None)


def record_launch(result: Result, launched: Launch, prepared: Prepared) -> None:
    """Compare a launch's output(s) with the reference and write the verdict and evidence into ``result``.

    An integer output that differs from the reference but equals one of the op's contraction models entirely
    (a compiler fused a multiply into an add, which Vulkan allows) passes, flagged ``fma-contracted``."""
    stats, outputs = _statistics(launched, prepared, result.op)
    status = stats.status()
    contraction = contraction_followed(launched, prepared, result.op) if status is Status.FAIL_NUMERIC else None
    if contraction:
        status = Status.PASS
    result.status = status.name
    result.reason = "" if status is Status.PASS else stats.message()
    result.shader, result.shaders = launched.variant, list(launched.shaders)
    tolerances = prepared.tolerance if isinstance(prepared.tolerance, tuple) else (prepared.tolerance,)
    result.metrics, result.tolerance = stats.to_dict(), tolerances[0].to_dict()
    if outputs:
        result.metrics["outputs"] = outputs
    result.flags = (["polyfilled"] if launched.polyfilled else []) + (["inf-clamped"] if launched.clamped else []) + (
        [PORT_STALE_FLAG] if launched.stale else []) + (
        [UNMODELLED_FLAG] if stats.arithmetic and not stats.arithmetic["followed"] else []) + (
        [CONTRACTED_FLAG] if contraction else [])
    if contraction:
        result.metrics["contraction"] = contraction
    if launched.stale:
        result.metrics["port_stale"] = launched.stale
    result.dispatch = {k: list(v) if isinstance(v, tuple) else v for k, v in launched.dispatch.items()}
