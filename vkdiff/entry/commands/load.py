"""``vkdiff load``: every shader variant of a tree loaded on each device, through wgpu or raw Vulkan."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re

from vkdiff.entry.options import parse_regex

_TRANSPORT_HELP = ("wgpu (default; naga re-translates every module) or vulkan (raw Vulkan: the SPIR-V as glslc built "
                   "it; env VKDIFF_TRANSPORT)")


def add_parser(sub) -> None:
    load = sub.add_parser("load", help="Load every shader variant of a tree on each device (what the transport runs)")
    load.add_argument("--et-src", metavar="TREE", default=None,
                      help="ExecuTorch tree: checkout, REPO@REV or tarball (default: as vkdiff run chooses)")
    load.add_argument("--device", metavar="SLUG", action="append", default=[], help="Adapter slug (repeatable)")
    load.add_argument("--transport", choices=("wgpu", "vulkan"), default=None, help=_TRANSPORT_HELP)
    load.add_argument("--variants", metavar="PATTERN", type=parse_regex, default=None,
                      help="Regular expression over variant names (default: every variant)")
    load.add_argument("--results", metavar="FILE.jsonl", default=None, help="One line per variant and device")
    load.add_argument("--json", action="store_true", help="Print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    """0 when every variant loaded or is NOT_SUPPORTED by a named lack; 1 when any failed to build or load."""
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.runtime.context import DeviceContext
    from vkdiff.entry.terminal import UsageError, check_outputs, resolve_inputs
    from vkdiff.entry.terminal import console as terminal_console
    from vkdiff.tools.loading import load_variants, summarise

    console = terminal_console(stderr=True, soft_wrap=True)
    if args.results:
        check_outputs((args.results, "--results", False))
    tree, devices, _ = resolve_inputs(args, console)
    if tree.path is None:
        raise UsageError(f"vkdiff load needs an ExecuTorch tree: {tree.note}")
    builder = ShaderBuilder(tree.path)
    if args.variants and not any(re.search(args.variants, name) for name in builder.variants()):
        raise UsageError(f"--variants {args.variants!r} matches none of the tree's {len(builder.variants())} shader "
                         f"variants: nothing would be loaded (vkdiff coverage lists them)")
    out = open(args.results, "a", encoding="utf-8") if args.results else None
    summaries, failed = {}, False
    try:
        for info, adapter in devices:
            ctx = DeviceContext(info, adapter, builder, settings=args.settings)
            results = []
            for result in load_variants(ctx, args.variants):
                results.append(result)
                if out is not None:
                    record = {"device": info.slug, "transport": args.settings.transport, **dataclasses.asdict(result)}
                    out.write(json.dumps(record) + "\n")
                    out.flush()
            summaries[info.slug] = summary = summarise(results)
            failed |= any(status in summary["counts"] for status in ("BUILD_FAIL", "LOAD_FAIL"))
    finally:
        if out is not None:
            out.close()
    _print(summaries, args.settings.transport, args.json)
    return 1 if failed else 0


def _print(summaries: dict, chosen: str, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"transport": chosen, "devices": summaries}, indent=2))
        return
    for slug, summary in summaries.items():
        counts = ", ".join(f"{n} {status}" for status, n in sorted(summary["counts"].items()))
        print(f"{slug} ({chosen}): {counts}")
        for status, reasons in sorted(summary["reasons"].items()):
            for reason, n in sorted(reasons.items(), key=lambda item: -item[1]):
                print(f"  {status} ×{n}: {reason}")
