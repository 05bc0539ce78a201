"""``vkdiff cache verify``, ``vkdiff cache build`` and ``vkdiff cache clear``: argument parsing and printing; the
checks live in ``vkdiff.entry.cache_admin``, the builds in ``ShaderBuilder.build_many``."""

from __future__ import annotations

import argparse

from vkdiff.entry.terminal import EXIT_FAIL, UsageError


def add_parser(sub) -> None:
    cache = sub.add_parser("cache", help="Check or clear vkdiff's cache ($VKDIFF_CACHE_DIR)")
    cache_sub = cache.add_subparsers(dest="cache_command", required=True)
    verify = cache_sub.add_parser("verify", help="Check every cache entry against its content hash")
    verify.add_argument("--repair", action="store_true", help="Delete corrupt entries (rebuilt when next used)")
    verify.add_argument("--rebuild", action="store_true",
                        help="Also generate and compile again every cached module of the tree and compare the bytes "
                             "(needs glslc and the tree's codegen)")
    verify.add_argument("--et-src", default=None, metavar="TREE",
                        help="The tree --rebuild compiles (as for run: a checkout, REPO@REV, a tarball or none)")
    build = cache_sub.add_parser("build", help="Compile every shader variant of a tree (in parallel), so that runners "
                                               "sharing this cache, under any routing profile, never compile")
    build.add_argument("--et-src", default=None, metavar="TREE", help="The tree (as for run)")
    build.add_argument("--variants", metavar="REGEX", default=None, help="Only variants whose name matches")
    build.add_argument("--mediump", action="store_true", help="The mediump build of the half variants")
    build.add_argument("-j", "--jobs", type=int, default=None, help="glslc processes at once (default: CPU count)")
    cache_sub.add_parser("clear", help="Delete the whole cache")


def run(args: argparse.Namespace) -> int:
    """``vkdiff cache verify [--repair] [--rebuild [--et-src TREE]]`` (exit 1 when corrupt entries remain) and
    ``vkdiff cache clear``."""
    from vkdiff.entry import cache_admin
    from vkdiff.datamodel import cache_dir, cache_root

    root = cache_dir()
    if args.cache_command == "build":
        return _build(args)
    if args.cache_command == "clear":
        root = cache_root()
        files, size = cache_admin.clear(root)
        print(f"removed {root}: {files} files, {size / 2**20:.1f} MiB")
        return 0
    if args.et_src is not None and not args.rebuild:
        raise UsageError("vkdiff cache verify: --et-src names the tree --rebuild compiles; add --rebuild")
    rebuild = cache_admin.rebuilder(args.et_src, root) if args.rebuild else None
    report = cache_admin.verify(root, repair=args.repair, rebuild=rebuild)
    print(f"cache {root}")
    print("\n".join(report.lines()))
    if report.corrupt and args.repair:
        print(f"repaired {len(report.corrupt)} corrupt entries and deleted {len(report.stale)} leftovers; what was "
              f"deleted is rebuilt when next used")
    return EXIT_FAIL if report.corrupt and not args.repair else 0


def _build(args: argparse.Namespace) -> int:
    """``vkdiff cache build``: every variant of the tree (or those matching ``--variants``); exit 1 when one fails."""
    import os
    import re
    import time

    from vkdiff.device.shaders.build import BuildError, GlslcMissingError, ShaderBuilder, glslc_version
    from vkdiff.device.shaders.trees import EtSourceError, choose_tree

    try:
        tree = choose_tree(args.et_src)
        glslc_version()
    except (EtSourceError, GlslcMissingError) as exc:
        raise UsageError(str(exc)) from None
    if tree.path is None:
        raise UsageError(f"vkdiff cache build needs an ExecuTorch tree: {tree.note}")
    builder = ShaderBuilder(tree.path, mediump=args.mediump)
    pattern = re.compile(args.variants) if args.variants else None
    names = sorted(n for n in builder.variants() if pattern is None or pattern.search(n))
    cached = sum((builder.index_dir / f"{n}.json").exists() for n in names)
    start = time.perf_counter()
    built = builder.build_many(names, args.jobs or os.cpu_count() or 1)
    failed = {n: r for n, r in built.items() if isinstance(r, BuildError)}
    print(f"{tree.path}: {len(names)} variants, {cached} already cached, {len(names) - cached} built now, "
          f"{len(failed)} BUILD_FAIL, {time.perf_counter() - start:.1f} s")
    for name, error in sorted(failed.items()):
        print(f"  BUILD_FAIL {name}: {str(error).splitlines()[0]}")
    return EXIT_FAIL if failed else 0
