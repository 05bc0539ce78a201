"""Model cases on a Vulkan device: the lowered delegate run node by node, every node judged.

For one (case, device, routing profile): the case is lowered (cached), its Vulkan
delegate runs through ``vkdiff.device.graph.delegate`` with every node's outputs probed,
and three comparisons are made:

* per node, **local**: the reference op evaluated on the *device's own* inputs of that
  node (and the delegate's constants) against the device's outputs. This pins a
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

import time
from typing import Any

import numpy as np

from vkdiff.cases.model_case import ModelCase
from vkdiff.harness.compare import ErrorStatistics
from vkdiff.harness.datamodel import Result, Status, Tolerance, clip, versions

PORT_STALE_FLAG = "port-stale"
"""Flag on results whose launchers port C++ that differs in the user's tree (file names in ``metrics``)."""

QUANT_STEPS = 2
"""Input codes a dynamically quantized node may round differently from float64 (float32 ``x / s`` at ties)."""


def node_tolerance(delegate, call, env: dict[int, np.ndarray], vid: int) -> Tolerance:
    """The dtype policy row for one output, plus slack where the node quantizes its input on the device.

    ``linear_dq8ca_q4gsw`` rounds ``x / s_x`` in float32: a value at a rounding tie may
    land on the neighbouring code, moving the output by ``s_x * |w|`` for that term.
    ``choose_qparams_affine``'s zero point may likewise differ by one from float64.
    """
    dtype = np.dtype(delegate.tensors[vid].dtype)
    base = Tolerance.for_dtype(dtype)
    name = call.op.name
    if name.startswith("et_vk.linear_dq8ca_q4gsw"):
        scale = float(np.max(np.abs(env[call.args["input_scales"]])))
        weight = delegate.constants.get(call.args["weight_scales"])
        wmax = 8.0 * float(np.max(np.abs(weight))) if weight is not None else 1.0
        return Tolerance(atol=base.atol + QUANT_STEPS * scale * wmax, rtol=base.rtol, acc=base.acc, eps=base.eps)
    if name.startswith("torchao.choose_qparams") and dtype.kind in "iu":
        return Tolerance(atol=1.0)
    return base


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
            tol = node_tolerance(delegate, node.call, device_env, vid)
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
