"""One verdict for one method of a program on one device, from its device runs and its reference runs.

For each call (one, or a prefill and its decode steps, or the below-bound sizes of
``--shapes``): every node of every Vulkan delegate the device ran is judged locally and
globally (``vkdiff.verdicts.nodes``); a delegate the device could not run keeps the status
its failure maps to; the method output is compared with eager PyTorch (when a module was
given) and with the program evaluated by the references.

The verdict is, in order: the first diverging node (in execution order, over all
delegates, naming its delegate when there are several and its source when known); else
the status of a delegate that could not run (a failure before a skip: ``BUILD_FAIL`` before
``NOT_SUPPORTED`` before ``NOT_RUN``), with what the other delegates showed; else the
output against eager, or against the reference program.
"""

from __future__ import annotations

import traceback
from typing import Any

import numpy as np

from vkdiff.datamodel import DEVICE_LOST_FLAG, PreparedProgram, Status, Tolerance
from vkdiff.device.boundary import is_device_lost
from vkdiff.executors.program_runs import StepRuns
from vkdiff.verdicts.compare import ErrorStatistics
from vkdiff.verdicts.nodes import compare_nodes, first_diverging, node_label
from vkdiff.verdicts.statuses import status_of_exception

PORT_STALE_FLAG = "port-stale"
"""Flag on results whose launchers port C++ that differs in the user's tree (file names in ``metrics``)."""
INF_CLAMPED_FLAG = "inf-clamped"
"""Flag on results that ran shaders whose infinite literals were clamped to the largest finite value."""
FALLBACK_FLAG = "fed-by-fallback"
"""Flag on results where a delegate the device could not run was evaluated on the host so later ones could run."""


def reference_note(step: StepRuns) -> str:
    """Why the call has no reference output, or which delegates torch's CPU ops evaluated instead."""
    if step.reference_error is not None:
        return f"the references cannot evaluate the program: {status_of_exception(step.reference_error)[1]}"
    return step.reference_note


def flat(values: list[Any]) -> np.ndarray:
    """Outputs (arrays and scalars) as one float64 vector, in order."""
    arrays = [np.asarray(v, np.float64).reshape(-1) for v in values if v is not None]
    return np.concatenate(arrays) if arrays else np.zeros(0)


def _delegate_entries(prepared: PreparedProgram, step: StepRuns) -> tuple[list[dict], list[dict]]:
    """(node records of every delegate the device ran, one status entry per delegate call) of one call."""
    records, delegates = [], []
    reference_calls = step.reference.calls if step.reference is not None else []
    for position, call in enumerate(step.device.calls):
        entry = prepared.plan.delegates[call.delegate]
        if call.skipped is not None:
            delegates.append(_skipped_entry(call))
            continue
        ref = reference_calls[position] if position < len(reference_calls) else None
        global_env = ref.record if ref is not None and ref.skipped is None else None
        mine = compare_nodes(entry.graph, call.record, step.expectations[position], global_env, index=call.delegate,
                             sources=entry.sources, handles=entry.debug_handles)
        records += mine
        bad = first_diverging(mine)
        delegates.append({"delegate": call.delegate, "status": bad["status"] if bad else Status.PASS.name,
                          "nodes": len(mine)})
    return records, delegates


def _skipped_entry(call) -> dict[str, Any]:
    """A delegate call the device could not run: its status, and the node, op and shader it stopped at."""
    exc = call.skipped
    status, reason = status_of_exception(exc)
    entry = {"delegate": call.delegate, "status": status.name, "reason": reason,
             "fed_by": "host" if call.outputs else "", "stale": getattr(exc, "stale", None) or {},
             "device_lost": is_device_lost(exc)}
    if getattr(exc, "node_index", None) is not None:
        entry.update(index=exc.node_index, op=exc.node_op, shader=getattr(exc, "shader", ""))
    if status is Status.ERROR:
        entry["traceback"] = "".join(traceback.format_exception(exc))
    return entry


def _step_summary(prepared: PreparedProgram, index: int, step: StepRuns, records, delegates, vs_eager,
                  vs_reference) -> dict[str, Any]:
    runs = [c.record for c in step.device.calls if c.skipped is None]
    nodes = [n for run in runs for n in run.nodes]
    main = vs_eager or vs_reference
    summary = {"step": index, "kind": "prefill" if index == 0 else "decode" if prepared.generation else "call",
               "resized": any(run.resized for run in runs), "status": main.status().name if main else "NOT_RUN",
               "max_abs_vs_eager": vs_eager.max_abs if vs_eager else None,
               "sqnr_db": main.sqnr_db if main else None,
               "max_abs_vs_reference": vs_reference.max_abs if vs_reference else None,
               "seconds": round(step.device.seconds, 4), "delegates": delegates,
               "host_ms_per_node": round(1e3 * sum(n.host_seconds for n in nodes) / max(len(nodes), 1), 3)}
    if prepared.generation:
        summary.update(token=int(np.argmax(flat(step.device.outputs))), eager_token=prepared.tokens[index])
        summary["token_matches"] = summary["token"] == summary["eager_token"]
    bad = first_diverging(records)
    if bad is not None:
        summary.update(status=bad["status"], first_diverging={k: bad[k] for k in ("delegate", "index", "op", "shader",
                                                                                  "source")},
                       failing_nodes=[[r["index"], r["shader"]] for r in records if Status[r["status"]].is_failure()])
    return summary


def judge_steps(prepared: PreparedProgram, steps: list[StepRuns], build_seconds: float = 0.0
                ) -> tuple[Status, dict[str, Any]]:
    """The verdict and result fields of a method's calls on one device."""
    tolerance, summaries, chosen, reported = prepared.tolerance, [], None, None
    for index, step in enumerate(steps):
        records, delegates = _delegate_entries(prepared, step)
        out = flat(step.device.outputs)
        vs_eager = (ErrorStatistics.from_arrays(out, prepared.expected[index], tolerance)
                    if prepared.expected is not None and index < len(prepared.expected) else None)
        vs_reference = (ErrorStatistics.from_arrays(out, flat(step.reference.outputs), tolerance)
                        if step.reference is not None else None)
        summaries.append(_step_summary(prepared, index, step, records, delegates, vs_eager, vs_reference))
        failing = Status[summaries[-1]["status"]].is_failure() or any(
            Status[d["status"]] is not Status.PASS for d in delegates)
        if chosen is None and (failing or index == len(steps) - 1):
            chosen, reported = index, (step, records, delegates, vs_eager, vs_reference)
    return _verdict(prepared, summaries, chosen, *reported, tolerance, build_seconds)


def _flags(runs: list[Any], delegates: list[dict]) -> tuple[list[str], dict[str, Any]]:
    flags, metrics = [], {}
    if any(r.polyfilled for r in runs):
        flags.append("polyfilled")
    stale = {op: files for r in runs for op, files in r.stale.items()}
    stale.update({op: files for d in delegates for op, files in (d.get("stale") or {}).items()})
    if stale:
        flags.append(PORT_STALE_FLAG)
        metrics["port_stale"] = stale
    clamped = sorted({s for r in runs for s in r.clamped})
    if clamped:
        flags.append(INF_CLAMPED_FLAG)
        metrics["inf_clamped_shaders"] = clamped
    if any(d.get("fed_by") for d in delegates):
        flags.append(FALLBACK_FLAG)
    if any(d.get("device_lost") for d in delegates):
        flags.append(DEVICE_LOST_FLAG)
    return flags, metrics


def _worst_skip(delegates: list[dict]) -> dict | None:
    skipped = [d for d in delegates if "reason" in d]
    order = lambda d: (not Status[d["status"]].is_failure(), Status[d["status"]] is Status.NOT_RUN)
    return min(skipped, key=order) if skipped else None


def _skip_text(entry: dict[str, Any], count: int) -> str:
    at = f"node {entry['index']} ({entry['op']}): " if "index" in entry else ""
    return (f"delegate {entry['delegate']} {entry['status']}: " if count > 1 else "") + at + entry["reason"]


def _verdict(prepared: PreparedProgram, steps: list[dict], chosen: int, step: StepRuns, records, delegates,
             vs_eager, vs_reference, tolerance: Tolerance, build_seconds: float) -> tuple[Status, dict[str, Any]]:
    runs = [c.record for c in step.device.calls if c.skipped is None]
    nodes = [n for run in runs for n in run.nodes]
    metrics = {"vs_eager": vs_eager.to_dict() if vs_eager else None,
               "vs_reference": vs_reference.to_dict() if vs_reference else None, "nodes": records,
               "nodes_step": chosen, "delegates": delegates, "reference_note": reference_note(step),
               "seconds_device_run": round(step.device.seconds, 4), "seconds_build": round(build_seconds, 4),
               "seconds_host_ops": round(step.device.host_seconds, 4),
               "host_ms_per_node": round(1e3 * sum(n.host_seconds for n in nodes) / max(len(nodes), 1), 3)}
    if prepared.generation or len(steps) > 1:
        metrics["steps"] = steps
    flags, extra = _flags(runs, delegates)
    metrics.update(extra)
    shaders = sorted({d["shader"] for r in records for d in r["dispatches"] if not d["skipped"]})
    common = dict(metrics=metrics, flags=flags, shaders=shaders, tolerance=tolerance.to_dict())
    count = len(prepared.plan.delegates)
    where = f"step {chosen} ({steps[chosen]['kind']}): " if len(steps) > 1 else ""
    main = vs_eager or vs_reference
    bad = first_diverging(records)
    if bad is not None:
        worst = next(o for o in bad["outputs"] if Status[o["status"]].is_failure())
        what = "state" if worst.get("state") else "value"
        versus = f"; model output vs {'eager' if vs_eager else 'reference'} max abs {main.max_abs:.3g}" if main else ""
        reason = (f"{where}first diverging {node_label(bad, count)}: {what} %{worst['value']} max abs "
                  f"{worst['max_abs']:.3g}, {worst['mismatches']} elements over tolerance on its own inputs{versus}")
        node = {"index": bad["index"], "op": bad["op"], "delegate": bad["delegate"],
                **({"source": bad["source"]} if bad["source"] else {}),
                **({"args": bad["args"]} if bad.get("args") else {}),
                **({"step": chosen} if len(steps) > 1 else {})}
        return Status[worst["status"]], dict(reason=reason, node=node, shader=bad["shader"], **common)
    skip = _worst_skip(delegates)
    if skip is not None:
        ran = [d for d in delegates if "reason" not in d]
        others = (f"; {len(ran)} other delegate call(s) ran, {sum(d['nodes'] for d in ran)} nodes within tolerance"
                  if ran else "")
        reason = where + "; ".join(_skip_text(d, count) for d in delegates if "reason" in d) + others
        node = {"delegate": skip["delegate"], **{k: skip[k] for k in ("index", "op") if k in skip},
                **({"step": chosen} if len(steps) > 1 else {})}
        extra = {"traceback": skip["traceback"]} if "traceback" in skip else {}
        return Status[skip["status"]], dict(reason=reason, node=node, shader=skip.get("shader", ""), **extra,
                                            **common)
    if main is None:
        return Status.NOT_RUN, dict(reason=f"{where}no oracle for the output: {reference_note(step)}", **common)
    status = main.status()
    if prepared.generation:
        matched = sum(s["token_matches"] for s in steps)
        errors = ", ".join(f"{s['max_abs_vs_eager']:.2g}" for s in steps)
        summary = (f"{len(steps)} calls (prefill + {len(steps) - 1} decode steps), {len(records)} nodes each within "
                   f"tolerance; logits vs eager max abs per step {errors}; greedy tokens match eager "
                   f"{matched}/{len(steps)}")
    else:
        oracle = "eager" if vs_eager else "the reference program"
        summary = (f"{len(records)} nodes within tolerance; output vs {oracle} max abs {main.max_abs:.3g} "
                   f"(SQNR {main.sqnr_db:.1f} dB)")
        if vs_eager and vs_reference:
            summary += f", vs reference max abs {vs_reference.max_abs:.3g}"
    if status is not Status.PASS:
        summary = where + summary + f"; {main.message().splitlines()[0]}"
    return status, dict(reason=summary, **common)
