"""Run vkdiff with one revision's ``backends/vulkan`` Python package in place of the installed one.

``python -m vkdiff.bisect.shim TREE ARGS...`` puts ``TREE/backends`` first on
``executorch.backends.__path__`` (so ``executorch.backends.vulkan`` — partitioner, passes,
patterns, op registry — is imported from the revision; everything else stays the
installed executorch), checks that it was, and runs ``vkdiff ARGS...``. Exit status
``IMPORT_FAILED`` with one line on stderr when the revision does not import against the
installed executorch.
"""

from __future__ import annotations

import sys
from pathlib import Path

IMPORT_FAILED = 86


def use_vulkan_package(tree: Path) -> str:
    """Import ``executorch.backends.vulkan`` from ``tree``; its file on success.

    Raises:
        ImportError: it does not import, or resolved somewhere else.
    """
    import executorch.backends as backends

    backends.__path__.insert(0, str(tree / "backends"))
    import executorch.backends.vulkan as vulkan
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner  # noqa: F401

    where = str(Path(vulkan.__file__).resolve())
    if not where.startswith(str(tree.resolve())):
        raise ImportError(f"executorch.backends.vulkan resolved to {where}, not {tree}")
    return where


def main(argv: list[str]) -> int:
    tree, rest = Path(argv[0]), argv[1:]
    try:
        use_vulkan_package(tree)
    except Exception as exc:  # any import-time failure means: this revision cannot lower here
        print(f"vkdiff shim: {tree}: backends/vulkan does not import against the installed executorch: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return IMPORT_FAILED
    import runpy

    sys.argv = ["vkdiff", *rest]
    try:
        runpy.run_module("vkdiff.entry.cli", run_name="__main__")
    except SystemExit as done:
        return int(done.code or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
