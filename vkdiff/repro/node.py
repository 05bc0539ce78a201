"""Repro folders for one node of a model case: the node alone, fed what the device fed it in the model.

``vkdiff repro CASE --node N`` (default: the first bad node) runs the model case's delegate
on the device once, as a ``device`` verdict does, then builds a one-node delegate
(``one_node``): the node's op with its tensor arguments as graph inputs holding the values
the device computed for them, its constants (a constant it mutates, a KV cache, as the
device held it just before the node), its SymInts at their run-time values, and every
tensor with the storage and memory layout the delegate serialized. That delegate runs
through the recording device (``vkdiff.device.transports.trace``): staging copies, prepacking, the
node's dispatches and the readbacks of its outputs are what the folder replays; each
output is judged, as vkdiff judges the node in the model, against the reference op on
those same inputs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from vkdiff.device.transports.trace import TraceDevice
from vkdiff.datamodel import Call, Delegate, Status
from vkdiff.repro.kernel import Check


class NodeReproError(ValueError):
    """The node cannot be cut out of the model run (the message names what is missing)."""


def _referenced(delegate: Delegate, vids) -> list[int]:
    """Value ids used by arguments, ``ValueList`` items expanded."""
    found: list[int] = []
    for vid in vids:
        if delegate.values[vid].get("kind") == "ValueList":
            found += _referenced(delegate, delegate.value(vid))
        elif vid not in found:
            found.append(vid)
    return found


@dataclasses.dataclass(kw_only=True)
class OneNode:
    """A node cut out of a model run."""

    delegate: Delegate
    """The node's op alone, its tensor arguments as inputs."""
    feeds: list[np.ndarray]
    """What the device fed it, in ``input_ids`` order."""
    states: dict[int, np.ndarray]
    """Each constant it mutates (KV caches) as the device held it before the node, by value id."""


def one_node(delegate: Delegate, run, index: int) -> OneNode:
    """Node ``index`` of ``run`` (a ``DelegateRun``) as a delegate of its own."""
    node = next((n for n in run.nodes if n.index == index), None)
    if node is None:
        raise NodeReproError(f"the delegate has no node {index} (it has {len(run.nodes)} nodes, 0 to "
                             f"{len(run.nodes) - 1})")
    call: Call = node.call
    used = _referenced(delegate, call.args.values())
    tensors = [vid for vid in used if vid in delegate.tensors]
    inputs = [vid for vid in tensors if vid not in delegate.constants]
    missing = [vid for vid in inputs if vid not in run.values]
    if missing:
        raise NodeReproError(f"node {index} reads {', '.join(f'%{v}' for v in missing)}, which the run did not "
                             f"read back")
    values = list(delegate.values)
    for vid in used:
        if values[vid].get("kind") == "SymInt" and vid in run.values:
            values[vid] = {"kind": "SymInt", "value": int(run.values[vid])}
    states = {vid: np.asarray(v).astype(delegate.tensors[vid].dtype) for vid, v in node.states_before.items()}
    constants = {vid: delegate.constants[vid] for vid in tensors if vid in delegate.constants} | states
    outputs = [vid for vid in call.outputs if vid in delegate.tensors]
    alone = dataclasses.replace(
        delegate, ops=[call.op], values=values, constants=constants, input_ids=inputs, output_ids=outputs,
        tensors={vid: delegate.tensors[vid] for vid in dict.fromkeys([*tensors, *outputs])},
        constant_keys={vid: key for vid, key in delegate.constant_keys.items() if vid in constants})
    feeds = [np.asarray(run.values[vid]).astype(delegate.tensors[vid].dtype) for vid in inputs]
    return OneNode(delegate=alone, feeds=feeds, states=states)


def _read_index(trace: TraceDevice, staging) -> int:
    """Index among the trace's reads of the last read of a ``Readback``'s staging buffer."""
    res = trace.ref(staging.buffer.handle)
    reads = [op["res"] for op in trace.ops if op["op"] == "read"]
    return len(reads) - 1 - reads[::-1].index(res)


def _value_check(trace, graph, vid: int, exp: np.ndarray, bound: np.ndarray) -> Check:
    back = graph.readbacks[vid]
    return Check(name=f"v{vid}", read=_read_index(trace, back), dtype=str(np.dtype(back.dtype)), expected=exp,
                 bound=np.broadcast_to(bound, exp.shape), gather=np.arange(exp.size, dtype=np.int64).reshape(
                     exp.shape), poison=False)


def _state_check(trace, built, vid: int, before: np.ndarray, exp: np.ndarray, tol) -> Check:
    """A mutated constant, on the slots the state before or the reference holds (as vkdiff compares states)."""
    back = built.after[vid]
    with np.errstate(invalid="ignore"):
        before, exp = np.asarray(before, np.float64).reshape(-1), np.asarray(exp, np.float64).reshape(-1)
        kept = np.flatnonzero(~(np.isnan(before) & np.isnan(exp)))
        bound = np.broadcast_to(tol.bound(exp), exp.shape)
    return Check(name=f"state{vid}", read=_read_index(trace, back), dtype=str(np.dtype(back.dtype)),
                 expected=exp[kept], bound=bound[kept], gather=kept, poison=False)


@dataclasses.dataclass(kw_only=True)
class NodeRecording:
    """The one-node delegate as it ran through the recording device."""

    trace: TraceDevice
    record: dict[str, Any]
    """vkdiff's node record (``compare_nodes``) of the run alone."""
    checks: list[Check]


def record_node(ctx, cut: OneNode, *, route, tree: Path | None = None, tamper=None) -> NodeRecording:
    """Run the cut-out node once on ``ctx`` with its device recorded, and judge it as the model run does.

    Launchers allocate the tensors of a mutated constant themselves (``sdpa_with_kv_cache``'s caches start
    uninitialised, as in ET-VK), so each state is written with the model run's values once the graph is built.
    """
    from vkdiff.device.graph.delegate import DelegateGraph
    from vkdiff.device.graph.staging import write_nchw
    from vkdiff.datamodel import Tolerance
    from vkdiff.executors.node_refs import device_values, expect_nodes, node_expectation
    from vkdiff.verdicts.nodes import compare_nodes, node_magnitudes

    alone, device = cut.delegate, ctx.device
    trace = ctx.device = TraceDevice(device)
    try:
        graph = DelegateGraph(ctx, alone, route=route, tree=tree, tamper=tamper)
        for vid, state in cut.states.items():
            write_nchw(graph.graph, graph.graph.states[vid], state, prepack=True)
        run = graph.execute(cut.feeds)
    finally:
        ctx.device = device
    record = compare_nodes(alone, run, expect_nodes(alone, run), None)[0]
    node, built = run.nodes[0], graph.nodes[0]
    env, expected, magnitude = node_expectation(alone, node, device_values(alone, run))
    checks = [_value_check(trace, graph, vid, exp, Tolerance.for_dtype(alone.tensors[vid].dtype).bound(exp, mag))
              for vid, exp, mag in zip(node.call.outputs, expected, node_magnitudes(expected, magnitude))
              if vid in graph.readbacks]
    checks += [_state_check(trace, built, vid, before, env[vid], Tolerance.for_dtype(alone.tensors[vid].dtype))
               for vid, before in node.states_before.items()]
    if not checks:
        raise NodeReproError(f"node {node.index} ({node.op}) produces no tensor (host work on SymInts): nothing "
                             f"for a device to replay")
    return NodeRecording(trace=trace, record=record, checks=checks)


def node_manifest(result, record: dict[str, Any], in_model: dict[str, Any], step: int | None) -> dict[str, Any]:
    """What the folder says of itself: the node, the verdict alone (replay's target) and in the model."""
    worst = max(record["outputs"], key=lambda o: (Status[o["status"]].is_failure(), o["mismatches"] or 0))
    return {"case": f"{result.case} node {record['index']}", "op": record["op"], "device": result.device,
            "device_info": result.device_info, "knobs": result.knobs,
            "verdict": {"status": record["status"], "max_abs": worst["max_abs"], "mismatches": worst["mismatches"]},
            "in_model": {"status": in_model["status"], "step": step, "outputs": in_model["outputs"]},
            "shaders": sorted({d["shader"] for d in record["dispatches"] if not d["skipped"]}),
            "dispatches": record["dispatches"], "versions": result.versions}


@dataclasses.dataclass(kw_only=True)
class NodeRepro:
    """A node's folder and the two verdicts it carries."""

    folder: Path
    index: int
    alone: dict[str, Any]
    """vkdiff's record of the node run alone (what replay reproduces)."""
    in_model: dict[str, Any]
    """Its record in the model run."""

    def lines(self, case_id: str, device: str) -> list[str]:
        a, m = self.alone, self.in_model
        out = [f"{case_id} node {self.index} ({a['op']}, {a['shader']})@{device}: {a['status']} alone, "
               f"{m['status']} in the model; replay with: python {self.folder / 'run_repro.py'}"]
        if a["status"] != m["status"]:
            out.append("the verdicts differ: the node alone is fed the values the device computed for it in the "
                       "model, so what differs is context (other nodes, resized shapes, shared caches)")
        return out


def repro_node(ctx, model, ident: dict[str, Any], out_dir: Path, *, node: int | None = None,
               step: int | None = None, route_name: str = "native", tree: Path | None = None,
               tamper=None) -> NodeRepro:
    """Run a prepared model case (``prepare_or_status``, or a saved artifact) on ``ctx``, cut out node ``node``
    (default: the first bad one) as it ran at call ``step`` (default: the call the verdict reports) and write its
    folder.

    Raises:
        NodeReproError: the case never reached its nodes, no node is bad and none was named, or no such node or step.
    """
    from vkdiff.device.runtime.routing import route_for
    from vkdiff.harness.device_models import run_prepared
    from vkdiff.repro.kernel import write_bundle
    from vkdiff.executors.node_refs import expect_nodes
    from vkdiff.verdicts.nodes import compare_nodes, first_diverging

    case_id = ident["case"]
    if not isinstance(model, tuple) and len([d for d in model.plan.delegates if d.vulkan]) != 1:
        raise NodeReproError(f"{case_id}: repro of a node needs a method with one Vulkan delegate (this one has "
                             f"{len([d for d in model.plan.delegates if d.vulkan])})")
    count = 0 if isinstance(model, tuple) else len(model.delegate.ops)
    if node is not None and count and not 0 <= node < count:
        raise NodeReproError(f"--node {node}: {case_id}'s delegate has nodes 0 to {count - 1}")
    runs: list = []
    result = run_prepared(ctx, model=model, ident=ident, route_name=route_name, tree=tree, tamper=tamper, keep=runs)
    if isinstance(model, tuple) or "nodes" not in result.metrics:
        raise NodeReproError(f"{case_id}@{ctx.info.slug}: {result.status} before every node ran, nothing to cut "
                             f"out ({(result.reason or '').splitlines()[0] if result.reason else 'no reason'})")
    if step is not None and not 0 <= step < len(runs):
        raise NodeReproError(f"--step {step}: {case_id} makes {len(runs)} calls (steps 0 to {len(runs) - 1})")
    index = next(d.index for d in model.plan.delegates if d.vulkan)
    runs = [run[index] for run in runs]
    if step is not None and step != result.metrics.get("nodes_step", 0):
        records = compare_nodes(model.delegate, runs[step], expect_nodes(model.delegate, runs[step]), None, index=index)
    else:
        records, step = result.metrics["nodes"], result.metrics.get("nodes_step", 0)
    if node is None:
        bad = first_diverging(records)
        if bad is None:
            raise NodeReproError(f"{case_id}@{ctx.info.slug}: every node is within tolerance ({result.status}); "
                                 f"name one with --node N (0 to {len(records) - 1}) to export it passing")
        node = bad["index"]
    recording = record_node(ctx, one_node(model.delegate, runs[step], node), route=route_for(route_name, ctx.info),
                            tree=tree, tamper=tamper)
    in_model = next(r for r in records if r["index"] == node)
    step_used = step if model.generation else None
    write_bundle(out_dir, recording.trace, recording.checks, node_manifest(result, recording.record, in_model,
                                                                           step_used))
    return NodeRepro(folder=out_dir, index=node, alone=recording.record, in_model=in_model)
