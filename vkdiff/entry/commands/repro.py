"""``vkdiff repro CASE -o DIR``: argument parsing and printing; kernel folders are recorded in
``vkdiff.repro.kernel``, node folders in ``vkdiff.repro.node``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vkdiff.cases.kernels import KernelCase
from vkdiff.repro.kernel import kernel_checks, kernel_manifest, record_case, write_bundle


def add_parser(sub) -> None:
    from vkdiff.entry.options import add_case_device_options

    repro = sub.add_parser("repro", help="Write a folder that reproduces a kernel case's or a node's verdict anywhere "
                                         "(numpy + wgpu, or Amber)")
    add_case_device_options(repro, profiles_help="as for vkdiff run")
    repro.add_argument("-o", "--output", metavar="DIR", required=True, help="Folder to write (created)")
    repro.add_argument("--node", metavar="N", type=int, default=None,
                       help="Model cases: the node to cut out (default: the first bad node)")
    repro.add_argument("--step", metavar="K", type=int, default=None,
                       help="Generation cases: the call the node is cut from, 0 = prefill (default: the call the "
                            "verdict reports)")
    repro.add_argument("--amber", action="store_true", help="Also write case.amber (Amber script: buffers and images)")
    repro.add_argument("--from-artifacts", metavar="DIR", default=None,
                       help="Model cases: take the case from 'vkdiff run --save-artifacts DIR' (no torch needed)")


def run(args) -> int:
    """Record the case (or the node) on the device and write the folder; one line per problem, before any device
    work."""
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.runtime.context import DeviceContext
    from vkdiff.harness.selection import tree_and_adapter

    case, prepared = _selected(args)
    tree, adapter = tree_and_adapter(args.et_src, args.device, args.settings)
    ctx = DeviceContext(*adapter, ShaderBuilder(tree.path, mediump=args.settings.mediump), args.limits_profile, settings=args.settings)
    out = _kernel_folder(args, case, ctx) if case is not None else _node_folder(args, *prepared, ctx, tree.path)
    if out is None:
        return 1
    if args.amber:
        from vkdiff.repro.amber import AmberExportError, write_amber

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
        from vkdiff.subjects.artifacts import ArtifactError, load

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
        from vkdiff.verdicts.statuses import status_of_exception

        status, reason = status_of_exception(exc)
        print(f"{case.id}@{ctx.info.slug}: {status.name} before any output was read: nothing to replay ({reason})")
        return None
    out = write_bundle(Path(args.output), trace, kernel_checks(case, trace, prepared, launched),
                       kernel_manifest(case, result))
    print(f"{case.id}@{result.device}: {result.status}; replay with: python {out / 'run_repro.py'}")
    return out


def _node_folder(args, model, ident: dict[str, Any], ctx, tree: Path) -> Path | None:
    from vkdiff.repro.node import NodeReproError, repro_node

    try:
        made = repro_node(ctx, model, ident, Path(args.output), node=args.node, step=args.step,
                          route_name=args.route, tree=tree)
    except NodeReproError as exc:
        print(exc)
        return None
    print("\n".join(made.lines(ident["case"], ctx.info.slug)))
    return made.folder
