"""A Vulkan delegate the user's ET-VK cannot load: it holds an op the tree's runtime does not register.

``VulkanBackend::build_graph`` looks every serialized op up by name and aborts on one no
``VK_REGISTER_OP`` line names, on every device. The partitioner can still delegate such an op
(the pinned tree's ``op_registry.py`` accepts ``aten.logical_not.default``, which no
``impl/*.cpp`` registers), so this is ``FAIL_CHECK``, decided before any device work.
"""

from __future__ import annotations

from typing import Any, Collection

from vkdiff.datamodel import PreparedProgram, Status


def unregistered(model: PreparedProgram, registered: Collection[str]) -> dict[int, list[tuple[int, str]]]:
    """Per Vulkan delegate index: (op index in its chain, op name) of every op ``registered`` lacks."""
    found: dict[int, list[tuple[int, str]]] = {}
    for entry in model.plan.delegates:
        if entry.graph is None:
            continue
        missing = [(index, op.name) for index, op in enumerate(entry.graph.ops) if op.name not in registered]
        if missing:
            found[entry.index] = missing
    return found


def unloadable(model: PreparedProgram, registered: Collection[str] | None,
               tree: str) -> tuple[Status, dict[str, Any]] | None:
    """``FAIL_CHECK`` naming each delegate's unregistered ops, or None (all registered, or ``registered`` unknown).

    The reason reads "ET-VK cannot load this delegate: aten.logical_not.default is not registered by the runtime of
    TREE (VK_REGISTER_OP)", prefixed with "delegate N: " when the method has several Vulkan delegates.
    """
    found = unregistered(model, registered) if registered is not None else {}
    if not found:
        return None
    several = sum(entry.graph is not None for entry in model.plan.delegates) > 1
    parts = [_refusal(ops, tree, delegate if several else None) for delegate, ops in found.items()]
    delegate, [(index, op), *_] = next(iter(found.items()))
    node = {"index": index, "op": op, **({"delegate": delegate} if several else {})}
    metrics = {"unregistered": {str(d): sorted({name for _, name in ops}) for d, ops in found.items()}}
    return Status.FAIL_CHECK, dict(reason="; ".join(parts), node=node, metrics=metrics)


def _refusal(ops: list[tuple[int, str]], tree: str, delegate: int | None) -> str:
    names = sorted({name for _, name in ops})
    verb = "is" if len(names) == 1 else "are"
    where = f"delegate {delegate}: " if delegate is not None else ""
    return (f"{where}ET-VK cannot load this delegate: {', '.join(names)} {verb} not registered by the runtime of "
            f"{tree} (VK_REGISTER_OP)")
