"""``vkdiff bisect node``: the first node of a model case whose device output leaves tolerance, with its inputs.

The delegate runs on one device exactly as in a ``device`` verdict. Each node is judged
on its own device inputs (the reference op on what the device fed it), so a fault is
pinned to the node that made it; the first node whose device value also leaves tolerance
against the reference interpreter's whole-chain value is reported beside it. The first
bad node's arguments (the device's own input values and the delegate's constants, by
schema name), its device output and the expected output are saved to
``DIR/node-<index>.npz`` with ``node-<index>.json`` describing the node, its dispatches and
tolerance: enough to rerun it as a one-op kernel (``vkdiff.executors.op_graph.run_op``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from vkdiff.datamodel import Result, Status


@dataclasses.dataclass(kw_only=True)
class NodeBisect:
    """Where a model case goes wrong on one device."""

    result: Result
    """The ``device`` verdict the bisect ran."""
    first_bad: dict[str, Any] | None
    """The first node out of tolerance on its own inputs (index, op, shader, step, worst output), or None."""
    first_global: dict[str, Any] | None
    """The first node whose device value leaves tolerance against the interpreter's whole-chain value."""
    saved: list[Path] = dataclasses.field(default_factory=list)
    """Files written for the first bad node."""

    def lines(self) -> list[str]:
        r = self.result
        out = [f"{r.case}@{r.device}: {r.status}"]
        if self.first_bad is None:
            out.append("every node is within tolerance on its own inputs"
                       + (f" ({r.reason.splitlines()[0]})" if r.reason else ""))
        else:
            b = self.first_bad
            step = f" at step {b['step']}" if b.get("step") is not None else ""
            out.append(f"first bad node{step}: {b['index']} {b['op']} ({b['shader']}): {b['status']}, value "
                       f"%{b['value']} max abs {b['max_abs']:.3g}, {b['mismatches']} elements over tolerance on its "
                       f"own inputs")
        if self.first_global is not None:
            g = self.first_global
            out.append(f"first node out of tolerance against the interpreter: {g['index']} {g['op']} "
                       f"(max abs {g['global_max_abs']:.3g})")
        out += [f"saved: {p}" for p in self.saved]
        return out


def _first_global(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    for record in records:
        for out in record["outputs"]:
            if Status[out.get("global_status", "PASS")].is_failure():
                return {"index": record["index"], "op": record["op"], "value": out["value"],
                        "global_max_abs": out["global_max_abs"]}
    return None


def bisect_node(case, ctx, *, route_name: str = "native", tree: Path | None = None, out_dir: Path | None = None,
                tamper=None) -> NodeBisect:
    """Run ``case`` (a model case) on ``ctx`` and name its first bad node; save that node's inputs to ``out_dir``."""
    from vkdiff.harness.device_models import identity, prepare_or_status, run_prepared
    from vkdiff.verdicts.nodes import first_diverging

    model = prepare_or_status(case)
    runs: list = []
    result = run_prepared(ctx, model=model, ident=identity(case), route_name=route_name, tree=tree, tamper=tamper,
                          keep=runs)
    if isinstance(model, tuple) or "nodes" not in result.metrics:
        return NodeBisect(result=result, first_bad=None, first_global=None)
    records, step = result.metrics["nodes"], result.metrics.get("nodes_step", 0)
    bad = first_diverging(records)
    first_bad = None
    saved: list[Path] = []
    if bad is not None:
        worst = next(o for o in bad["outputs"] if Status[o["status"]].is_failure())
        first_bad = {"delegate": bad["delegate"], "index": bad["index"], "op": bad["op"], "shader": bad["shader"], "status": bad["status"],
                     "step": step if model.generation else None, **{k: worst[k] for k in
                                                                    ("value", "max_abs", "mismatches")}}
        if out_dir is not None:
            saved = save_node(out_dir, model, runs[step][bad["delegate"]], bad, result)
    return NodeBisect(result=result, first_bad=first_bad, first_global=_first_global(records),
                      saved=saved)


def save_node(out_dir: Path, model, run, record: dict[str, Any], result: Result) -> list[Path]:
    """The node's arguments as the device saw them, its device and expected outputs, and what produced them."""
    from vkdiff.executors import interpret
    from vkdiff.executors.node_refs import device_values, node_expectation

    delegate = model.plan.delegates[record.get("delegate", 0)].graph
    node = next(n for n in run.nodes if n.index == record["index"])
    device_env = device_values(delegate, run)
    _, expected, _ = node_expectation(delegate, node, device_env)
    before = {vid: np.array(v, delegate.tensors[vid].dtype) for vid, v in node.states_before.items()}
    args = interpret.arguments(delegate, node.call, {**device_env, **before})
    arrays = {f"arg.{k}": np.asarray(v) for k, v in args.items() if isinstance(v, np.ndarray)}
    arrays.update({f"device.{i}": np.asarray(run.values[vid]) for i, vid in enumerate(node.call.outputs)
                   if vid in run.values})
    arrays.update({f"expected.{i}": e for i, e in enumerate(expected)})
    scalars = {k: v for k, v in args.items() if not isinstance(v, np.ndarray)}
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"node-{record['index']}"
    np.savez_compressed(stem.with_suffix(".npz"), **arrays)
    meta = {"case": result.case, "device": result.device, "knobs": result.knobs, "node": record["index"],
            "delegate": record.get("delegate", 0), "source": record.get("source", ""),
            "op": record["op"], "shader": record["shader"], "status": record["status"],
            "outputs": record["outputs"], "dispatches": record["dispatches"],
            "scalars": json.loads(json.dumps(scalars, default=str)),
            "output_tensors": [dataclasses.asdict(delegate.tensors[vid]) if vid in delegate.tensors else None
                               for vid in node.call.outputs],
            "versions": result.versions}
    stem.with_suffix(".json").write_text(json.dumps(meta, indent=1, default=str))
    return [stem.with_suffix(".npz"), stem.with_suffix(".json")]
