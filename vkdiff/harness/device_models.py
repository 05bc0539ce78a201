"""Model cases on a Vulkan device: the lowered delegate run node by node, every node judged.

For one (case, device, routing profile): the case is lowered (cached), its Vulkan
delegate runs through ``vkdiff.device.graph.delegate`` with every node's outputs probed,
and three comparisons are made:

* per node, **local**: the reference op evaluated on the *device's own* inputs of that
  node (and the delegate's constants) against the device's outputs, with the tolerance
  policy of the output's dtype (integer qparams exact; reductions scaled by their
  magnitude; ``linear_dq8ca_q4gsw``'s reference quantizes as the shader does, ``x * (1 / s)``
  rounded half to even, so no slack for activation codes is needed). This pins a
  fault to the node that made it: later nodes compute correctly from wrong inputs and
  stay within tolerance. The first node out of tolerance is the first diverging node;
* per node, **global**: the reference interpreter's value of that node (the whole
  chain in float64), recorded as evidence;
* the model output against eager PyTorch and against the interpreter.

The verdict is the first diverging node's (``FAIL_NUMERIC``/``FAIL_NAN``) or, when every
node is within tolerance, the output against eager (model tolerance). Build, load,
limit and binding failures end with their status naming the node and shader.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from vkdiff.verdicts.compare import ErrorStatistics
from vkdiff.datamodel import DEVICE_LOST_FLAG, Delegate, Result, Status, Tolerance, clip, versions

if TYPE_CHECKING:
    from vkdiff.cases.model_case import ModelCase

PORT_STALE_FLAG = "port-stale"
INF_CLAMPED_FLAG = "inf-clamped"
"""Flag on results that ran shaders whose infinite literals were clamped to the largest finite value."""
"""Flag on results whose launchers port C++ that differs in the user's tree (file names in ``metrics``)."""

def _value_for_reference(delegate, vid: int, device_value: Any) -> Any:
    if vid not in delegate.tensors:
        return device_value
    return np.asarray(device_value).astype(delegate.tensors[vid].dtype, copy=False)


def _entry(vid: int, got: np.ndarray, exp: np.ndarray, tol: Tolerance, magnitude=None) -> dict[str, Any]:
    stats = ErrorStatistics.from_arrays(got, exp, tol, magnitude=magnitude)
    return {"value": vid, "status": stats.status().name, "max_abs": stats.max_abs, "sqnr_db": stats.sqnr_db,
            "mismatches": stats.mismatches, "worst_index": stats.worst_index}


def _state_entry(vid: int, before: np.ndarray, expected: np.ndarray, after: np.ndarray, tol: Tolerance
                 ) -> dict[str, Any]:
    """A mutated constant (KV cache): the device's state after the node against the reference op applied to the
    device's state before it, on the slots either holds. A slot the device wrote where neither did is counted
    (``stray``), not judged: ET-VK's ``sdpa_kv_cache_update`` zero-fills the positions past the update up to its
    dispatch's rounding (measured: prefill of 7 tokens writes position 7), which decode overwrites before reading."""
    with np.errstate(invalid="ignore"):  # the poison pattern is a signalling NaN
        before, expected, after = (np.asarray(a, np.float64).reshape(-1) for a in (before, expected, after))
    untouched = np.isnan(before) & np.isnan(expected)
    entry = _entry(vid, after[~untouched], expected[~untouched], tol)
    entry.update(state=True, slots_compared=int((~untouched).sum()), stray=int((untouched & ~np.isnan(after)).sum()))
    return entry


def node_magnitudes(expected: tuple[np.ndarray, ...], magnitude) -> list[np.ndarray | None]:
    """The reduction magnitude of each output, in its shape (None where the reference gave none for it)."""
    mags = []
    for index, exp in enumerate(expected):
        mag = magnitude[index] if isinstance(magnitude, tuple) else magnitude if index == 0 else None
        mags.append(np.reshape(mag, np.shape(exp)) if mag is not None and np.size(mag) == np.size(exp) else None)
    return mags


def _node_outputs(delegate, node, run, expected, magnitude, global_env) -> list[dict[str, Any]]:
    outputs = []
    for vid, exp, mag in zip(node.call.outputs, expected, node_magnitudes(expected, magnitude)):
        if vid not in run.values:
            continue
        got = np.asarray(run.values[vid], np.float64).reshape(np.shape(exp))
        tol = Tolerance.for_dtype(delegate.tensors[vid].dtype if vid in delegate.tensors else "int32")
        entry = _entry(vid, got, exp, tol, mag)
        if global_env is not None and vid in global_env:
            ref = np.asarray(global_env[vid], np.float64)
            if ref.size == got.size:
                entry["global_max_abs"] = float(np.max(np.abs(got - ref.reshape(got.shape)))) if got.size else 0.0
                entry["global_status"] = ErrorStatistics.from_arrays(got, ref.reshape(got.shape), tol).status().name
        outputs.append(entry)
    return outputs


def device_values(delegate, run) -> dict[int, Any]:
    """Every value the run read back, tensors in their declared dtype (as reference ops take them)."""
    return {vid: _value_for_reference(delegate, vid, v) for vid, v in run.values.items()}


def node_expectation(delegate, node, device_env: dict[int, Any]) -> tuple[dict[int, Any], tuple[np.ndarray, ...], Any]:
    """(env, expected outputs, magnitude) of the reference op on the node's device inputs; ``env`` holds each
    mutated state as the reference leaves it."""
    from vkdiff.executors import interpret

    env = dict(device_env)
    env.update({vid: np.array(v, delegate.tensors[vid].dtype) for vid, v in node.states_before.items()})
    expected, magnitude = interpret.evaluate_node(delegate, node.call, env)
    return env, expected, magnitude


def compare_nodes(delegate, run, global_env: dict[int, np.ndarray] | None) -> list[dict[str, Any]]:
    """One record per node: local and global error of each output (and mutated state), the shader, host time."""
    device_env, records = device_values(delegate, run), []
    for node in run.nodes:
        env, expected, magnitude = node_expectation(delegate, node, device_env)
        outputs = _node_outputs(delegate, node, run, expected, magnitude, global_env)
        for vid, after in node.states_after.items():
            tol = Tolerance.for_dtype(delegate.tensors[vid].dtype)
            outputs.append(_state_entry(vid, node.states_before[vid], env[vid], after, tol))
        status = max((Status[o["status"]] for o in outputs), key=lambda s: (s.is_failure(), s), default=Status.PASS)
        records.append({"index": node.index, "op": node.op, "shader": node.shader, "launcher": node.launcher,
                        "status": status.name, "outputs": outputs, "host_ms": round(node.host_seconds * 1e3, 3),
                        "dispatches": [{"shader": d.shader, "global": list(d.global_wg), "local": list(d.local_wg),
                                        "spec": {str(k): v for k, v in d.spec.items()}, "prepack": d.prepack,
                                        "skipped": d.skipped} for d in node.dispatches]})
    return records


def first_diverging(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first node whose outputs leave tolerance on its own inputs."""
    return next((r for r in records if Status[r["status"]].is_failure()), None)


_EAGER_CACHE: dict[str, "EagerRun"] = {}


@dataclasses.dataclass(kw_only=True)
class EagerRun:
    """Eager PyTorch's calls of one case: one, or a prefill and its greedy decode steps."""

    inputs: list[tuple]
    """Each call's inputs (torch tensors)."""
    outputs: list[np.ndarray]
    """Each call's outputs, flattened in order (float64)."""
    tokens: list[int]
    """Each call's greedy token (argmax of the logits) for generation cases, else empty."""


def eager_run(case: ModelCase) -> EagerRun:
    """The quantized eager model's calls (memoised: devices share them); generation cases feed eager's tokens."""
    if case.id not in _EAGER_CACHE:
        import torch

        from vkdiff.harness.models import eager, flat_outputs

        model, inputs, _ = eager(case)
        calls, outputs, tokens = [inputs], [], []
        with torch.no_grad():
            for step in range(1 + (case.decode_steps if case.decode else 0)):
                outputs.append(flat_outputs(model(*calls[step])))
                if case.decode is None:
                    break
                tokens.append(int(np.argmax(outputs[-1])))
                if step < case.decode_steps:
                    calls.append(case.decode(calls[step], tokens[-1]))
        _EAGER_CACHE.clear()
        _EAGER_CACHE[case.id] = EagerRun(inputs=calls, outputs=outputs, tokens=tokens)
    return _EAGER_CACHE[case.id]


def eager_output(case: ModelCase) -> tuple[np.ndarray, tuple]:
    """The first call's outputs (flattened) and inputs."""
    run = eager_run(case)
    return run.outputs[0], run.inputs[0]


def identity(case: ModelCase, repro: str = "") -> dict[str, Any]:
    """The device-independent fields of a model case's device result (what a device worker is sent)."""
    return dict(case=case.id, op=case.name, variant=case.variant, rule="device", knobs=dict(case.knobs),
                seed=case.seed(), repro=repro)


def check_on_device(case: ModelCase, ctx, *, route_name: str = "native", tree=None, repro: str = "",
                    tamper=None, repeat: int = 1) -> Result:
    """One model case's delegate on one device under a routing profile: one ``device`` result (never raises)."""
    return run_prepared(ctx, model=prepare_or_status(case), ident=identity(case, repro), route_name=route_name, tree=tree,
                        tamper=tamper, repeat=repeat)


def run_prepared(ctx, *, model: ModelInputs | tuple[Status, str], ident: dict[str, Any], route_name: str = "native",
                 tree=None, tamper=None, repeat: int = 1, keep: list | None = None) -> Result:
    """``check_on_device`` once the host has prepared the case: numpy and wgpu only (device workers run this).

    Each call's ``DelegateRun`` is appended to ``keep`` when given (bisect saves node inputs from them)."""
    from vkdiff.device.routing import route_for

    start = time.perf_counter()
    route = route_for(route_name, ctx.info)
    knobs = {**ident["knobs"], "route": route.name, **({"limits": ctx.limits_profile} if ctx.limits_profile else {})}
    base = dict(ident, knobs=knobs, device=ctx.info.slug, versions=versions(), device_info=ctx.info_dict)
    try:
        if isinstance(model, tuple):
            status, fields = model[0], dict(reason=model[1])
        else:
            first: list = [] if keep is None else keep
            status, fields = judge(model, ctx, route, tree, tamper, keep=first)
            if repeat > 1:
                status, fields = _repeat(model, ctx, route, tree, tamper, repeat, first, status, fields)
    except Exception as exc:  # a harness bug must not abort the run
        status, fields = _failed(exc)
    fields.setdefault("metrics", {})["route"] = route.to_dict()
    return Result(status=status.name, seconds=round(time.perf_counter() - start, 3), **base, **fields)


def _first_difference(before, again) -> tuple[Any, int, int, int] | None:
    """(node, value id, differing elements, elements) of the first node output or state that differs bitwise."""
    from vkdiff.harness.kernels import differing_elements

    for node, node_again in zip(before.nodes, again.nodes):
        ours = {**{v: before.values[v] for v in node.call.outputs if v in before.values}, **node.states_after}
        theirs = {**{v: again.values[v] for v in node.call.outputs if v in again.values}, **node_again.states_after}
        for vid in [v for v in ours if v in theirs]:
            differing = differing_elements(ours[vid], theirs[vid])
            if differing:
                return node, vid, differing, int(np.size(ours[vid]))
    return None


def _repeat(model: ModelInputs, ctx, route, tree, tamper, repeat: int, first: list, status: Status,
            fields: dict[str, Any]) -> tuple[Status, dict[str, Any]]:
    """Run every call again on fresh graphs; the first node whose value differs bitwise makes it
    ``NONDETERMINISTIC``."""
    from vkdiff.device.graph.delegate import DelegateGraph

    for run in range(2, repeat + 1):
        graph = DelegateGraph(ctx, model.delegate, route=route, tree=tree, tamper=tamper)
        for step, (xs, before) in enumerate(zip(model.steps, first)):
            found = _first_difference(before, graph.execute(xs))
            if found is None:
                continue
            node, vid, differing, total = found
            fields.setdefault("metrics", {})["nondeterministic"] = {
                "run": run, "step": step, "index": node.index, "op": node.op, "value": vid, "shader": node.shader,
                "differing": differing, "total": total, "first_run_status": status.name}
            reason = (f"run {run} of {repeat} differs bitwise from run 1 at step {step}, node {node.index} "
                      f"({node.op}, {node.shader}): %{vid} in {differing} of {total} elements (run 1 alone: "
                      f"{status.name})")
            where = {"index": node.index, "op": node.op, **({"step": step} if model.generation else {})}
            return Status.NONDETERMINISTIC, {**fields, "reason": clip(reason), "node": where, "shader": node.shader}
    return status, fields


def _failed(exc: Exception) -> tuple[Status, dict[str, Any]]:
    """The status and fields of a device run that raised: the node, step and shader it was at."""
    from vkdiff.device.boundary import is_device_lost
    from vkdiff.harness.kernels import status_of_exception

    status, reason = status_of_exception(exc)
    where = getattr(exc, "node_index", None)
    node = {} if where is None else {"index": where, "op": exc.node_op, "shader": getattr(exc, "shader", "")}
    prefix = f"node {where} ({exc.node_op}): " if where is not None else ""
    if getattr(exc, "step", None) is not None:
        prefix = f"step {exc.step}: {prefix}"
        node["step"] = exc.step
    fields = dict(reason=clip(prefix + reason), node=node, shader=node.get("shader", ""))
    stale = getattr(exc, "stale", None)
    if stale:
        fields.update(flags=[PORT_STALE_FLAG], metrics={"port_stale": stale})
    if is_device_lost(exc):
        fields["flags"] = [*fields.get("flags", []), DEVICE_LOST_FLAG]
    return status, fields


@dataclasses.dataclass(kw_only=True)
class ModelInputs:
    """Everything a device needs to judge one model case: no torch, no executorch (picklable, portable)."""

    case_id: str
    delegate: Delegate
    """The decoded Vulkan delegate, constants included."""
    steps: list[list[np.ndarray]]
    """Each call's seeded inputs, in ``input_ids`` order: one call, or a prefill then decode steps."""
    expected: list[np.ndarray]
    """Eager PyTorch's outputs of each call, flattened in order (float64)."""
    tolerance: Tolerance
    """Model-level tolerance of the output against eager."""
    tokens: list[int] = dataclasses.field(default_factory=list)
    """Eager's greedy token of each call (generation cases), fed to the next call."""

    @property
    def generation(self) -> bool:
        return bool(self.tokens)


def prepare_model(case: ModelCase) -> ModelInputs | tuple[Status, str]:
    """Lower (cached) and evaluate eager once; a (status, reason) when the case cannot run on a device."""
    from vkdiff.device.graph.delegate import missing_launchers
    from vkdiff.executors import interpret
    from vkdiff.lowering.edge import LowerError, quiet_libraries
    from vkdiff.lowering.lower import lower
    from vkdiff.harness.models import model_tolerance

    try:
        with quiet_libraries():
            lowered = lower(case)
    except LowerError as exc:
        return Status.NOT_RUN, clip(f"lowering failed (see the cpu results): {exc}")
    if len(lowered.delegates) != 1 or lowered.partitions != 1:
        return Status.NOT_RUN, (f"needs exactly one Vulkan delegate (got {len(lowered.delegates)}, "
                                f"partitions {lowered.partitions})")
    delegate = lowered.delegates[0]
    missing = missing_launchers(delegate) or interpret.missing_references(delegate)
    if missing:
        return Status.NOT_RUN, f"no launcher or reference for {', '.join(missing)}"
    run = eager_run(case)
    return ModelInputs(case_id=case.id, delegate=delegate,
                       steps=[[np.asarray(x) for x in inputs] for inputs in run.inputs], expected=run.outputs,
                       tolerance=model_tolerance(lowered), tokens=run.tokens)


def prepare_or_status(case: ModelCase) -> ModelInputs | tuple[Status, str]:
    """``prepare_model``, with anything it raises as a (status, reason): a run never stops on one case."""
    try:
        return prepare_model(case)
    except Exception as exc:  # lowering or eager broke in a way the host results also show
        from vkdiff.harness.kernels import status_of_exception

        status, reason = status_of_exception(exc)
        return status, clip(f"preparing the case failed: {reason}")


def _step_summary(step: int, run, records, vs_eager, vs_reference, model: ModelInputs) -> dict[str, Any]:
    summary = {"step": step, "kind": "prefill" if step == 0 else "decode", "resized": run.resized,
               "status": vs_eager.status().name, "max_abs_vs_eager": vs_eager.max_abs, "sqnr_db": vs_eager.sqnr_db,
               "max_abs_vs_reference": vs_reference.max_abs, "seconds": round(run.seconds, 4),
               "host_ms_per_node": round(1e3 * sum(n.host_seconds for n in run.nodes) / max(len(run.nodes), 1), 3)}
    if model.generation:
        summary.update(token=int(np.argmax(np.concatenate([np.ravel(o) for o in run.outputs]))),
                       eager_token=model.tokens[step])
        summary["token_matches"] = summary["token"] == summary["eager_token"]
    bad = first_diverging(records)
    if bad is not None:
        summary.update(status=bad["status"], first_diverging={"index": bad["index"], "op": bad["op"],
                                                             "shader": bad["shader"]},
                       failing_nodes=[[r["index"], r["shader"]] for r in records if Status[r["status"]].is_failure()])
    return summary


def judge(model: ModelInputs, ctx, route, tree=None, tamper=None, keep: list | None = None
          ) -> tuple[Status, dict[str, Any]]:
    """Build the delegate on ``ctx``, execute every call, judge every node and output (raises device errors,
    with ``stale``); each call's ``DelegateRun`` is appended to ``keep`` when given."""
    from vkdiff.device.graph.delegate import DelegateGraph, stale_for
    from vkdiff.executors import interpret

    delegate, tolerance = model.delegate, model.tolerance
    state: dict[int, np.ndarray] = {}
    steps, reported, chosen = [], None, None
    try:
        graph = DelegateGraph(ctx, delegate, route=route, tree=tree, tamper=tamper)
        for step, (xs, expected) in enumerate(zip(model.steps, model.expected)):
            run = graph.execute(xs)
            if keep is not None:
                keep.append(run)
            global_env = interpret.trace(delegate, xs, state)
            records = compare_nodes(delegate, run, global_env)
            out = np.concatenate([np.asarray(o, np.float64).reshape(-1) for o in run.outputs])
            reference = np.concatenate([np.asarray(global_env[vid], np.float64).reshape(-1)
                                        for vid in delegate.output_ids])
            vs_eager = ErrorStatistics.from_arrays(out, expected, tolerance)
            vs_reference = ErrorStatistics.from_arrays(out, reference, tolerance)
            steps.append(_step_summary(step, run, records, vs_eager, vs_reference, model))
            if chosen is None and (Status[steps[-1]["status"]].is_failure() or step == len(model.steps) - 1):
                chosen, reported = step, (run, records, vs_eager, vs_reference)
    except Exception as exc:
        exc.stale = stale_for(delegate, tree)
        if steps:
            exc.step = len(steps)
        raise
    return _verdict(model, graph, steps, chosen, *reported, tolerance)


def _verdict(model: ModelInputs, graph, steps, chosen: int, run, records, vs_eager, vs_reference,
             tolerance: Tolerance) -> tuple[Status, dict[str, Any]]:
    metrics = {"vs_eager": vs_eager.to_dict(), "vs_reference": vs_reference.to_dict(), "nodes": records,
               "nodes_step": chosen, "seconds_device_run": round(run.seconds, 4),
               "seconds_build": round(graph.build_seconds, 4),
               "host_ms_per_node": round(1e3 * sum(n.host_seconds for n in run.nodes) / max(len(run.nodes), 1), 3)}
    if model.generation:
        metrics["steps"] = steps
    flags = (["polyfilled"] if run.polyfilled else []) + ([PORT_STALE_FLAG] if run.stale else []) + (
        [INF_CLAMPED_FLAG] if run.clamped else [])
    if run.clamped:
        metrics["inf_clamped_shaders"] = list(run.clamped)
    if run.stale:
        metrics["port_stale"] = run.stale
    shaders = sorted({d["shader"] for r in records for d in r["dispatches"] if not d["skipped"]})
    bad = first_diverging(records)
    common = dict(metrics=metrics, flags=flags, shaders=shaders, tolerance=tolerance.to_dict())
    where = f"step {chosen} ({steps[chosen]['kind']}): " if model.generation else ""
    if bad is not None:
        worst = next(o for o in bad["outputs"] if Status[o["status"]].is_failure())
        what = "state" if worst.get("state") else "value"
        reason = (f"{where}first diverging node {bad['index']} ({bad['op']}, {bad['shader']}): {what} %{worst['value']} "
                  f"max abs {worst['max_abs']:.3g}, {worst['mismatches']} elements over tolerance on its own "
                  f"inputs; model output vs eager max abs {vs_eager.max_abs:.3g}")
        node = {"index": bad["index"], "op": bad["op"], **({"step": chosen} if model.generation else {})}
        return Status[worst["status"]], dict(reason=clip(reason), node=node, shader=bad["shader"], **common)
    status = vs_eager.status()
    if model.generation:
        matched = sum(s["token_matches"] for s in steps)
        errors = ", ".join(f"{s['max_abs_vs_eager']:.2g}" for s in steps)
        summary = (f"{len(steps)} calls (prefill + {len(steps) - 1} decode steps), {len(records)} nodes each within "
                   f"tolerance; logits vs eager max abs per step "
                   f"{errors}; greedy tokens match eager "
                   f"{matched}/{len(steps)}")
    else:
        summary = (f"{len(records)} nodes within tolerance; output vs eager max abs {vs_eager.max_abs:.3g} "
                   f"(SQNR {vs_eager.sqnr_db:.1f} dB), vs reference max abs {vs_reference.max_abs:.3g}")
    if status is not Status.PASS:
        summary = where + summary + f"; {vs_eager.message().splitlines()[0]}"
    return status, dict(reason=clip(summary), **common)
