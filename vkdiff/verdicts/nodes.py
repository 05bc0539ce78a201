"""Every node of a delegate run judged on its own inputs (local) and against the reference program (global).

* **local**: the reference op evaluated on the *device's own* inputs of that node (and the
  delegate's constants) against the device's outputs, with the tolerance of the output's
  dtype (integer qparams exact; reductions scaled by their magnitude). This pins a fault
  to the node that made it: later nodes compute correctly from wrong inputs and stay
  within tolerance. The first node out of tolerance is the first diverging node.
* **global**: the reference interpreter's value of that node (the whole program in
  float64), recorded as evidence.

A mutated constant (a KV cache) is judged as the state after the node against the
reference op applied to the device's state before it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vkdiff.datamodel import Delegate, Source, Status, Tolerance
from vkdiff.datamodel.wellformed import SCALAR_KINDS, VK_RAW_LISTS
from vkdiff.executors.node_refs import NodeExpectation
from vkdiff.verdicts.compare import ErrorStatistics


def output_entry(vid: int, got: np.ndarray, exp: np.ndarray, tol: Tolerance, magnitude=None) -> dict[str, Any]:
    """One output of a node against its expectation."""
    stats = ErrorStatistics.from_arrays(got, exp, tol, magnitude=magnitude)
    return {"value": vid, "status": stats.status().name, "max_abs": stats.max_abs, "sqnr_db": stats.sqnr_db,
            "mismatches": stats.mismatches, "worst_index": stats.worst_index}


def state_entry(vid: int, before: np.ndarray, expected: np.ndarray, after: np.ndarray, tol: Tolerance
                ) -> dict[str, Any]:
    """A mutated constant (KV cache): the device's state after the node against the reference op applied to the
    device's state before it, on the slots either holds. A slot the device wrote where neither did is counted
    (``stray``), not judged: ET-VK's ``sdpa_kv_cache_update`` zero-fills the positions past the update up to its
    dispatch's rounding (measured: prefill of 7 tokens writes position 7), which decode overwrites before reading."""
    with np.errstate(invalid="ignore"):  # the poison pattern is a signalling NaN
        before, expected, after = (np.asarray(a, np.float64).reshape(-1) for a in (before, expected, after))
    untouched = np.isnan(before) & np.isnan(expected)
    entry = output_entry(vid, after[~untouched], expected[~untouched], tol)
    entry.update(state=True, slots_compared=int((~untouched).sum()), stray=int((untouched & ~np.isnan(after)).sum()))
    return entry


def node_magnitudes(expected: tuple[np.ndarray, ...], magnitude) -> list[np.ndarray | None]:
    """The reduction magnitude of each output, in its shape (None where the reference gave none for it)."""
    mags = []
    for index, exp in enumerate(expected):
        mag = magnitude[index] if isinstance(magnitude, tuple) else magnitude if index == 0 else None
        mags.append(np.reshape(mag, np.shape(exp)) if mag is not None and np.size(mag) == np.size(exp) else None)
    return mags


def _node_outputs(delegate: Delegate, node, run, expected, magnitude, global_env) -> list[dict[str, Any]]:
    outputs = []
    for vid, exp, mag in zip(node.call.outputs, expected, node_magnitudes(expected, magnitude)):
        if vid not in run.values:
            continue
        with np.errstate(invalid="ignore"):  # an unwritten element is the poison pattern, a signalling NaN
            got = np.asarray(run.values[vid], np.float64).reshape(np.shape(exp))
        tol = Tolerance.for_dtype(delegate.tensors[vid].dtype if vid in delegate.tensors else "int32")
        entry = output_entry(vid, got, exp, tol, mag)
        if global_env is not None and vid in global_env:
            ref = np.asarray(global_env[vid], np.float64)
            if ref.size == got.size:
                entry["global_max_abs"] = float(np.max(np.abs(got - ref.reshape(got.shape)))) if got.size else 0.0
                entry["global_status"] = ErrorStatistics.from_arrays(got, ref.reshape(got.shape), tol).status().name
        outputs.append(entry)
    return outputs


def compare_nodes(delegate: Delegate, run, expectations: list[NodeExpectation],
                  global_env: dict[int, np.ndarray] | None, *, index: int = 0, sources: dict[int, Source] | None = None,
                  handles: dict[int, list[int]] | None = None) -> list[dict[str, Any]]:
    """One record per node of delegate ``index``: local error of each output (and mutated state) against the node's
    reference on the device's inputs (``expectations``, ``vkdiff.executors.node_refs``), global error, the shader,
    host time, and where the node comes from."""
    records = []
    sources = sources or {}
    for node, expectation in zip(run.nodes, expectations):
        outputs = _node_outputs(delegate, node, run, expectation.expected, expectation.magnitude, global_env)
        for vid, after in node.states_after.items():
            tol = Tolerance.for_dtype(delegate.tensors[vid].dtype)
            outputs.append(state_entry(vid, node.states_before[vid], expectation.states[vid], after, tol))
        status = max((Status[o["status"]] for o in outputs), key=lambda s: (s.is_failure(), s), default=Status.PASS)
        source = sources.get(node.index)
        node_id = node.call.op.node_id
        records.append({"delegate": index, "index": node.index, "node_id": node_id,
                        "debug_handles": list((handles or {}).get(node_id, [])), "op": node.op,
                        "source": source.label() if source else "", "shader": node.shader,
                        "args": scalar_args(delegate, node.call), "launcher": node.launcher,
                        "status": status.name, "outputs": outputs,
                        "host_ms": round(node.host_seconds * 1e3, 3),
                        "dispatches": [{"shader": d.shader, "global": list(d.global_wg), "local": list(d.local_wg),
                                        "spec": {str(k): v for k, v in d.spec.items()}, "prepack": d.prepack,
                                        "skipped": d.skipped} for d in node.dispatches]})
    return records


SHOWN_KINDS = frozenset({*SCALAR_KINDS, *VK_RAW_LISTS, "Null"})
"""Value kinds a node's record shows by value (``Null`` as None); tensors and value lists are named by id elsewhere."""


def scalar_args(delegate: Delegate, call) -> dict[str, str]:
    """The node's non-tensor arguments as text, by schema name (``approximate: none``, ``padding: [3, 3]``): what an
    expectation matched inside a program reads."""
    args = {}
    for name, vid in call.args.items():
        kind = delegate.values[vid].get("kind")
        if kind in SHOWN_KINDS:
            args[name] = str(delegate.value(vid))
    return args


def first_diverging(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first node whose outputs leave tolerance on its own inputs."""
    return next((r for r in records if Status[r["status"]].is_failure()), None)


def node_label(record: dict[str, Any], delegates: int = 1) -> str:
    """``node 17 (et_vk.linear_q4gsw, q4gsw_linear_gemm…, layers.3.attention.wq, model.py:233)``; the delegate is
    named when the method has several."""
    inside = ", ".join(part for part in (record["op"], record.get("shader", ""), record.get("source", "")) if part)
    where = f" of delegate {record.get('delegate', 0)}" if delegates > 1 else ""
    return f"node {record['index']}{where} ({inside})"
