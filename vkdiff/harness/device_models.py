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

from vkdiff.harness.compare import ErrorStatistics
from vkdiff.harness.datamodel import Delegate, Result, Status, Tolerance, clip, versions

if TYPE_CHECKING:
    from vkdiff.cases.model_case import ModelCase

PORT_STALE_FLAG = "port-stale"
"""Flag on results whose launchers port C++ that differs in the user's tree (file names in ``metrics``)."""

def _value_for_reference(delegate, vid: int, device_value: np.ndarray) -> np.ndarray:
    return np.asarray(device_value).astype(delegate.tensors[vid].dtype, copy=False)


def compare_nodes(delegate, run, global_env: dict[int, np.ndarray] | None) -> list[dict[str, Any]]:
    """One record per node: local and global error of each output, the shader, host time."""
    from vkdiff.harness import interpret

    device_env = {vid: _value_for_reference(delegate, vid, v) for vid, v in run.values.items()}
    records = []
    for node in run.nodes:
        expected, magnitude = interpret.evaluate_node(delegate, node.call, device_env)
        outputs = []
        for index, (vid, exp) in enumerate(zip(node.call.outputs, expected)):
            if vid not in run.values:
                continue
            got = np.asarray(run.values[vid], np.float64).reshape(np.shape(exp))
            tol = Tolerance.for_dtype(delegate.tensors[vid].dtype)
            mag = magnitude if index == 0 and magnitude is not None and np.shape(magnitude) == np.shape(exp) else None
            stats = ErrorStatistics.from_arrays(got, exp, tol, magnitude=mag)
            entry = {"value": vid, "status": stats.status().name, "max_abs": stats.max_abs, "sqnr_db": stats.sqnr_db,
                     "mismatches": stats.mismatches, "worst_index": stats.worst_index}
            if global_env is not None and vid in global_env:
                entry["global_max_abs"] = float(np.max(np.abs(got - np.asarray(global_env[vid], np.float64)
                                                              .reshape(got.shape)))) if got.size else 0.0
            outputs.append(entry)
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


_EAGER_CACHE: dict[str, tuple[np.ndarray, tuple]] = {}


def eager_output(case: ModelCase) -> tuple[np.ndarray, tuple]:
    """The quantized eager model's outputs (flattened, in order) and the inputs (memoised: devices share them)."""
    if case.id not in _EAGER_CACHE:
        import torch

        from vkdiff.harness.models import eager, flat_outputs

        model, inputs, _ = eager(case)
        with torch.no_grad():
            out = flat_outputs(model(*inputs))
        _EAGER_CACHE.clear()
        _EAGER_CACHE[case.id] = (out, inputs)
    return _EAGER_CACHE[case.id]


def _base(case: ModelCase, ctx, route, repro: str) -> dict[str, Any]:
    return dict(case=case.id, op=case.name, device=ctx.info.slug, variant=case.variant, rule="device",
                knobs={**case.knobs, "route": route.name}, versions=versions(), seed=case.seed(), repro=repro,
                device_info=ctx.info_dict)


def check_on_device(case: ModelCase, ctx, *, route_name: str = "native", tree=None, repro: str = "",
                    tamper=None) -> Result:
    """One model case's delegate on one device under a routing profile: one ``device`` result (never raises)."""
    from vkdiff.device.routing import route_for

    start = time.perf_counter()
    route = route_for(route_name, ctx.info)
    base = _base(case, ctx, route, repro)
    try:
        status, fields = _check(case, ctx, route, tree, tamper)
    except Exception as exc:  # a harness bug must not abort the run
        from vkdiff.harness.kernels import status_of_exception

        status, reason = status_of_exception(exc)
        where = getattr(exc, "node_index", None)
        node = {} if where is None else {"index": where, "op": exc.node_op, "shader": getattr(exc, "shader", "")}
        prefix = f"node {where} ({exc.node_op}): " if where is not None else ""
        fields = dict(reason=clip(prefix + reason), node=node, shader=node.get("shader", ""))
        stale = getattr(exc, "stale", None)
        if stale:
            fields.update(flags=[PORT_STALE_FLAG], metrics={"port_stale": stale})
    fields.setdefault("metrics", {})["route"] = route.to_dict()
    return Result(status=status.name, seconds=round(time.perf_counter() - start, 3), **base, **fields)


@dataclasses.dataclass(kw_only=True)
class ModelInputs:
    """Everything a device needs to judge one model case: no torch, no executorch (picklable, portable)."""

    case_id: str
    delegate: Delegate
    """The decoded Vulkan delegate, constants included."""
    inputs: list[np.ndarray]
    """The case's seeded inputs, in ``input_ids`` order."""
    expected: np.ndarray
    """Eager PyTorch's outputs, flattened in order (float64)."""
    tolerance: Tolerance
    """Model-level tolerance of the output against eager."""


def prepare_model(case: ModelCase) -> ModelInputs | tuple[Status, str]:
    """Lower (cached) and evaluate eager once; a (status, reason) when the case cannot run on a device."""
    from vkdiff.device.graph.delegate import missing_launchers
    from vkdiff.harness import interpret
    from vkdiff.harness.edge import LowerError, quiet_libraries
    from vkdiff.harness.lower import lower
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
    expected, inputs = eager_output(case)
    return ModelInputs(case_id=case.id, delegate=delegate, inputs=[np.asarray(x) for x in inputs],
                       expected=expected, tolerance=model_tolerance(lowered))


def _check(case: ModelCase, ctx, route, tree, tamper) -> tuple[Status, dict[str, Any]]:
    prepared = prepare_model(case)
    if isinstance(prepared, tuple):
        return prepared[0], dict(reason=prepared[1])
    return judge(prepared, ctx, route, tree, tamper)


def judge(model: ModelInputs, ctx, route, tree=None, tamper=None) -> tuple[Status, dict[str, Any]]:
    """Run the delegate on ``ctx`` and judge every node and the output (raises device errors, with ``stale``)."""
    from vkdiff.device.graph.delegate import run_delegate, stale_for
    from vkdiff.harness import interpret

    delegate, xs, expected, tolerance = model.delegate, model.inputs, model.expected, model.tolerance
    try:
        run = run_delegate(ctx, delegate, xs, route=route, tree=tree, tamper=tamper)
    except Exception as exc:
        exc.stale = stale_for(delegate, tree)
        raise
    global_env = interpret.trace(delegate, xs)
    records = compare_nodes(delegate, run, global_env)
    out = np.concatenate([np.asarray(o, np.float64).reshape(-1) for o in run.outputs])
    reference = np.concatenate([np.asarray(global_env[vid], np.float64).reshape(-1) for vid in delegate.output_ids])
    vs_eager = ErrorStatistics.from_arrays(out, expected, tolerance)
    vs_reference = ErrorStatistics.from_arrays(out, reference, tolerance)
    metrics = {"vs_eager": vs_eager.to_dict(), "vs_reference": vs_reference.to_dict(), "nodes": records,
               "seconds_device_run": round(run.seconds, 4),
               "host_ms_per_node": round(1e3 * sum(n.host_seconds for n in run.nodes) / max(len(run.nodes), 1), 3)}
    flags = (["polyfilled"] if run.polyfilled else []) + ([PORT_STALE_FLAG] if run.stale else [])
    if run.stale:
        metrics["port_stale"] = run.stale
    shaders = sorted({d["shader"] for r in records for d in r["dispatches"] if not d["skipped"]})
    bad = first_diverging(records)
    common = dict(metrics=metrics, flags=flags, shaders=shaders, tolerance=tolerance.to_dict())
    if bad is not None:
        worst = next(o for o in bad["outputs"] if Status[o["status"]].is_failure())
        reason = (f"first diverging node {bad['index']} ({bad['op']}, {bad['shader']}): value %{worst['value']} "
                  f"max abs {worst['max_abs']:.3g}, {worst['mismatches']} elements over tolerance on its own "
                  f"inputs; model output vs eager max abs {vs_eager.max_abs:.3g}")
        return Status[worst["status"]], dict(reason=clip(reason), node={"index": bad["index"], "op": bad["op"]},
                                             shader=bad["shader"], **common)
    status = vs_eager.status()
    summary = (f"{len(records)} nodes within tolerance; output vs eager max abs {vs_eager.max_abs:.3g} "
               f"(SQNR {vs_eager.sqnr_db:.1f} dB), vs reference max abs {vs_reference.max_abs:.3g}")
    if status is not Status.PASS:
        summary += f"; {vs_eager.message().splitlines()[0]}"
    return status, dict(reason=clip(summary), **common)
