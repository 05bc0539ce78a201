"""The verdict on a kernel case's run: its launch against the references, below the bound, and repeated.

In order, as a run goes: an exception before the first launch gives its status
(``statuses.status_of_exception``); else the first launch's numbers do (``compare``), an
integer output that equals one of the op's contraction models entirely passing, flagged
``fma-contracted`` (a compiler fused a multiply into an add, which Vulkan allows), then the
spec envelope's verdict (``vkdiff.verdicts.envelope``); a passing launch, or a portability
finding, is then held to every smaller run on its graph (the first failure becomes the
status, a failure on this device over a portability finding; every run is listed in
``metrics["below_bound"]``); and a repeat whose bits
differ from the first run makes it ``NONDETERMINISTIC``.
"""

from __future__ import annotations

import traceback
from typing import Any, Sequence

import numpy as np

from vkdiff.datamodel import DEVICE_LOST_FLAG, Result, Status
from vkdiff.device.boundary import is_device_lost
from vkdiff.device.runtime.layouts import unwritten_mask
from vkdiff.executors.kernel import Checked, KernelRun, Smaller
from vkdiff.verdicts import envelope as spec_envelope
from vkdiff.verdicts.compare import Emulated, ErrorStatistics, zero_sign_differs
from vkdiff.verdicts.program import INF_CLAMPED_FLAG, PORT_STALE_FLAG
from vkdiff.verdicts.statuses import status_of_exception

UNMODELLED_FLAG = "unmodelled-arithmetic"
"""The variant declares its float16 arithmetic but the device computes in another order: only the tolerance
policy judged the output, which misses single wrong codes there (``vkdiff.verdicts.compare._followed``)."""
CONTRACTED_FLAG = "fma-contracted"
"""An integer output that follows one of the op's contraction models, not the reference's own rounding order."""


def judge_kernel(result: Result, run: KernelRun) -> None:
    """Write the verdict on ``run`` and its evidence into ``result`` (a fault in judging is ``ERROR``: never raises)."""
    try:
        _judge(result, run)
    except Exception as exc:  # a verdict bug must not abort the run
        apply_exception(result, exc)


def _judge(result: Result, run: KernelRun) -> None:
    if run.first is None:
        apply_exception(result, run.error)
        return
    record_launch(result, run.first)
    if result.status in (Status.PASS.name, Status.FAIL_PORTABILITY.name):
        judge_smaller(result, run.smaller, run.case.id)
        if run.smaller_error is not None:
            apply_exception(result, run.smaller_error)
            return
    for again in run.repeats:
        if again.error is not None:
            apply_exception(result, again.error)
            return
        if again.differing:
            alone, result.status = result.status, Status.NONDETERMINISTIC.name
            result.reason = (f"run {again.run} of {run.repeat} differs bitwise from run 1 in {again.differing} of "
                             f"{again.total} output elements (run 1 alone: {alone})")
            result.metrics["nondeterministic"] = {"run": again.run, "differing": again.differing,
                                                  "total": again.total, "first_run_status": alone}
            return


def apply_exception(result: Result, exc: Exception) -> None:
    """The status an exception maps to, with its shader, traceback (for ``ERROR``) and device-lost flag."""
    status, reason = status_of_exception(exc)
    result.status, result.reason = status.name, reason
    result.shader = result.shader or getattr(exc, "shader", "") or ""
    if status is Status.ERROR:
        result.traceback = "".join(traceback.format_exception(exc))
    if is_device_lost(exc):
        result.flags = [*result.flags, DEVICE_LOST_FLAG]


def judge_smaller(result: Result, smaller: Sequence[Smaller], case_id: str) -> None:
    """Each run below the bound: its output sizes after resize, then its values (and its spec envelope). The first
    failure becomes the result's status; every run is listed in ``metrics["below_bound"]``."""
    traits = (result.device_info or {}).get("traits")
    runs = []
    for entry in smaller:
        if entry.resize_error is not None:
            status, message = status_of_exception(entry.resize_error)
        elif entry.run is None:
            status = Status.FAIL_CHECK
            message = (f"output sizes {_listed(entry.output_sizes)} after resize, expected {_listed(entry.wanted)} "
                       f"(the op's resize function did not follow its inputs)")
        else:
            stats, _ = statistics(entry.run)
            status, message = stats.status(), stats.message()
            if status is Status.FAIL_NUMERIC and contraction_followed(entry.run):
                status = Status.PASS
            refined = within_envelope(status, entry.run, traits)
            if refined is not None:
                status, message = refined.status, refined.reason or message
        failed = status.is_failure() or entry.resize_error is not None
        runs.append({"sizes": entry.case.sizes, "status": status.name, **({"reason": message} if failed else {})})
        if failed and _outranks(status, result.status):
            result.status = status.name
            result.reason = f"below the bound: {entry.case.id} on the graph built for {case_id}: {message}"
    if runs:
        result.metrics["below_bound"] = runs


def _outranks(status: Status, current: str) -> bool:
    """Whether a run below the bound that failed with ``status`` becomes the result's status: over a PASS, and over a
    portability finding when it is a failure on this device (which a portability finding must not hide)."""
    return current == Status.PASS.name or (current == Status.FAIL_PORTABILITY.name
                                            and status is not Status.FAIL_PORTABILITY)


def _listed(sizes: Sequence[tuple[int, ...]]) -> str:
    return ", ".join(str(list(s)) for s in sizes)


def emulated(run: Checked) -> Emulated | None:
    """The launch's emulated reference, as the comparison takes it."""
    if run.emulation is None:
        return None
    dtype = np.asarray(run.launch.output).dtype.name
    return Emulated(models=run.emulation, dtype=dtype, arithmetic=run.launch.arithmetic.describe())


def statistics(run: Checked) -> tuple[ErrorStatistics, list[dict[str, Any]]]:
    """The worst output's statistics, and every output's when the op returns a tuple."""
    launched, prepared = run.launch, run.prepared
    if not isinstance(launched.output, tuple):
        return ErrorStatistics.from_arrays(launched.output, prepared.expected, prepared.tolerance, prepared.magnitude,
                                           unwritten_mask(launched.output), emulated(run)), []
    each = _each(run)
    return each[worst_output(each)], [st.to_dict() for st in each]


def _each(run: Checked) -> list[ErrorStatistics]:
    """Statistics of each output of a tuple launch."""
    launched, prepared = run.launch, run.prepared
    magnitudes = prepared.magnitude or (None,) * len(launched.output)
    return [ErrorStatistics.from_arrays(np.asarray(out), np.asarray(exp).reshape(np.shape(out)), tol,
                                        None if mag is None else np.asarray(mag).reshape(np.shape(out)),
                                        unwritten_mask(out))
            for out, exp, tol, mag in zip(launched.output, prepared.expected, prepared.tolerance, magnitudes)]


def worst_output(each: Sequence[ErrorStatistics]) -> int:
    """The output of a tuple whose statistics speak for the launch: the first with the gravest status."""
    return max(range(len(each)), key=lambda i: (each[i].status().is_failure(), each[i].status()))


def contraction_followed(run: Checked) -> str | None:
    """The contraction model an integer output equals entirely, or None."""
    if not run.contractions:
        return None
    output = np.asarray(run.launch.output)
    return next((name for name, codes in run.contractions.items() if np.array_equal(output, codes)), None)


def within_envelope(status: Status, run: Checked, traits: Any) -> spec_envelope.Judgement | None:
    """The verdict the launch's spec envelope gives (``vkdiff.verdicts.envelope``), or None where it changes nothing."""
    prepared = run.prepared
    if run.envelope is None:
        return None
    if isinstance(prepared.expected, tuple):
        output, expected, bound = _flattened(run)
        judged = spec_envelope.judge(status, output, expected, bound, run.envelope, run.compute, traits)
        unexplained = None if judged is None else judged.metrics.get("unexplained")
        if isinstance(unexplained, list):  # counted in the output the tolerance verdict speaks for
            judged.metrics["unexplained"] = unexplained[worst_output(_each(run))]
        return judged
    expected = np.asarray(prepared.expected, np.float64)
    output = np.asarray(run.launch.output)
    if prepared.tolerance.exact and zero_sign_differs(output, expected).any():
        return None  # an exact op (a copy) keeps a zero's sign, and no liberty speaks to it
    bound = prepared.tolerance.bound(expected, prepared.magnitude)
    return spec_envelope.judge(status, output, expected, bound, run.envelope, run.compute, traits)


def _flattened(run: Checked) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A tuple launch's outputs, references and tolerance bounds, one after another (as its envelope holds them)."""
    prepared = run.prepared
    magnitudes = prepared.magnitude or (None,) * len(prepared.expected)
    outs, exps, bounds = [], [], []
    for out, exp, tol, mag in zip(run.launch.output, prepared.expected, prepared.tolerance, magnitudes):
        exp = np.asarray(exp, np.float64).reshape(np.shape(out))
        outs.append(np.asarray(out).reshape(-1))
        exps.append(exp.reshape(-1))
        bounds.append(np.asarray(tol.bound(exp, None if mag is None else np.asarray(mag).reshape(exp.shape)),
                                 np.float64).reshape(-1))
    return np.concatenate(outs), np.concatenate(exps), np.concatenate(bounds)


def record_launch(result: Result, run: Checked) -> None:
    """Compare a launch's output(s) with the reference and write the verdict and evidence into ``result``."""
    launched, prepared = run.launch, run.prepared
    stats, outputs = statistics(run)
    status = stats.status()
    contraction = contraction_followed(run) if status is Status.FAIL_NUMERIC else None
    if contraction:
        status = Status.PASS
    result.status = status.name
    result.reason = "" if status is Status.PASS else stats.message()
    result.shader, result.shaders = launched.variant, list(launched.shaders)
    tolerances = prepared.tolerance if isinstance(prepared.tolerance, tuple) else (prepared.tolerance,)
    result.metrics, result.tolerance = stats.to_dict(), tolerances[0].to_dict()
    if outputs:
        result.metrics["outputs"] = outputs
    result.flags = (["polyfilled"] if launched.polyfilled else []) + (
        [INF_CLAMPED_FLAG] if launched.clamped else []) + ([PORT_STALE_FLAG] if launched.stale else []) + (
        [UNMODELLED_FLAG] if stats.arithmetic and not stats.arithmetic["followed"] else []) + (
        [CONTRACTED_FLAG] if contraction else [])
    if contraction:
        result.metrics["contraction"] = contraction
    refined = within_envelope(status, run, (result.device_info or {}).get("traits"))
    if refined is not None:
        result.status, result.reason = refined.status.name, refined.reason or result.reason
        result.flags = [*result.flags, *refined.flags]
        result.metrics["envelope"] = {**refined.metrics, "tolerance_status": status.name}
    if launched.stale:
        result.metrics["port_stale"] = launched.stale
    result.dispatch = {k: list(v) if isinstance(v, tuple) else v for k, v in launched.dispatch.items()}
