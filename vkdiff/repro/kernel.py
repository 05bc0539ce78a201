"""``vkdiff repro CASE --device D -o DIR``: a self-contained folder that reproduces a kernel case's verdict.

The case runs once on the device through a recording device (``vkdiff.device.transports.trace``);
the folder then holds every buffer and texture the run created, every write (inputs,
constants, params, the poison of fresh tensors), each dispatch's SPIR-V exactly as loaded,
bind-group layout, bindings, push constants and workgroup counts, and for each output
read back: the float64 reference, the element-wise bound of vkdiff's tolerance policy
and where each logical element sits in the raw read. ``run_repro.py`` (numpy and wgpu
only) replays it on any Vulkan device and prints the verdict; ``--amber`` also writes
``case.amber`` for Amber on devices without Python (``vkdiff.repro.amber``).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from vkdiff.cases.kernels import KernelCase
from vkdiff.device.runtime import layouts
from vkdiff.device.transports.trace import TraceDevice
from vkdiff.datamodel import Result


def _outputs(expected: Any) -> tuple[np.ndarray, ...]:
    return expected if isinstance(expected, tuple) else (expected,)


@dataclasses.dataclass(kw_only=True)
class Check:
    """One read of the trace that replay judges element-wise (``run_repro.judge``)."""

    name: str
    read: int
    """Index among the trace's reads."""
    dtype: str
    """Element dtype of the raw read."""
    expected: np.ndarray
    """float64, in the logical shape."""
    bound: np.ndarray
    """Element-wise bound of vkdiff's tolerance policy."""
    gather: np.ndarray
    """Raw element index of each logical element."""
    poison: bool = True
    """An element still holding vkdiff's poison is unwritten (``FAIL_CHECK``); False where vkdiff judges the value as
    it reads (a node's staging copy: poison is a NaN, ``FAIL_NAN``)."""


def _gather(resource: dict[str, Any], read: dict[str, Any], shape: tuple[int, ...]) -> np.ndarray:
    """Raw element index of each logical element of a width-packed output (``Launch.index`` has the others')."""
    count = int(np.prod(shape))
    if resource["kind"] == "buffer":
        return np.arange(count, dtype=np.int64).reshape(shape)
    width4, height, depth = read["size"]
    texels = np.arange(depth * height * width4 * 4, dtype=np.int64).reshape(depth, height, width4, 4)
    return layouts.from_texels(texels, shape)


def record_case(ctx, case: KernelCase, *, session_seed: int = 0, repro: str = "") -> tuple[Result, TraceDevice, Any,
                                                                                           Any]:
    """Run ``case`` once on ``ctx`` with its device recorded: (result, trace, prepared, launch).

    Raises what the run raises (a case that never reaches its dispatch has nothing to replay).
    """
    from vkdiff.datamodel import Status
    from vkdiff.executors.kernel import checked
    from vkdiff.harness.kernels import base_result
    from vkdiff.verdicts.kernels import record_launch
    from vkdiff.executors.references import prepare_case
    from vkdiff.executors.kernel import launch

    result = base_result(case, ctx.info.slug, Status.ERROR, seed=case.seed(session_seed), repro=repro,
                         device_info=ctx.info_dict, versions={"et_tree": ctx.builder.tree})
    prepared = prepare_case(case, session_seed)
    with ctx.recorded() as trace:
        launched = launch(ctx, case, prepared)
    record_launch(result, checked(case.op, launched, prepared))
    return result, trace, prepared, launched


def kernel_checks(case: KernelCase, trace: TraceDevice, prepared, launched) -> list[Check]:
    """A kernel case's outputs: the last reads of the run, one per output."""
    reads = [i for i, op in enumerate(trace.ops) if op["op"] == "read"]
    expected = _outputs(prepared.expected)
    tolerances = prepared.tolerance if isinstance(prepared.tolerance, tuple) else (prepared.tolerance,)
    magnitudes = prepared.magnitude if isinstance(prepared.magnitude, tuple) else (prepared.magnitude,) * len(expected)
    if len(reads) < len(expected):
        raise ValueError(f"{case.id}: the run read back {len(reads)} tensors for {len(expected)} outputs")
    checks = []
    for i, (exp, tol, mag) in enumerate(zip(expected, tolerances, magnitudes)):
        read_index = len(reads) - len(expected) + i
        op = trace.ops[reads[read_index]]
        exp = np.asarray(exp, np.float64)
        bound = tol.bound(exp, None if mag is None else np.reshape(mag, exp.shape))
        gather = (launched.index[i] if launched.index is not None
                  else _gather(trace.resources[op["res"]], op, exp.shape))
        checks.append(Check(name=f"out{i}", read=read_index, dtype=str(_outputs(launched.output)[i].dtype),
                            expected=exp, bound=np.broadcast_to(bound, exp.shape), gather=gather))
        checks.extend(_arithmetic_check(case, prepared, launched, checks[-1], tol))
    return checks


def _arithmetic_check(case: KernelCase, prepared, launched, plain: Check, tol) -> list[Check]:
    """The run's second check, where its variant declares its arithmetic: within ``tol.ulps`` of the reference
    with the kernel's rounding, under the ``fma`` model the run followed."""
    from vkdiff.executors.kernel import checked
    from vkdiff.verdicts.kernels import emulated

    model = emulated(checked(case.op, launched, prepared))
    if model is None or not tol.ulps or isinstance(launched.output, tuple):
        return []
    rounding = model.closest(np.asarray(launched.output, np.float64), tol.ulps)[0]
    output, scale = model.models[rounding.split(" fma, ")[0]]
    spacing = np.spacing(np.abs(scale).astype(model.dtype)).astype(np.float64)
    return [dataclasses.replace(plain, name=f"{plain.name}-as-kernel", expected=np.asarray(output, np.float64),
                                bound=tol.ulps * spacing)]


def kernel_manifest(case: KernelCase, result: Result) -> dict[str, Any]:
    return {"case": case.id, "op": case.op, "device": result.device, "device_info": result.device_info,
            "verdict": {"status": result.status, "max_abs": result.metrics.get("max_abs"),
                        "mismatches": result.metrics.get("mismatches"),
                        "tolerance_status": (result.metrics.get("envelope") or {}).get("tolerance_status",
                                                                                       result.status)},
            "shaders": result.shaders, "versions": result.versions, "seed": result.seed}


def write_bundle(out_dir: Path, trace: TraceDevice, checks: list[Check], manifest: dict[str, Any]) -> Path:
    """The folder: ``manifest.json`` (``manifest`` plus the trace and the checks), ``data/``, ``spirv/``,
    ``expected.npz``, ``run_repro.py``."""
    from vkdiff.repro import replay as repro_runner

    (out_dir / "data").mkdir(parents=True, exist_ok=True)
    (out_dir / "spirv").mkdir(exist_ok=True)
    for key, module in trace.modules.items():
        (out_dir / "spirv" / f"{key}.spv").write_bytes(module)
    ops = []
    for index, op in enumerate(trace.ops):
        op = dict(op)
        for field in ("data", "immediates"):
            if field in op:
                name = f"data/{index:04d}-{field}.bin"
                (out_dir / name).write_bytes(op[field])
                op[field] = name
        ops.append(op)
    arrays = {}
    for check in checks:
        arrays.update({f"{check.name}.expected": check.expected, f"{check.name}.bound": check.bound,
                       f"{check.name}.gather": check.gather})
    np.savez_compressed(out_dir / "expected.npz", **arrays)
    outputs = [{"name": c.name, "read": c.read, "dtype": c.dtype, "shape": list(c.expected.shape),
                "poison": c.poison} for c in checks]
    (out_dir / "manifest.json").write_text(json.dumps({**manifest, "transport": trace.transport,
                                                       "resources": trace.resources, "ops": ops,
                                                       "outputs": outputs}, indent=1, default=str))
    shutil.copy(repro_runner.__file__, out_dir / "run_repro.py")
    return out_dir
