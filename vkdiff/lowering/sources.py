"""Where each node of a Vulkan delegate comes from: module path and the user's source line.

ET-VK's debug-handle map cannot say it: ``VkGraphBuilder.process_node`` overwrites each
node's ``debug_handle`` with the node's position in the post-pass delegate graph before
``DelegateMappingBuilder`` reads it, so the map names positions, not the edge program's
handles that ETRecord and the Inspector resolve. vkdiff instead re-runs
``VulkanBackend.preprocess`` on a copy of each lowered module (which reproduces the
delegate byte for byte), watching ``process_call_function_node``: the k-th call it sees
is op k of the chain, with the node's own metadata (``nn_module_stack``,
``stack_trace``). A node a fusion pass created carries none; its source is the node whose
value it replaced in the module before the passes (found through the users it shares
with that graph), and failing that the parameter it reads. The re-run delegate is
matched to the program's by the sha256 of its bytes, so a source is never guessed.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import re
from typing import Any, Iterator

from vkdiff.datamodel import Program, Source

LIBRARY_PATHS = re.compile(r"/(torch|torchao|executorch|site-packages/torch\w*)/")
"""Frames of these packages are not the user's line (the last frame outside them is)."""
FRAME = re.compile(r'File "([^"]+)", line (\d+), in [^\n]*\n\s*(.*)')


@contextlib.contextmanager
def watch_builder() -> Iterator[list[Any]]:
    """Every call-function node ``VkGraphBuilder`` serializes inside the block, in chain order (one list per
    builder, appended as builders start)."""
    from executorch.backends.vulkan.serialization.vulkan_graph_builder import VkGraphBuilder

    seen: list[list[Any]] = []
    original_build, original_call = VkGraphBuilder.build_graph, VkGraphBuilder.process_call_function_node

    def build_graph(self):
        seen.append([])
        return original_build(self)

    def process_call_function_node(self, node):
        seen[-1].append(node)
        return original_call(self, node)

    VkGraphBuilder.build_graph, VkGraphBuilder.process_call_function_node = build_graph, process_call_function_node
    try:
        yield seen
    finally:
        VkGraphBuilder.build_graph, VkGraphBuilder.process_call_function_node = original_build, original_call


def source_of_meta(meta: dict[str, Any], how: str) -> Source | None:
    """A source from a node's ``nn_module_stack`` and ``stack_trace`` (None when it has neither)."""
    stack = meta.get("nn_module_stack") or {}
    trace = meta.get("stack_trace") or ""
    if not stack and not trace:
        return None
    module, module_type = "", ""
    if stack:
        module, module_type = list(stack.values())[-1]
        module = "" if str(module).startswith("_empty_nn_module_stack") else module
        module_type = getattr(module_type, "__module__", "") + "." + getattr(module_type, "__qualname__", "") \
            if not isinstance(module_type, str) else module_type
    frames = FRAME.findall(trace)
    user = [f for f in frames if not LIBRARY_PATHS.search(f[0])]
    file, line, code = (user or frames or [("", "0", "")])[-1]
    return Source(module=str(module), module_type=str(module_type), file=file, line=int(line), code=code.strip(),
                  how=how)


def _module_of(fqn: str) -> str:
    """Module path of a parameter's fully qualified name (``wq.parametrizations.weight.original0`` → ``wq``)."""
    return fqn.split(".parametrizations.")[0] if ".parametrizations." in fqn else fqn.rpartition(".")[0]


def _parameter_source(node: Any, original: Any, users: dict[str, list[Any]], how: str) -> Source | None:
    """Where the parameter ``node`` reads is used in the module before the passes (placeholders keep their names)."""
    signature = original.graph_signature
    names = {**signature.inputs_to_parameters, **signature.inputs_to_buffers,
             **getattr(signature, "inputs_to_lifted_tensor_constants", {})}
    for arg in node.all_input_nodes:
        if arg.op != "placeholder" or arg.name not in names:
            continue
        for user in users.get(arg.name, []):
            found = _first_with_meta([user], "users", how)
            if found is not None:
                return found
        return Source(module=_module_of(names[arg.name]), how=how)
    return None


def _first_with_meta(nodes: list[Any], direction: str, how: str, depth: int = 0) -> Source | None:
    """The source of the nearest node with metadata along ``users`` or ``all_input_nodes``."""
    for node in nodes:
        if node.op in ("placeholder", "output"):
            continue
        found = source_of_meta(node.meta, how)
        if found is not None:
            return found
    if depth < 3:
        nxt = [m for node in nodes for m in (node.users if direction == "users" else node.all_input_nodes)]
        return _first_with_meta(nxt, direction, how, depth + 1) if nxt else None
    return None


def _between(node: Any, how: str) -> Source | None:
    """A node known only by its neighbours: the module both the nearest node it feeds and the nearest that feeds it
    sit in (their common module path), at the line of the one it feeds."""
    after = _first_with_meta(list(node.users), "users", how)
    before = _first_with_meta(node.all_input_nodes, "inputs", how)
    if after is None or before is None:
        return after or before
    common = []
    for mine, theirs in zip(after.module.split("."), before.module.split(".")):
        if mine != theirs:
            break
        common.append(mine)
    return dataclasses.replace(after, module=".".join(common), module_type="" if common != after.module.split(".")
                               else after.module_type)


def node_sources(nodes: list[Any], original: Any, how: str) -> dict[int, Source]:
    """Op index → source for the chain's nodes: a node's own metadata; for one a pass created, the use of the
    parameter it reads in the module before the passes, else the nearest node it feeds, else the nearest that
    feeds it."""
    users: dict[str, list[Any]] = {}
    for node in original.graph_module.graph.nodes:
        if node.op == "placeholder":
            users[node.name] = list(node.users)
    out = {}
    for index, node in enumerate(nodes):
        source = (source_of_meta(node.meta, how) or _parameter_source(node, original, users, how)
                  or _between(node, how))
        if source is not None:
            out[index] = source
    return out


def delegate_sources(gm: Any, program: Program, how: str = "lowering"
                     ) -> tuple[dict[str, dict[int, Source]], dict[str, dict[int, list[int]]]]:
    """For every Vulkan lowered module of ``gm`` that matches a delegate of ``program`` byte for byte, keyed
    ``"<method>/<delegate index>"``: op index → source, and ``node_id`` → debug handles as ET-VK's map records
    them."""
    from executorch.backends.vulkan.vulkan_preprocess import VulkanBackend

    by_sha = {entry.sha256: f"{name}/{entry.index}" for name, method in program.methods.items()
              for entry in method.delegates if entry.sha256}
    sources: dict[str, dict[int, Source]] = {}
    handles: dict[str, dict[int, list[int]]] = {}
    for name, module in gm.named_children():
        if not name.startswith("lowered_module") or module.backend_id != "VulkanBackend":
            continue
        original = module.original_module
        with watch_builder() as seen:
            again = VulkanBackend.preprocess(copy.deepcopy(original), module.compile_specs)
        where = by_sha.get(hashlib.sha256(bytes(again.processed_bytes)).hexdigest())
        if where is not None and seen:
            sources[where] = node_sources(seen[-1], original, how)
            handles[where] = {int(k): [int(h) for h in v] for k, v in (again.debug_handle_map or {}).items()}
    return sources, handles
