"""``vkdiff lint``: static checks over every shader variant of a tree, no device needed."""

from __future__ import annotations

import argparse
import json
import re

from vkdiff.entry.options import parse_regex


def add_parser(sub) -> None:
    lint = sub.add_parser("lint", help="Static shader checks over a tree: barriers some invocations can skip, and "
                                       "buffer or image accesses no bounds check against tensor metadata guards")
    lint.add_argument("--et-src", metavar="TREE", default=None,
                      help="ExecuTorch tree: checkout, REPO@REV or tarball (default: as vkdiff run chooses)")
    lint.add_argument("--variants", metavar="PATTERN", type=parse_regex, default=None,
                      help="Regular expression over variant names (default: every variant)")
    lint.add_argument("--results", metavar="RESULTS.jsonl", nargs="*", default=(),
                      help="Results files: say, for each flagged variant, whether the workgroup sizes ET-VK "
                           "dispatched it with let invocations skip the barrier")
    lint.add_argument("--json", action="store_true", help="Print JSON instead of text")


def _dispatched_local_sizes(paths) -> dict[str, set[tuple[int, int, int]]]:
    """Shader variant → the workgroup sizes results dispatched it with."""
    from vkdiff.store import load

    sizes: dict[str, set[tuple[int, int, int]]] = {}
    for result in load(paths):
        local = (result.dispatch or {}).get("local")
        if result.shader and local:
            sizes.setdefault(result.shader, set()).add(tuple(int(v) for v in local))
    return sizes


def run(args: argparse.Namespace) -> int:
    """1 when any variant has a skippable barrier or an unchecked access, else 0."""
    from vkdiff.device.shaders.bounds import unchecked_accesses
    from vkdiff.device.shaders.build import BuildError, ShaderBuilder
    from vkdiff.device.shaders.trees import choose_tree
    from vkdiff.device.shaders.uniformity import skippable_barriers
    from vkdiff.entry.terminal import UsageError

    tree = choose_tree(args.et_src)
    if tree.path is None:
        raise UsageError(f"vkdiff lint needs an ExecuTorch tree: {tree.note}")
    builder = ShaderBuilder(tree.path)
    sizes = _dispatched_local_sizes(args.results)
    flagged, unchecked, unbuilt = {}, {}, {}
    for name in sorted(builder.variants()):
        if args.variants and not re.search(args.variants, name):
            continue
        try:
            spv = builder.build(name).spv
        except BuildError as exc:
            unbuilt[name] = str(exc)
            continue
        found = skippable_barriers(spv)
        if found:
            flagged[name] = [{"barrier": b.describe(), "sources": list(b.sources),
                              "dispatched": {str(list(s)): b.skippable_with(s) for s in sorted(sizes.get(name, ()))}}
                             for b in found]
        accesses = unchecked_accesses(spv)
        if accesses:
            names = builder.binding_names(name)
            unchecked[name] = [a.describe(names) for a in accesses]
    if args.json:
        print(json.dumps({"tree": str(tree.path), "skippable_barriers": flagged, "unchecked_accesses": unchecked,
                          "unbuilt": unbuilt}, indent=2))
    else:
        for name, barriers in flagged.items():
            for b in barriers:
                seen = ", ".join(f"{s}: {'skippable' if bad else 'uniform'}" for s, bad in b["dispatched"].items())
                print(f"{name}: {b['barrier']}" + (f" [dispatched {seen}]" if seen else ""))
        for name, accesses in unchecked.items():
            for access in accesses:
                print(f"{name}: {access}")
        print(f"{len(flagged)} variants with barriers some invocations can skip; {len(unchecked)} with accesses no "
              f"bounds check guards; {len(unbuilt)} not built")
    return 1 if flagged or unchecked else 0
