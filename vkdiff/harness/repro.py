"""``vkdiff repro CASE --device D -o DIR``: a self-contained folder that reproduces a kernel case's verdict.

The case runs once on the device through a recording device (``vkdiff.device.trace``);
the folder then holds every buffer and texture the run created, every write (inputs,
constants, params, the poison of fresh tensors), each dispatch's SPIR-V exactly as loaded,
bind-group layout, bindings, push constants and workgroup counts, and for each output
read back: the float64 reference, the element-wise bound of vkdiff's tolerance policy
and where each logical element sits in the raw read. ``run_repro.py`` (numpy and wgpu
only) replays it on any Vulkan device and prints the verdict; ``--amber`` also writes
``case.amber`` for Amber on devices without Python (``vkdiff.harness.amber``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from vkdiff.cases.kernels import KernelCase
from vkdiff.device import layouts
from vkdiff.device.trace import TraceDevice
from vkdiff.harness.datamodel import Result


def _outputs(expected: Any) -> tuple[np.ndarray, ...]:
    return expected if isinstance(expected, tuple) else (expected,)


def _gather(resource: dict[str, Any], read: dict[str, Any], shape: tuple[int, ...]) -> np.ndarray:
    """Raw element index of each logical element (width-packed outputs, as ``run_op`` allocates them)."""
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
    from vkdiff.harness.datamodel import Status
    from vkdiff.harness.kernels import base_result, launch, prepare_case, record_launch

    trace = TraceDevice(ctx.device)
    ctx.device = trace
    result = base_result(case, ctx.info.slug, Status.ERROR, seed=case.seed(session_seed), repro=repro,
                         device_info=ctx.info_dict, versions={"et_tree": ctx.builder.tree})
    prepared = prepare_case(case, session_seed)
    launched = launch(ctx, case, prepared)
    record_launch(result, launched, prepared)
    return result, trace, prepared, launched


def write_bundle(out_dir: Path, case: KernelCase, result: Result, trace: TraceDevice, prepared, launched) -> Path:
    """The folder: ``manifest.json``, ``data/``, ``spirv/``, ``expected.npz``, ``run_repro.py``."""
    from vkdiff.harness import repro_runner

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
    reads = [i for i, op in enumerate(trace.ops) if op["op"] == "read"]
    expected = _outputs(prepared.expected)
    tolerances = prepared.tolerance if isinstance(prepared.tolerance, tuple) else (prepared.tolerance,)
    magnitudes = prepared.magnitude if isinstance(prepared.magnitude, tuple) else (prepared.magnitude,) * len(expected)
    if len(reads) < len(expected):
        raise ValueError(f"{case.id}: the run read back {len(reads)} tensors for {len(expected)} outputs")
    arrays, outputs = {}, []
    for i, (exp, tol, mag) in enumerate(zip(expected, tolerances, magnitudes)):
        read_index = len(reads) - len(expected) + i
        op = trace.ops[reads[read_index]]
        exp = np.asarray(exp, np.float64)
        bound = tol.bound(exp, None if mag is None else np.reshape(mag, exp.shape))
        name = f"out{i}"
        arrays.update({f"{name}.expected": exp, f"{name}.bound": np.broadcast_to(bound, exp.shape),
                       f"{name}.gather": _gather(trace.resources[op["res"]], op, exp.shape)})
        outputs.append({"name": name, "read": read_index, "dtype": str(_outputs(launched.output)[i].dtype),
                        "shape": list(exp.shape)})
    np.savez_compressed(out_dir / "expected.npz", **arrays)
    manifest = {"case": case.id, "op": case.op, "device": result.device, "device_info": result.device_info,
                "verdict": {"status": result.status, "max_abs": result.metrics.get("max_abs"),
                            "mismatches": result.metrics.get("mismatches")},
                "shaders": result.shaders, "versions": result.versions, "seed": result.seed,
                "resources": trace.resources, "ops": ops, "outputs": outputs}
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1))
    shutil.copy(repro_runner.__file__, out_dir / "run_repro.py")
    return out_dir


def add_repro_parser(sub) -> None:
    repro = sub.add_parser("repro", help="Write a folder that reproduces a kernel case's verdict anywhere (numpy + "
                                         "wgpu, or Amber)")
    repro.add_argument("case", metavar="CASE", help="Kernel case id, exactly as 'vkdiff run --list' prints it")
    repro.add_argument("-o", "--output", metavar="DIR", required=True, help="Folder to write (created)")
    repro.add_argument("--device", metavar="SLUG", default=None, help="Adapter slug (default: the first)")
    repro.add_argument("--et-src", metavar="PATH", default=None, help="ExecuTorch tree (as for vkdiff run)")
    repro.add_argument("--limits-profile", metavar="NAME", default=None, help="Limits profile (as for vkdiff run)")
    repro.add_argument("--seed", metavar="INT", type=int, default=0, help="Session seed")
    repro.add_argument("--amber", action="store_true", help="Also write case.amber (buffer-only traces)")


def cmd_repro(args) -> int:
    """Record the case on the device and write the folder; one line per problem, before any device work."""
    from vkdiff.cases.kernels import KernelCase
    from vkdiff.device.build import ShaderBuilder
    from vkdiff.device.context import DeviceContext
    from vkdiff.harness.selection import SelectionError, find_case, tree_and_adapter

    case = find_case(args.case)
    if not isinstance(case, KernelCase):
        raise SelectionError(f"{case.id} is a model case: 'vkdiff bisect node' saves its first bad node; repro "
                               f"folders are made for kernel cases")
    tree, adapter = tree_and_adapter(args.et_src, args.device)
    ctx = DeviceContext(*adapter, ShaderBuilder(tree.path), args.limits_profile)
    try:
        result, trace, prepared, launched = record_case(ctx, case, session_seed=args.seed)
    except Exception as exc:  # the case never reached a dispatch worth replaying
        from vkdiff.harness.kernels import status_of_exception

        status, reason = status_of_exception(exc)
        print(f"{case.id}@{ctx.info.slug}: {status.name} before any output was read: nothing to replay ({reason})")
        return 1
    out = write_bundle(Path(args.output), case, result, trace, prepared, launched)
    print(f"{case.id}@{result.device}: {result.status}; replay with: python {out / 'run_repro.py'}")
    if args.amber:
        from vkdiff.harness.amber import AmberExportError, write_amber

        try:
            print(f"amber: {write_amber(out)}")
        except AmberExportError as exc:
            print(f"amber: not written: {exc}")
    return 0
