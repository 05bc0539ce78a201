"""The verdict on everything a method ran on one device: node by node, repeated, replayed whole.

In order: a run that raised takes the status its exception maps to, with the delegate,
node, step and shader it was at; else the node-by-node verdict (``program.judge_steps``);
a repeat whose node value differs bitwise from the first run makes it ``NONDETERMINISTIC``,
as does a whole-graph replay that differs from the node-by-node run or the replay before;
replays that agree while the stream has a hazard no barrier orders are ``FAIL_SYNC``;
else the node-by-node verdict stands (it compared the same bits with the references).
"""

from __future__ import annotations

import traceback
from typing import Any

from vkdiff.datamodel import DEVICE_LOST_FLAG, PreparedProgram, Status
from vkdiff.device.boundary import is_device_lost
from vkdiff.executors.program_runs import Difference, ProgramRuns, Replays
from vkdiff.verdicts.program import PORT_STALE_FLAG, judge_steps
from vkdiff.verdicts.statuses import status_of_exception


def judge_program(model: PreparedProgram, runs: ProgramRuns) -> tuple[Status, dict[str, Any]]:
    """The status and result fields of ``runs`` (a fault in judging is ``ERROR``: never raises)."""
    if runs.error is not None:
        return failed(runs.error)
    try:
        status, fields = judge_steps(model, runs.steps, runs.build_seconds)
        if runs.difference is not None:
            return nondeterministic(model, runs.difference, runs.repeat, status, fields)
        if runs.replays is not None:
            return judge_replays(runs.replays, status, fields)
        return status, fields
    except Exception as exc:  # a verdict bug must not abort the run
        return failed(exc)


def failed(exc: Exception) -> tuple[Status, dict[str, Any]]:
    """The status and fields of a device run that raised: the delegate, node, step and shader it was at."""
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


def nondeterministic(model: PreparedProgram, found: Difference, repeat: int, status: Status,
                     fields: dict[str, Any]) -> tuple[Status, dict[str, Any]]:
    """A repeat whose node value differs bitwise from the first run: which run, step, node and value, how much."""
    node = found.node
    fields.setdefault("metrics", {})["nondeterministic"] = {
        "run": found.run, "step": found.step, "delegate": found.delegate, "index": node.index, "op": node.op,
        "value": found.value, "shader": node.shader, "differing": found.differing, "total": found.total,
        "first_run_status": status.name}
    reason = (f"run {found.run} of {repeat} differs bitwise from run 1 at step {found.step}, node {node.index} "
              f"({node.op}, {node.shader}): %{found.value} in {found.differing} of {found.total} elements (run 1 "
              f"alone: {status.name})")
    where = {"index": node.index, "op": node.op, "delegate": found.delegate,
             **({"step": found.step} if model.generation else {})}
    return Status.NONDETERMINISTIC, {**fields, "reason": reason, "node": where, "shader": node.shader}


def judge_replays(replays: Replays, status: Status, fields: dict[str, Any]) -> tuple[Status, dict[str, Any]]:
    """Replays that differ are ``NONDETERMINISTIC`` (with a map of where, and the stream's hazard if any); replays
    that agree on a stream no barrier orders are ``FAIL_SYNC``; else the node-by-node verdict stands."""
    if replays.differs is not None:
        status, fields = _replay_differs(replays, status, fields)
        fields["metrics"]["replays"]["memory"] = replays.memory
        if replays.hazard is not None:
            fields["reason"] += f"; the recorded stream has a hazard: {replays.hazard}"
        return status, fields
    fields.setdefault("metrics", {})["replays"] = {
        "count": replays.count, "identical": True, "seconds": round(replays.seconds, 3),
        "per_second": round(replays.executed / max(replays.seconds, 1e-9), 1), "memory": replays.memory}
    hazard = replays.hazard
    if hazard is not None:
        where = ("on this device: latent here" if replays.own_barriers else
                 f"through {replays.transport}, which orders every dispatch itself")
        reason = f"{hazard} ({replays.count} whole-graph replays identical {where}; node by node alone: {status.name})"
        return Status.FAIL_SYNC, {**fields, "reason": reason, "node": {"index": hazard.node_index},
                                  "shader": hazard.shader}
    return status, fields


def _replay_differs(replays: Replays, status: Status, fields: dict[str, Any]) -> tuple[Status, dict[str, Any]]:
    differs = replays.differs
    replay, found = differs["replay"], differs["map"]
    against = "the node-by-node run" if replay == 1 else "replay 1"
    what = (f"{found['differing']} of {found['total']} elements, first at {found['first'][0]}, within "
            f"{found['box'][0]}..{found['box'][1]}" if found else "its shape")
    fields.setdefault("metrics", {})["replays"] = {"count": replays.count, "identical": False, **differs,
                                                   "first_run_status": status.name}
    reason = (f"whole-graph replay {replay} of {replays.count} (no probes between nodes) differs bitwise from "
              f"{against} at step {differs['step']}, delegate {differs['delegate']} output {differs['output']}: "
              f"{what} (node by node alone: {status.name})")
    return Status.NONDETERMINISTIC, {**fields, "reason": reason}
