"""The ops a tree's ET-VK runtime registers: what ``VulkanBackend::build_graph`` can load.

Each ``runtime/graph/ops/impl/*.cpp`` ends with ``VK_REGISTER_OP(name, fn)`` lines; the
runtime looks every serialized ``OperatorCall`` up by that name and aborts on one it lacks
(``ET_CHECK_MSG(VK_HAS_OP(op_name), "Missing operator: %s")`` in ``VulkanBackend.cpp``).
So a delegate holding an op no line registers cannot load on any device.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

IMPL_SUBDIR = Path("backends/vulkan/runtime/graph/ops/impl")
REGISTER = re.compile(r"VK_REGISTER_OP\(\s*([\w.]+)\s*,")
"""A registration; the name is the macro's ``#name`` (``aten.add.Tensor``, or a SymInt operator's bare ``add``)."""


@functools.lru_cache(maxsize=16)
def registered_ops(tree: Path) -> dict[str, str]:
    """Op name → registering file (``UnaryOp.cpp``), from the tree's ``VK_REGISTER_OP`` lines (empty without them)."""
    ops: dict[str, str] = {}
    for path in sorted((tree / IMPL_SUBDIR).glob("*.cpp")):
        for op in REGISTER.findall(path.read_text(errors="replace")):
            ops.setdefault(op, path.name)
    return ops


def runtime_ops(tree: Path | str | None) -> frozenset[str] | None:
    """The ops the tree's runtime registers, or None when unknown (no tree, or one without ``IMPL_SUBDIR``)."""
    if tree is None or not (Path(tree) / IMPL_SUBDIR).is_dir():
        return None
    return frozenset(registered_ops(Path(tree)))
