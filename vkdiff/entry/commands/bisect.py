"""``vkdiff bisect node|knob|commit|device``: argument parsing and printing; the searches live beside this."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from vkdiff.entry.options import add_case_device_options, parse_device_profile
from vkdiff.datamodel.settings import RunSettings
from vkdiff.harness.selection import SelectionError, find_case, tree_and_adapter


def add_parser(sub) -> None:
    bisect = sub.add_parser("bisect", help="Find where a failure lives: its first bad node, knobs, commit or devices")
    modes = bisect.add_subparsers(dest="mode", required=True)
    node = modes.add_parser("node", help="The first node of a model case whose device output leaves tolerance")
    knob = modes.add_parser("knob", help="The smallest set of knob values that turns PASS into the failure")
    device = modes.add_parser("device", help="Every adapter, routing and limits profile, grouped by result")
    liberty = modes.add_parser("liberty", help="The smallest set of the Vulkan spec's liberties (the strict "
                                               "profile's rules; --device-profile names the set to search, default "
                                               "strict) under which the case fails; needs --transport vulkan")
    for parser in (node, knob, device, liberty):
        add_case_device_options(parser, profiles_help="knob: where the sweep starts")
    liberty.add_argument("--transport", choices=("vulkan",), default=None,
                         help="raw Vulkan, which loads the rewritten modules (or set VKDIFF_TRANSPORT=vulkan)")
    liberty.add_argument("--device-profile", metavar="PROFILE", type=parse_device_profile, default=None,
                         help="the rules to search: a profile (strict, mali, adreno) or rules joined by +")
    device.add_argument("--results", metavar="RESULTS.jsonl", nargs="+", default=None,
                        help="Group the case's results in these files (several runners' merged) instead of running "
                             "it: no device work, and the split can be a probed trait as well as a device")
    commit = modes.add_parser("commit", help="The first ExecuTorch commit at which the case's verdict becomes the "
                                             "--bad revision's")
    commit.add_argument("case", metavar="CASE", help="Case id, exactly as 'vkdiff run --list' prints it")
    commit.add_argument("--et-src", metavar="REPO", required=True,
                        help="ExecuTorch git repository (a checkout or a bare repository)")
    commit.add_argument("--good", metavar="REV", required=True, help="Revision with the old verdict (hash, tag, REV~N)")
    commit.add_argument("--bad", metavar="REV", required=True, help="Revision with the new verdict")
    commit.add_argument("--device", metavar="SLUG", default=None, help="Adapter slug (default: the first)")
    commit.add_argument("--seed", metavar="INT", type=int, default=0, help="Session seed")
    node.add_argument("-o", "--output", metavar="DIR", default="vkdiff-bisect",
                      help="Folder for the first bad node's inputs and outputs (default: vkdiff-bisect)")


def run(args: argparse.Namespace) -> int:
    if args.mode == "device" and args.results:
        return _device_results(args)
    case = find_case(args.case)
    if args.mode == "node":
        return _node(args, case)
    if args.mode == "commit":
        return _commit(args, case)
    if args.mode == "device":
        return _device(args, case)
    if args.mode == "liberty":
        return _liberty(args, case)
    return _knob(args, case)


def _contexts(adapter, tree, settings):
    """One DeviceContext per limits profile (None: the device's own) and local workgroup size (``default``: ET-VK's
    pick), made on first use."""
    from vkdiff.device.runtime import workgroups
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.runtime.context import DeviceContext

    builder, made = ShaderBuilder(tree.path, mediump=settings.mediump), {}

    def ctx_for(limits: str | None, local_wg: str = workgroups.DEFAULT) -> Any:
        if (limits, local_wg) not in made:
            made[(limits, local_wg)] = ctx = DeviceContext(*adapter, builder, limits, settings=settings)
            ctx.local_wg = workgroups.parse(local_wg)
        return made[(limits, local_wg)]
    return ctx_for


def _node(args: argparse.Namespace, case) -> int:
    from vkdiff.cases.kernels import KernelCase
    from vkdiff.bisect.node import bisect_node

    if isinstance(case, KernelCase):
        raise SelectionError(f"{case.id} is a kernel case: one node already; 'vkdiff repro' saves it")
    if not case.partitioner.startswith("vulkan"):
        raise SelectionError(f"{case.id} has no Vulkan delegate to bisect (partitioner {case.partitioner})")
    tree, adapter = tree_and_adapter(args.et_src, args.device, args.settings)
    ctx = _contexts(adapter, tree, args.settings)(args.limits_profile)
    found = bisect_node(case, ctx, route_name=args.route, tree=tree.path, out_dir=Path(args.output))
    print("\n".join(found.lines()))
    return 0 if found.first_bad is None else 1


def _knob(args: argparse.Namespace, case) -> int:
    from vkdiff.cases.kernels import KernelCase
    from vkdiff.bisect.knob import bisect_knobs
    from vkdiff.bisect.spaces import KernelSpace, ModelSpace
    from vkdiff.datamodel import Status

    tree, adapter = tree_and_adapter(args.et_src, args.device, args.settings)
    ctx_for = _contexts(adapter, tree, args.settings)
    if isinstance(case, KernelCase):
        from vkdiff.harness.kernels import run_case

        space = KernelSpace(case, lambda c, limits, wg: Status[run_case(ctx_for(limits, wg), c,
                                                                        session_seed=args.seed).status],
                            args.limits_profile)
    else:
        from vkdiff.harness.device_models import check_on_device

        space = ModelSpace(case, lambda c, route, limits, wg: Status[check_on_device(
            c, ctx_for(limits, wg), route_name=route, tree=tree.path).status], args.route, args.limits_profile,
            transport=args.settings.transport)
    found = bisect_knobs(space)
    print("\n".join(found.lines()))
    for config, status in found.trials:
        print(f"  {status:<16} {', '.join(f'{k}={v}' for k, v in config.items())}")
    return 1 if found.culprit else 0


def _commit(args: argparse.Namespace, case) -> int:
    from vkdiff.device.transports.adapters import UnknownDeviceError, select
    from vkdiff.device.shaders.trees import EtSourceError
    from vkdiff.bisect.commit import bisect_commits

    if not Path(args.et_src).expanduser().exists():
        raise SelectionError(f"--et-src {args.et_src}: no such repository (give an ExecuTorch checkout or a bare "
                               f"repository)")
    try:
        adapters = select([args.device] if args.device else [], via=args.settings.transport,
                          validate=args.settings.validate, profile=args.settings.device_profile)
    except UnknownDeviceError as exc:
        raise SelectionError(str(exc)) from None
    if not adapters:
        raise SelectionError("no Vulkan adapter found (install mesa-vulkan-drivers for lavapipe, or a GPU driver)")
    try:
        found = bisect_commits(args.et_src, args.good, args.bad, _commit_verdict(args.et_src, case, adapters[0],
                                                                                  args.settings))
    except EtSourceError as exc:
        raise SelectionError(str(exc)) from None
    print("\n".join(found.lines()))
    return 0 if found.first_bad is not None else 1


def _commit_verdict(repo: str, case, adapter, settings: RunSettings):
    """``verdict(commit) -> (signature, note)`` of ``case`` at a revision of ``repo``."""
    from vkdiff.cases.kernels import KernelCase
    from vkdiff.device.shaders.trees import TreeChoice
    from vkdiff.bisect.commit import relower_in_subprocess, signature, tree_at
    from vkdiff.datamodel import HOST
    from vkdiff.harness.runner import Runner

    def verdict(commit: str) -> tuple[str, str]:
        tree = tree_at(repo, commit)
        runner = Runner(tree=TreeChoice(path=tree, note=f"{repo}@{commit}"), adapters=[adapter], settings=settings)
        slug = runner.slugs[0]
        try:
            if isinstance(case, KernelCase):
                return signature(runner.run(case, slug)), ""
            from vkdiff.lowering.lower import vulkan_python_hash

            note = ""
            if vulkan_python_hash(tree / "backends" / "vulkan") != vulkan_python_hash():
                results, note = relower_in_subprocess(tree, case.id, slug, settings)
                if results:
                    return signature(results), note
                note += "; lowered with the installed package, bisecting shaders only"
            return signature([*runner.run(case, HOST), *runner.run(case, slug)]), note
        finally:
            runner.close()
    return verdict


def _device_results(args: argparse.Namespace) -> int:
    """``bisect device CASE --results F...``: the case's recorded results grouped; exit 1 when they differ."""
    from vkdiff.bisect.device import bisect_results
    from vkdiff.store import load

    missing = [p for p in args.results if not Path(p).is_file()]
    if missing:
        raise SelectionError(f"--results: no such file: {', '.join(missing)}")
    results = list(load([Path(p) for p in args.results]))
    found = bisect_results(args.case, results)
    if not found.groups:
        known = sorted({r.case for r in results})
        raise SelectionError(f"{args.case}: no result of this case in {', '.join(args.results)} (cases there: "
                             f"{', '.join(known[:5])}{', ...' if len(known) > 5 else ''})")
    print("\n".join(found.lines()))
    return 0 if len(found.groups) == 1 else 1


def _device(args: argparse.Namespace, case) -> int:
    from vkdiff.cases.kernels import KernelCase
    from vkdiff.device.transports.adapters import select
    from vkdiff.device.runtime import workgroups
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.runtime.context import DeviceContext
    from vkdiff.device.transports.limits import profiles as limits_profiles
    from vkdiff.device.runtime.routing import usable_profiles
    from vkdiff.device.shaders.trees import EtSourceError, choose_tree
    from vkdiff.bisect.device import bisect_devices

    try:
        tree = choose_tree(args.et_src)
    except EtSourceError as exc:
        raise SelectionError(str(exc)) from None
    adapters = {info.slug: (info, adapter) for info, adapter in select([args.device] if args.device else [],
                                                                       via=args.settings.transport,
                                                                       validate=args.settings.validate,
                                                                       profile=args.settings.device_profile)}
    if tree.path is None or not adapters:
        raise SelectionError(tree.note if tree.path is None else "no Vulkan adapter found")
    kernel = isinstance(case, KernelCase)
    routes = ["native"] if kernel else usable_profiles(args.settings.transport)
    configs = [{"device": d, "route": r, "limits": lim, "local_wg": workgroups.DEFAULT} for d in adapters
               for r in routes for lim in ["native", *limits_profiles()]]
    configs += [{"device": d, "route": "native", "limits": "native", "local_wg": wg} for d in adapters
                for wg in workgroups.CHOICES]
    builder, contexts = ShaderBuilder(tree.path, mediump=args.settings.mediump), {}

    def run(config):
        key = (config["device"], config["limits"], config["local_wg"])
        if key not in contexts:
            contexts[key] = DeviceContext(*adapters[config["device"]], builder,
                                          None if config["limits"] == "native" else config["limits"],
                                          settings=args.settings)
            contexts[key].local_wg = workgroups.parse(config["local_wg"])
        if kernel:
            from vkdiff.harness.kernels import run_case

            return run_case(contexts[key], case, session_seed=args.seed)
        from vkdiff.harness.device_models import check_on_device

        return check_on_device(case, contexts[key], route_name=config["route"], tree=tree.path)

    found = bisect_devices(case.id, configs, run)
    print("\n".join(found.lines()))
    return 0


def _liberty(args: argparse.Namespace, case) -> int:
    """Each rule set runs in a child process of its own (``--timeout``'s workers), on the adapter opened under it: a
    raw Vulkan process that opens many devices in turn is not one a bisect should trust."""
    import dataclasses

    from vkdiff.bisect.liberty import bisect_liberties
    from vkdiff.datamodel import Status
    from vkdiff.device.shaders.device_profiles import rules_of
    from vkdiff.entry.options import route_transport_problem
    from vkdiff.harness.runner import Runner

    profile = args.settings.device_profile or "strict"
    settings = dataclasses.replace(args.settings, device_profile=profile, timeout=args.settings.timeout or 600.0)
    problem = route_transport_problem(settings)
    if problem:
        raise SelectionError(problem)

    def evaluate(rules: tuple[str, ...]) -> Status:
        trial = dataclasses.replace(settings, device_profile="+".join(rules))
        tree, adapter = tree_and_adapter(args.et_src, args.device, trial)
        runner = Runner(tree=tree, adapters=[adapter], settings=trial, et_src=args.et_src)
        try:
            statuses = [Status[r.status] for r in runner.run(case, runner.slugs[0])]
        finally:
            runner.close()
        return next((s for s in statuses if s.is_failure()), statuses[0])

    found = bisect_liberties(profile, rules_of(profile), evaluate)
    print("\n".join(found.lines()))
    for rules, status in found.trials:
        print(f"  {status:<16} {' + '.join(rules) or '(none)'}")
    return 1 if found.culprit else 0
