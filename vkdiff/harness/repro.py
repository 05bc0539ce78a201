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

import dataclasses
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
        checks.append(Check(name=f"out{i}", read=read_index, dtype=str(_outputs(launched.output)[i].dtype),
                            expected=exp, bound=np.broadcast_to(bound, exp.shape),
                            gather=_gather(trace.resources[op["res"]], op, exp.shape)))
    return checks


def kernel_manifest(case: KernelCase, result: Result) -> dict[str, Any]:
    return {"case": case.id, "op": case.op, "device": result.device, "device_info": result.device_info,
            "verdict": {"status": result.status, "max_abs": result.metrics.get("max_abs"),
                        "mismatches": result.metrics.get("mismatches")},
            "shaders": result.shaders, "versions": result.versions, "seed": result.seed}


def write_bundle(out_dir: Path, trace: TraceDevice, checks: list[Check], manifest: dict[str, Any]) -> Path:
    """The folder: ``manifest.json`` (``manifest`` plus the trace and the checks), ``data/``, ``spirv/``,
    ``expected.npz``, ``run_repro.py``."""
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
    arrays = {}
    for check in checks:
        arrays.update({f"{check.name}.expected": check.expected, f"{check.name}.bound": check.bound,
                       f"{check.name}.gather": check.gather})
    np.savez_compressed(out_dir / "expected.npz", **arrays)
    outputs = [{"name": c.name, "read": c.read, "dtype": c.dtype, "shape": list(c.expected.shape),
                "poison": c.poison} for c in checks]
    (out_dir / "manifest.json").write_text(json.dumps({**manifest, "resources": trace.resources, "ops": ops,
                                                       "outputs": outputs}, indent=1, default=str))
    shutil.copy(repro_runner.__file__, out_dir / "run_repro.py")
    return out_dir


def add_repro_parser(sub) -> None:
    from vkdiff.harness.options import parse_limits_profile, parse_route

    repro = sub.add_parser("repro", help="Write a folder that reproduces a kernel case's or a node's verdict anywhere "
                                         "(numpy + wgpu, or Amber)")
    repro.add_argument("case", metavar="CASE", help="Case id, exactly as 'vkdiff run --list' prints it")
    repro.add_argument("-o", "--output", metavar="DIR", required=True, help="Folder to write (created)")
    repro.add_argument("--node", metavar="N", type=int, default=None,
                       help="Model cases: the node to cut out (default: the first bad node)")
    repro.add_argument("--step", metavar="K", type=int, default=None,
                       help="Generation cases: the call the node is cut from, 0 = prefill (default: the call the "
                            "verdict reports)")
    repro.add_argument("--device", metavar="SLUG", default=None, help="Adapter slug (default: the first)")
    repro.add_argument("--et-src", metavar="PATH", default=None, help="ExecuTorch tree (as for vkdiff run)")
    repro.add_argument("--route", metavar="PROFILE", type=parse_route, default="native",
                       help="Model cases: routing profile (as for vkdiff run)")
    repro.add_argument("--limits-profile", metavar="NAME", type=parse_limits_profile, default=None,
                       help="Limits profile (as for vkdiff run)")
    repro.add_argument("--seed", metavar="INT", type=int, default=0, help="Session seed (kernel cases)")
    repro.add_argument("--amber", action="store_true", help="Also write case.amber (buffer-only traces)")
    repro.add_argument("--from-artifacts", metavar="DIR", default=None,
                       help="Model cases: take the case from 'vkdiff run --save-artifacts DIR' (no torch needed)")


def cmd_repro(args) -> int:
    """Record the case (or the node) on the device and write the folder; one line per problem, before any device
    work."""
    from vkdiff.device.build import ShaderBuilder
    from vkdiff.device.context import DeviceContext
    from vkdiff.harness.selection import tree_and_adapter

    case, prepared = _selected(args)
    tree, adapter = tree_and_adapter(args.et_src, args.device)
    ctx = DeviceContext(*adapter, ShaderBuilder(tree.path), args.limits_profile)
    out = _kernel_folder(args, case, ctx) if case is not None else _node_folder(args, *prepared, ctx, tree.path)
    if out is None:
        return 1
    if args.amber:
        from vkdiff.harness.amber import AmberExportError, write_amber

        try:
            print(f"amber: {write_amber(out)}")
        except AmberExportError as exc:
            print(f"amber: not written: {exc}")
    return 0


def _selected(args) -> tuple[KernelCase | None, tuple[Any, dict[str, Any]] | None]:
    """A kernel case, or a model case prepared (model inputs, identity): from the catalogue or an artifact."""
    import re

    from vkdiff.harness.selection import SelectionError, find_case

    if args.from_artifacts:
        from vkdiff.harness.artifacts import ArtifactError, load

        try:
            found = load(Path(args.from_artifacts), "^" + re.escape(args.case) + "$")
        except ArtifactError as exc:
            raise SelectionError(str(exc)) from None
        if not found:
            raise SelectionError(f"{args.case}: not saved in --from-artifacts {args.from_artifacts} (artifacts hold "
                                 f"Vulkan model cases; kernel cases need no artifacts)")
        return None, (found[0].model, found[0].ident)
    case = find_case(args.case)
    if isinstance(case, KernelCase):
        if args.node is not None or args.step is not None:
            raise SelectionError(f"--node and --step are for model cases; {case.id} is a kernel case (one node "
                                 f"already)")
        return case, None
    if not case.partitioner.startswith("vulkan"):
        raise SelectionError(f"{case.id} has no Vulkan delegate to cut a node from (partitioner {case.partitioner})")
    from vkdiff.harness.device_models import identity, prepare_or_status

    return None, (prepare_or_status(case), identity(case))


def _kernel_folder(args, case: KernelCase, ctx) -> Path | None:
    try:
        result, trace, prepared, launched = record_case(ctx, case, session_seed=args.seed)
    except Exception as exc:  # the case never reached a dispatch worth replaying
        from vkdiff.harness.kernels import status_of_exception

        status, reason = status_of_exception(exc)
        print(f"{case.id}@{ctx.info.slug}: {status.name} before any output was read: nothing to replay ({reason})")
        return None
    out = write_bundle(Path(args.output), trace, kernel_checks(case, trace, prepared, launched),
                       kernel_manifest(case, result))
    print(f"{case.id}@{result.device}: {result.status}; replay with: python {out / 'run_repro.py'}")
    return out


def _node_folder(args, model, ident: dict[str, Any], ctx, tree: Path) -> Path | None:
    from vkdiff.harness.repro_node import NodeReproError, repro_node

    try:
        made = repro_node(ctx, model, ident, Path(args.output), node=args.node, step=args.step,
                          route_name=args.route, tree=tree)
    except NodeReproError as exc:
        print(exc)
        return None
    print("\n".join(made.lines(ident["case"], ctx.info.slug)))
    return made.folder
