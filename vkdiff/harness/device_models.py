"""Programs on a Vulkan device: every method call executed as the runtime does, every delegate node by node, judged.

For one (prepared program, device, routing profile): each call of the method runs twice.
On the device, host instructions run with torch's ATen ops and each Vulkan delegate runs
through ``vkdiff.executors.device`` with every node's outputs probed; a delegate the
device cannot run is evaluated on the host (reference, else torch's CPU ops) so the
delegates after it still run. With the references, the same program gives every node's
global value and the reference output. ``vkdiff.verdicts.program`` then judges.

Catalogue model cases get here through their lowering (``prepare_model``); a user's
``.pte`` or module through ``vkdiff.harness.programs``. Both are a ``PreparedProgram``.
"""

from __future__ import annotations

import dataclasses
import os
import time
import traceback
from typing import TYPE_CHECKING, Any

import numpy as np

from vkdiff.datamodel import DEVICE_LOST_FLAG, PreparedProgram, Result, Status, versions
from vkdiff.verdicts.program import PORT_STALE_FLAG, StepRuns, judge_steps
from vkdiff.verdicts.statuses import status_of_exception

if TYPE_CHECKING:
    from vkdiff.cases.model_case import ModelCase

__all__ = ["PORT_STALE_FLAG", "check_on_device", "identity", "prepare_model", "prepare_or_status", "run_prepared"]

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

        from vkdiff.harness.dynamic import below_bound_calls
        from vkdiff.harness.models import eager, flat_outputs
        from vkdiff.capture import quiet_libraries

        with quiet_libraries():
            model, inputs, _ = eager(case)
        calls, outputs, tokens = [inputs], [], []
        with torch.no_grad(), quiet_libraries():
            for step in range(1 + (case.decode_steps if case.decode else 0)):
                outputs.append(flat_outputs(model(*calls[step])))
                if case.decode is None:
                    break
                tokens.append(int(np.argmax(outputs[-1])))
                if step < case.decode_steps:
                    calls.append(case.decode(calls[step], tokens[-1]))
            more_calls = case.more_calls or (below_bound_calls(model, inputs, case.dynamic_shapes)
                                             if case.dynamic_shapes is not None and case.decode is None else ())
            for more in more_calls:
                calls.append(more)
                outputs.append(flat_outputs(model(*more)))
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
    """One model case's program on one device under a routing profile: one ``device`` result (never raises)."""
    return run_prepared(ctx, model=prepare_or_status(case), ident=identity(case, repro), route_name=route_name,
                        tree=tree, tamper=tamper, repeat=repeat)


def run_prepared(ctx, *, model: PreparedProgram | tuple[Status, str], ident: dict[str, Any],
                 route_name: str = "native", tree=None, tamper=None, repeat: int = 1,
                 keep: list | None = None) -> Result:
    """``check_on_device`` once the host has prepared the program: numpy, wgpu and (for host ops) torch.

    ``tamper`` is host work after each node of delegate 0 (or ``{delegate: tamper}``); each call's
    ``{delegate index: DelegateRun}`` is appended to ``keep`` when given (bisect and repro use them)."""
    from vkdiff.device.routing import route_for

    start = time.perf_counter()
    route = route_for(route_name, ctx.info)
    knobs = {**ident["knobs"], "route": route.name, **({"limits": ctx.limits_profile} if ctx.limits_profile else {})}
    base = dict(ident, knobs=knobs, device=ctx.info.slug, versions=versions(), device_info=ctx.info_dict)
    tampers = tamper if isinstance(tamper, dict) else ({0: tamper} if tamper is not None else {})
    try:
        if isinstance(model, tuple):
            status, fields = model[0], dict(reason=model[1])
        else:
            first: list = [] if keep is None else keep
            status, fields = judge(model, ctx, route, tree, tampers, keep=first)
            if repeat > 1:
                status, fields = _repeat(model, ctx, route, tree, tampers, repeat, first, status, fields)
            if graph_replays() and status is not Status.NONDETERMINISTIC:
                status, fields = _replay_graphs(model, ctx, route, tree, graph_replays(), first, status, fields)
    except Exception as exc:  # a harness bug must not abort the run
        status, fields = _failed(exc)
    fields.setdefault("metrics", {})["route"] = route.to_dict()
    return Result(status=status.name, seconds=round(time.perf_counter() - start, 3), **base, **fields)


def unrunnable(model: PreparedProgram) -> dict[int, str]:
    """Vulkan delegates the device must not run, with every op that lacks a launcher and every op that lacks a
    reference (a node vkdiff cannot judge is a node it does not claim to have checked)."""
    from vkdiff.device.graph.delegate import missing_launchers
    from vkdiff.executors import interpret

    out = {}
    for entry in model.plan.delegates:
        if entry.graph is None:
            continue
        launchers, references = missing_launchers(entry.graph), interpret.missing_references(entry.graph)
        parts = ([f"no launcher for {', '.join(launchers)}"] if launchers else []) + (
            [f"no reference for {', '.join(references)}"] if references else [])
        if parts:
            out[entry.index] = "; ".join(parts)
    return out


def reference_runs(model: PreparedProgram) -> list[StepRuns | tuple[Any, str]]:
    """Every call with the references (torch's CPU ops for delegates they cannot evaluate): the global values."""
    from vkdiff.executors.program import ReferenceDelegates, run_method
    from vkdiff.executors.torch_delegates import TorchDelegates

    reference, fallback, runs = ReferenceDelegates(), TorchDelegates(), []
    for inputs in model.steps:
        try:
            run = run_method(model.plan, inputs, reference, fallback=fallback)
            skipped = [c.delegate for c in run.calls if c.skipped is not None]
            note = (f"delegate(s) {', '.join(map(str, skipped))} evaluated with torch's CPU ops (no reference)"
                    if skipped else "")
            runs.append((run, note))
        except Exception as exc:
            runs.append((None, f"the references cannot evaluate the program: {status_of_exception(exc)[1]}"))
    return runs


def judge(model: PreparedProgram, ctx, route, tree=None, tampers: dict | None = None, keep: list | None = None
          ) -> tuple[Status, dict[str, Any]]:
    """Execute every call on ``ctx`` and with the references, then judge (raises device errors with ``stale``)."""
    from vkdiff.executors.device import DeviceDelegates
    from vkdiff.executors.program import FirstOf, ReferenceDelegates, run_method
    from vkdiff.executors.torch_delegates import TorchDelegates

    refusals = unrunnable(model)
    device = DeviceDelegates(ctx, route=route, tree=tree, tamper=tampers, refuse=refusals)
    fallback = FirstOf(ReferenceDelegates(), TorchDelegates())
    steps = []
    for index, (inputs, (reference, note)) in enumerate(zip(model.steps, reference_runs(model))):
        try:
            run = run_method(model.plan, inputs, device, fallback=fallback)
        except Exception as exc:
            exc.step = index if len(model.steps) > 1 else None
            raise
        if keep is not None:
            keep.append({c.delegate: c.record for c in run.calls if c.skipped is None})
        steps.append(StepRuns(device=run, reference=reference, reference_note=note))
    build = sum(g.build_seconds for g in device.graphs.values())
    return judge_steps(model, steps, build)


def _first_difference(before: dict, again: dict) -> tuple[int, Any, int, int, int] | None:
    """(delegate, node, value id, differing elements, elements) of the first node output or state that differs."""
    from vkdiff.harness.kernels import differing_elements

    for delegate, run in before.items():
        other = again.get(delegate)
        if other is None:
            continue
        for node, node_again in zip(run.nodes, other.nodes):
            ours = {**{v: run.values[v] for v in node.call.outputs if v in run.values}, **node.states_after}
            theirs = {**{v: other.values[v] for v in node.call.outputs if v in other.values}, **node_again.states_after}
            for vid in [v for v in ours if v in theirs]:
                differing = differing_elements(ours[vid], theirs[vid])
                if differing:
                    return delegate, node, vid, differing, int(np.size(ours[vid]))
    return None


def _repeat(model: PreparedProgram, ctx, route, tree, tampers, repeat: int, first: list, status: Status,
            fields: dict[str, Any]) -> tuple[Status, dict[str, Any]]:
    """Run every call again on fresh graphs; the first node whose value differs bitwise makes it
    ``NONDETERMINISTIC``."""
    from vkdiff.executors.device import DeviceDelegates
    from vkdiff.executors.program import FirstOf, ReferenceDelegates, run_method
    from vkdiff.executors.torch_delegates import TorchDelegates

    for again_index in range(2, repeat + 1):
        device = DeviceDelegates(ctx, route=route, tree=tree, tamper=tampers, refuse=unrunnable(model))
        fallback = FirstOf(ReferenceDelegates(), TorchDelegates())
        for step, (xs, before) in enumerate(zip(model.steps, first)):
            run = run_method(model.plan, xs, device, fallback=fallback)
            found = _first_difference(before, {c.delegate: c.record for c in run.calls if c.skipped is None})
            if found is None:
                continue
            delegate, node, vid, differing, total = found
            fields.setdefault("metrics", {})["nondeterministic"] = {
                "run": again_index, "step": step, "delegate": delegate, "index": node.index, "op": node.op,
                "value": vid, "shader": node.shader, "differing": differing, "total": total,
                "first_run_status": status.name}
            reason = (f"run {again_index} of {repeat} differs bitwise from run 1 at step {step}, node {node.index} "
                      f"({node.op}, {node.shader}): %{vid} in {differing} of {total} elements (run 1 alone: "
                      f"{status.name})")
            where = {"index": node.index, "op": node.op, "delegate": delegate,
                     **({"step": step} if model.generation else {})}
            return Status.NONDETERMINISTIC, {**fields, "reason": reason, "node": where, "shader": node.shader}
    return status, fields


REPLAYS_ENV = "VKDIFF_REPLAYS"
"""Set by ``--mode graph --replays N``: each model case's delegates also run N times whole (no probe between
nodes); child processes and xdist workers inherit it."""


def graph_replays() -> int:
    return int(os.environ.get(REPLAYS_ENV) or 0)


def difference_map(a: np.ndarray, b: np.ndarray, limit: int = 8) -> dict[str, Any]:
    """Where two outputs differ: how many elements, the first coordinates, and their bounding box (which tiles)."""
    a, b = np.asarray(a), np.asarray(b)
    bits = a.view(np.uint8).reshape(a.size, -1) != b.view(np.uint8).reshape(b.size, -1)
    where = np.argwhere(bits.any(axis=1).reshape(a.shape))
    return {"differing": int(len(where)), "total": int(a.size), "first": where[:limit].tolist(),
            "box": [where.min(axis=0).tolist(), where.max(axis=0).tolist()] if len(where) else []}


def _replay_graphs(model: PreparedProgram, ctx, route, tree, replays: int, first: list, status: Status,
                   fields: dict[str, Any]) -> tuple[Status, dict[str, Any]]:
    """Every call's delegates built once more without probes and with ET-VK's own barriers (raw Vulkan; through wgpu,
    wgpu's) and executed ``replays`` times: a delegate output that differs between replays, or from the node-by-node
    run, is ``NONDETERMINISTIC`` with a map of where (and the stream's hazard, if any); a stream no barrier orders
    whose replays agree is ``FAIL_SYNC`` (with ``--validate`` at once); else the node-by-node verdict stands (it
    compared the same bits with the references)."""
    from vkdiff.executors.device import DeviceDelegates
    from vkdiff.executors.program import FirstOf, ReferenceDelegates, run_method
    from vkdiff.executors.torch_delegates import TorchDelegates

    device = DeviceDelegates(ctx, route=route, tree=tree, probe=False, refuse=unrunnable(model), exact=True)
    fallback = FirstOf(ReferenceDelegates(), TorchDelegates())
    started, executed = time.perf_counter(), 0
    for step, (xs, located) in enumerate(zip(model.steps, first)):
        baseline = {d: run.outputs for d, run in located.items()}
        for replay in range(1, replays + 1):
            run = run_method(model.plan, xs, device, fallback=fallback)
            executed += 1
            for call in run.calls:
                if call.skipped is not None or call.delegate not in baseline:
                    continue
                for index, (ours, theirs) in enumerate(zip(call.record.outputs, baseline[call.delegate])):
                    found = difference_map(ours, theirs) if np.shape(ours) == np.shape(theirs) else None
                    if found is None or found["differing"]:
                        status, fields = _replay_differs(replay, replays, step, call.delegate, index, found,
                                                         status, fields)
                        fields["metrics"]["replays"]["memory"] = _memory_plan(device)
                        hazard = _hazard(device)
                        if hazard is not None:
                            fields["reason"] += f"; the recorded stream has a hazard: {hazard}"
                        return status, fields
    seconds = time.perf_counter() - started
    fields.setdefault("metrics", {})["replays"] = {"count": replays, "identical": True, "seconds": round(seconds, 3),
                                                   "per_second": round(executed / max(seconds, 1e-9), 1),
                                                   "memory": _memory_plan(device)}
    hazard = _hazard(device)
    if hazard is not None:
        where = ("on this device: latent here" if ctx.device.own_barriers else
                 f"through {ctx.device.transport}, which orders every dispatch itself")
        reason = f"{hazard} ({replays} whole-graph replays identical {where}; node by node alone: {status.name})"
        return Status.FAIL_SYNC, {**fields, "reason": reason, "node": {"index": hazard.node_index},
                                  "shader": hazard.shader}
    return status, fields


def _hazard(device) -> Any:
    """The first hazard kept by a delegate's graph (``ComputeGraph.hazard``), or None."""
    return next((g.graph.hazard for g in device.graphs.values() if g.graph.hazard is not None), None)


def _memory_plan(device) -> dict[str, Any]:
    """Shared objects over the delegates replayed, and whether their users were bound to one allocation (raw Vulkan)
    or kept their own storage (wgpu cannot alias)."""
    plans = [graph.graph.memory_plan for graph in device.graphs.values()]
    aliased = all(p["aliased"] for p in plans)
    return {"shared_objects": sum(p["shared_objects"] for p in plans), "users": sum(p["users"] for p in plans),
            "storage": "one allocation per shared object" if aliased else
            "each tensor its own (wgpu cannot bind two resources to one allocation)",
            "command_buffer": "recorded once, resubmitted" if plans and all(p["recorded"] for p in plans)
            else "re-encoded each execute"}


def _replay_differs(replay: int, replays: int, step: int, delegate: int, index: int, found: dict | None,
                    status: Status, fields: dict[str, Any]) -> tuple[Status, dict[str, Any]]:
    against = "the node-by-node run" if replay == 1 else "replay 1"
    what = (f"{found['differing']} of {found['total']} elements, first at {found['first'][0]}, within "
            f"{found['box'][0]}..{found['box'][1]}" if found else "its shape")
    fields.setdefault("metrics", {})["replays"] = {"count": replays, "identical": False, "replay": replay,
                                                   "step": step, "delegate": delegate, "output": index,
                                                   "map": found, "first_run_status": status.name}
    reason = (f"whole-graph replay {replay} of {replays} (no probes between nodes) differs bitwise from {against} "
              f"at step {step}, delegate {delegate} output {index}: {what} (node by node alone: {status.name})")
    return Status.NONDETERMINISTIC, {**fields, "reason": reason}


def _failed(exc: Exception) -> tuple[Status, dict[str, Any]]:
    """The status and fields of a device run that raised: the delegate, node, step and shader it was at."""
    from vkdiff.device.boundary import is_device_lost

    status, reason = status_of_exception(exc)
    where = getattr(exc, "node_index", None)
    node = {} if where is None else {"index": where, "op": exc.node_op, "shader": getattr(exc, "shader", "")}
    prefix = f"node {where} ({exc.node_op}): " if where is not None else ""
    if getattr(exc, "delegate", None) is not None:
        node["delegate"] = exc.delegate
    if getattr(exc, "step", None) is not None:
        prefix = f"step {exc.step}: {prefix}"
        node["step"] = exc.step
    fields: dict[str, Any] = dict(reason=prefix + reason, node=node, shader=node.get("shader", ""))
    if status is Status.ERROR:
        fields["traceback"] = "".join(traceback.format_exception(exc))
    stale = getattr(exc, "stale", None)
    if stale:
        fields.update(flags=[PORT_STALE_FLAG], metrics={"port_stale": stale})
    if is_device_lost(exc):
        fields["flags"] = [*fields.get("flags", []), DEVICE_LOST_FLAG]
    return status, fields


def prepare_model(case: ModelCase) -> PreparedProgram | tuple[Status, str]:
    """Lower (cached) and evaluate eager once; a (status, reason) when the case cannot run on a device."""
    from vkdiff.capture import quiet_libraries
    from vkdiff.lowering.edge import LowerError
    from vkdiff.lowering.lower import lower
    from vkdiff.harness.models import model_tolerance

    try:
        with quiet_libraries():
            lowered = lower(case)
    except LowerError as exc:
        return Status.NOT_RUN, f"lowering failed (see the cpu results): {exc}"
    program = lowered.program()
    if not program.vulkan_methods():
        why = (": the partitioner kept every node on the CPU" if getattr(case, "expect_delegate", True)
               else " (as the test expects: expect_no_delegates)")
        return Status.NOT_RUN, f"the lowered program has no Vulkan delegate{why}"
    run = eager_run(case)
    return PreparedProgram(case_id=case.id, program=program, method="forward",
                           steps=[[np.asarray(x) for x in inputs] for inputs in run.inputs], expected=run.outputs,
                           tolerance=case.tolerance or model_tolerance(lowered), tokens=run.tokens)


def prepare_or_status(case: ModelCase) -> PreparedProgram | tuple[Status, str]:
    """``prepare_model``, with anything it raises as a (status, reason): a run never stops on one case."""
    try:
        return prepare_model(case)
    except Exception as exc:  # lowering or eager broke in a way the host results also show
        status, reason = status_of_exception(exc)
        return status, f"preparing the case failed: {reason}"
