"""``vkdiff cache verify`` and ``vkdiff cache clear``: argument parsing and printing; the checks live in
``vkdiff.entry.cache_admin``."""

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
    cache_sub.add_parser("clear", help="Delete the whole cache")


def run(args: argparse.Namespace) -> int:
    """``vkdiff cache verify [--repair] [--rebuild [--et-src TREE]]`` (exit 1 when corrupt entries remain) and
    ``vkdiff cache clear``."""
    from vkdiff.entry import cache_admin
    from vkdiff.datamodel import cache_dir, cache_root

    root = cache_dir()
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
