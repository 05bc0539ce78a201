"""A program's method on one device: every call node by node, repeated on fresh graphs, and replayed whole.

``run_program`` executes everything the verdict on a program needs and decides nothing:

1. **node by node**: each call of the method on the device (host instructions with
   torch's ATen ops, each Vulkan delegate through ``DeviceDelegates`` with every node's
   outputs probed; a delegate the device cannot run is evaluated on the host so the ones
   after it still run), the same call with the references (the global values), and
   each node's reference on the device's own inputs (``node_refs``);
2. **repeats** (``repeat`` > 1): every call again on fresh graphs, up to the first node
   output or state whose bits differ from the first run;
3. **whole-graph replays** (``replays`` > 0, unless a repeat differed): the delegates
   built once more without probes and with ET-VK's own barriers, executed ``replays``
   times, up to the first delegate output that differs from the node-by-node run or the
   replay before; with the memory plan and the first hazard a graph kept.

An exception ends the run and is kept with it (``vkdiff.verdicts.program`` judges it).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from vkdiff.datamodel import PreparedProgram
from vkdiff.executors import interpret
from vkdiff.executors.bits import difference_map, differing_elements
from vkdiff.executors.device import DeviceDelegates
from vkdiff.executors.node_refs import NodeExpectation, expect_nodes
from vkdiff.executors.program import FirstOf, MethodRun, ReferenceDelegates, run_method
from vkdiff.executors.torch_delegates import TorchDelegates


@dataclasses.dataclass(kw_only=True)
class StepRuns:
    """One call of the method: on the device, with the references, and each node's reference."""

    device: MethodRun
    reference: MethodRun | None
    """None when the references cannot evaluate the program (``reference_note`` says why)."""
    reference_note: str = ""
    """Which delegates torch's CPU ops evaluated (no reference), if any."""
    reference_error: Exception | None = None
    """Why the references could not evaluate the call, when ``reference`` is None."""
    expectations: dict[int, list[NodeExpectation]] = dataclasses.field(default_factory=dict)
    """Per delegate call the device ran (by position in ``device.calls``): each node's reference on its inputs."""


@dataclasses.dataclass(kw_only=True)
class Difference:
    """The first node output or state of a repeat whose bits differ from the first run's."""

    run: int
    step: int
    delegate: int
    node: Any
    """The node's record in the first run (``NodeRun``: index, op, shader)."""
    value: int
    differing: int
    total: int


@dataclasses.dataclass(kw_only=True)
class Replays:
    """Whole-graph replays of every call's delegates."""

    count: int
    seconds: float = 0.0
    executed: int = 0
    memory: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Shared objects and how their users were bound (``memory_plan``)."""
    hazard: Any = None
    """The first hazard a replayed graph's stream kept (``ComputeGraph.hazard``), or None."""
    differs: dict[str, Any] | None = None
    """Where a replay first differed: ``replay``, ``step``, ``delegate``, ``output``, ``map`` (None: shapes differ)."""
    own_barriers: bool = True
    """Whether the transport records ET-VK's own barriers (else it orders every dispatch itself)."""
    transport: str = ""


@dataclasses.dataclass(kw_only=True)
class ProgramRuns:
    """Everything one method ran on one device."""

    steps: list[StepRuns] = dataclasses.field(default_factory=list)
    build_seconds: float = 0.0
    repeat: int = 1
    difference: Difference | None = None
    replays: Replays | None = None
    error: Exception | None = None
    """What ended the run (with ``step``, ``delegate``, ``stale`` where known)."""


def fallback() -> FirstOf:
    """Where a delegate the device cannot run is evaluated: the references, else torch's CPU ops."""
    return FirstOf(ReferenceDelegates(), TorchDelegates())


def unrunnable(model: PreparedProgram) -> dict[int, str]:
    """Vulkan delegates the device must not run, with every op that lacks a launcher and every op that lacks a
    reference (a node vkdiff cannot judge is a node it does not claim to have checked)."""
    from vkdiff.device.graph.delegate import missing_launchers

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


def reference_runs(model: PreparedProgram) -> list[dict[str, Any]]:
    """Every call with the references (torch's CPU ops for delegates they cannot evaluate): the global values, or
    what stopped them (``StepRuns``' reference fields)."""
    reference, torch_ops, runs = ReferenceDelegates(), TorchDelegates(), []
    for inputs in model.steps:
        try:
            run = run_method(model.plan, inputs, reference, fallback=torch_ops)
        except Exception as exc:  # the program has no reference output for this call
            runs.append({"reference": None, "reference_error": exc})
            continue
        skipped = [c.delegate for c in run.calls if c.skipped is not None]
        runs.append({"reference": run, "reference_note": f"delegate(s) {', '.join(map(str, skipped))} evaluated with "
                                                         f"torch's CPU ops (no reference)" if skipped else ""})
    return runs


def run_steps(runs: ProgramRuns, model: PreparedProgram, ctx, route, tree=None, tampers: dict | None = None,
              keep: list | None = None) -> None:
    """Every call on ``ctx`` node by node and with the references, then each node's reference (raises device errors
    with ``stale`` and, for a method of several calls, ``step``)."""
    device = DeviceDelegates(ctx, route=route, tree=tree, tamper=tampers, refuse=unrunnable(model))
    host = fallback()
    for index, (inputs, reference) in enumerate(zip(model.steps, reference_runs(model))):
        try:
            run = run_method(model.plan, inputs, device, fallback=host)
        except Exception as exc:
            exc.step = index if len(model.steps) > 1 else None
            raise
        if keep is not None:
            keep.append({c.delegate: c.record for c in run.calls if c.skipped is None})
        runs.steps.append(StepRuns(device=run, **reference))
    runs.build_seconds = sum(g.build_seconds for g in device.graphs.values())
    for step in runs.steps:
        step.expectations = {position: expect_nodes(model.plan.delegates[call.delegate].graph, call.record)
                             for position, call in enumerate(step.device.calls) if call.skipped is None}


def first_difference(before: dict, again: dict) -> tuple[int, Any, int, int, int] | None:
    """(delegate, node, value id, differing elements, elements) of the first node output or state that differs."""
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


def run_repeats(model: PreparedProgram, ctx, route, tree, tampers, repeat: int, first: list) -> Difference | None:
    """Every call again on fresh graphs, ``repeat - 1`` times: the first node value whose bits differ, or None."""
    for again_index in range(2, repeat + 1):
        device = DeviceDelegates(ctx, route=route, tree=tree, tamper=tampers, refuse=unrunnable(model))
        host = fallback()
        for step, (xs, before) in enumerate(zip(model.steps, first)):
            run = run_method(model.plan, xs, device, fallback=host)
            found = first_difference(before, {c.delegate: c.record for c in run.calls if c.skipped is None})
            if found is not None:
                delegate, node, vid, differing, total = found
                return Difference(run=again_index, step=step, delegate=delegate, node=node, value=vid,
                                  differing=differing, total=total)
    return None


def run_replays(model: PreparedProgram, ctx, route, tree, replays: int, first: list) -> Replays:
    """Every call's delegates built once more without probes and with ET-VK's own barriers (raw Vulkan; through wgpu,
    wgpu's), executed ``replays`` times, up to the first delegate output that differs."""
    device = DeviceDelegates(ctx, route=route, tree=tree, probe=False, refuse=unrunnable(model), exact=True)
    host = fallback()
    record = Replays(count=replays, own_barriers=ctx.device.own_barriers, transport=ctx.device.transport)
    started = time.perf_counter()
    for step, (xs, located) in enumerate(zip(model.steps, first)):
        baseline = {d: run.outputs for d, run in located.items()}
        for replay in range(1, replays + 1):
            run = run_method(model.plan, xs, device, fallback=host)
            record.executed += 1
            record.differs = _replay_difference(run, baseline, replay, step)
            if record.differs is not None:
                record.memory, record.hazard = memory_plan(device), hazard(device)
                return record
    record.seconds = time.perf_counter() - started
    record.memory, record.hazard = memory_plan(device), hazard(device)
    return record


def _replay_difference(run: MethodRun, baseline: dict, replay: int, step: int) -> dict[str, Any] | None:
    for call in run.calls:
        if call.skipped is not None or call.delegate not in baseline:
            continue
        for index, (ours, theirs) in enumerate(zip(call.record.outputs, baseline[call.delegate])):
            found = difference_map(ours, theirs) if np.shape(ours) == np.shape(theirs) else None
            if found is None or found["differing"]:
                return {"replay": replay, "step": step, "delegate": call.delegate, "output": index, "map": found}
    return None


def hazard(device: DeviceDelegates) -> Any:
    """The first hazard kept by a delegate's graph (``ComputeGraph.hazard``), or None."""
    return next((g.graph.hazard for g in device.graphs.values() if g.graph.hazard is not None), None)


def memory_plan(device: DeviceDelegates) -> dict[str, Any]:
    """Shared objects over the delegates replayed, and whether their users were bound to one allocation (raw Vulkan)
    or kept their own storage (wgpu cannot alias)."""
    plans = [graph.graph.memory_plan for graph in device.graphs.values()]
    aliased = all(p["aliased"] for p in plans)
    return {"shared_objects": sum(p["shared_objects"] for p in plans), "users": sum(p["users"] for p in plans),
            "storage": "one allocation per shared object" if aliased else
            "each tensor its own (wgpu cannot bind two resources to one allocation)",
            "command_buffer": "recorded once, resubmitted" if plans and all(p["recorded"] for p in plans)
            else "re-encoded each execute"}


def run_program(model: PreparedProgram, ctx, route, *, tree=None, tampers: dict | None = None, repeat: int = 1,
                replays: int = 0, keep: list | None = None) -> ProgramRuns:
    """Node by node, then repeats, then whole-graph replays (never raises: an exception ends the run).

    ``tampers`` is host work after each node, per delegate index; each call's ``{delegate index: DelegateRun}`` is
    appended to ``keep`` when given (bisect and repro use them)."""
    runs, first = ProgramRuns(repeat=repeat), [] if keep is None else keep
    try:
        run_steps(runs, model, ctx, route, tree, tampers, keep=first)
        if repeat > 1:
            runs.difference = run_repeats(model, ctx, route, tree, tampers, repeat, first)
        if replays and runs.difference is None:
            runs.replays = run_replays(model, ctx, route, tree, replays, first)
    except Exception as exc:  # the verdict maps it to a status
        runs.error = exc
    return runs
