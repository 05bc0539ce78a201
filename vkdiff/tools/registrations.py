"""What a tree's partitioner accepts against what its runtime registers, with the fate of every op in one and not
the other.

The partitioner accepts the keys of ``@update_features(...)`` in ``backends/vulkan/op_registry.py``
(read with ``ast``, never imported); the runtime registers the names of its ``VK_REGISTER_OP``
lines. ``VkGraphBuilder`` serializes each node as ``node.target.__name__``: an edge op with its
namespace (``aten.logical_not.default``), a torch op without it (``sym_size.int``), an
``operator`` function bare (``add``). An accepted op no line registers is harmless only where
``vulkan_preprocess`` removes or fuses it first; the fates below are read from the tree's passes,
patterns and graph builder, and ``DECLARED_FATES`` holds the few that no code states.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path
from typing import Callable, Iterable, Iterator

from vkdiff.device.runtime.registrations import IMPL_SUBDIR, registered_ops

VULKAN = Path("backends/vulkan")
OP_REGISTRY = VULKAN / "op_registry.py"
CANNOT_LOAD = "not registered: a delegate holding it cannot load"
TEST_ONLY = re.compile(r"(^|\.)test_|^testing\.")
"""Ops only ET-VK's own op tests build (``testing.compute_attn_weight_with_kv_cache``, ``etvk.test_*``)."""

DECLARED_FATES: dict[str, str] = {
    op: "symbolic: a SymInt comparison exported for a shape guard, dead once RemoveAssertsTransform removes the guard"
    for op in ("lt", "gt", "ge", "le", "eq")
}
"""Fates no code of the tree states. ``op_registry.py`` accepts the ``operator`` comparisons under "Ephemeral
Operators (no C++ dispatch - handled symbolically)" and SymIntOps.cpp registers only add, sub, floordiv and mul:
the comparisons feed ``_assert_scalar``, which ``_passes/remove_asserts.py`` erases before its dead-code pass."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class Accepted:
    """One key of the partitioner's ``vulkan_supported_ops``."""

    names: tuple[str, ...]
    """The names ``VkGraphBuilder`` may serialize for it (a string key ``ns::op`` may be an edge op or not)."""
    line: int
    features: str
    """The ``op_registry.py`` function that registers its ``OpFeatures``."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class Mismatch:
    """An op the partitioner accepts that the runtime does not register, or the reverse."""

    op: str
    where: str
    """``op_registry.py:1830 (register_logical_not)``, or the registering ``impl/*.cpp``."""
    fate: str
    """What becomes of it, read from the tree (``DECLARED_FATES`` where no code states it)."""
    cannot_load: bool
    """A delegate may hold it (no fate removes every occurrence), and ET-VK then cannot load that delegate."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class Refs:
    """The ops a file of the tree names: directly, or through a ``utils.is_*_node`` predicate it calls."""

    names: frozenset[str] = frozenset()
    predicates: tuple[Callable[[str], bool], ...] = ()
    """Tests of an op's name without its namespace, as ``format_target_name`` gives it to ``utils.py``."""

    def hold(self, names: Iterable[str]) -> bool:
        """Whether any of ``names`` (one op's serialized names) is named here."""
        return any(name in self.names or any(test(bare_name(name)) for test in self.predicates) for name in names)


@dataclasses.dataclass(kw_only=True, frozen=True)
class Fate:
    """One way ``vulkan_preprocess`` (or the graph builder) disposes of an op."""

    text: str
    always: bool
    """It applies to every occurrence, so no serialized delegate holds the op."""


def _dotted(node: ast.expr) -> list[str]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else []


def serialized_names(key: ast.expr) -> tuple[str, ...]:
    """The ``OperatorCall`` names a partitioner key or pass target serializes as (empty: not an op reference)."""
    if isinstance(key, ast.Constant) and isinstance(key.value, str) and "::" in key.value:
        namespace, name = key.value.split("::", 1)
        name = name if "." in name else f"{name}.default"
        return f"{namespace}.{name}", name
    parts = _dotted(key)
    if parts[:2] == ["exir_ops", "edge"] and len(parts) == 5:
        return (".".join(parts[2:]),)
    if parts[:2] == ["torch", "ops"] and len(parts) == 5:
        return (".".join(parts[3:]),)
    if parts[:1] == ["operator"] and len(parts) == 2:
        return (parts[1],)
    return ()


def bare_name(name: str) -> str:
    """``name`` without its namespace, as ExecuTorch's ``format_target_name`` (``exir/backend/
    canonical_partitioners/config_partitioner.py``) gives it to the predicates of ``backends/vulkan/utils.py``."""
    parts = name.split(".")
    return ".".join(parts[1:]) if len(parts) > 2 else name


def _parse(tree: Path, relative: Path) -> ast.Module | None:
    path = tree / relative
    return ast.parse(path.read_text(errors="replace")) if path.is_file() else None


def accepted_ops(tree: Path) -> list[Accepted]:
    """Every key of ``@update_features`` in the tree's ``op_registry.py`` (empty without the file)."""
    module, found = _parse(tree, OP_REGISTRY), []
    for function in ast.walk(module) if module is not None else ():
        if not isinstance(function, ast.FunctionDef):
            continue
        for decorator in function.decorator_list:
            if isinstance(decorator, ast.Call) and _dotted(decorator.func)[-1:] == ["update_features"]:
                arg = decorator.args[0]
                for key in arg.elts if isinstance(arg, ast.List) else [arg]:
                    names = serialized_names(key) or (ast.unparse(key),)
                    found.append(Accepted(names=names, line=key.lineno, features=function.name))
    return found


def _references(node: ast.AST) -> set[str]:
    """Serialized names of every op referenced under ``node``."""
    return {name for sub in ast.walk(node) if isinstance(sub, (ast.Attribute, ast.Constant))
            for name in serialized_names(sub)}


def _assigned(node: ast.stmt) -> list[str]:
    """Names an assignment statement binds (none for other statements)."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return [t.id for t in targets if isinstance(t, ast.Name)]


def _class_set(module: ast.Module | None, cls: str, attribute: str) -> set[str]:
    """Op names in the set literal ``cls.attribute`` (``RemoveRedundantOpsTransform.redundant_ops``)."""
    for node in ast.walk(module) if module is not None else ():
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if attribute in _assigned(item):
                    return _references(item.value)
    return set()


def _module_strings(module: ast.Module, name: str) -> frozenset[str]:
    """Strings of the module-level collection ``name`` (``utils._DQ_OPS``)."""
    for node in module.body:
        if name in _assigned(node):
            return frozenset(e.value for e in ast.walk(node) if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return frozenset()


def _predicate(module: ast.Module, test: ast.expr) -> Callable[[str], bool] | None:
    """The op-name test of a ``return`` in ``utils.py``: ``node_name in _DQ_OPS``, ``== "..."`` or ``"..." in``."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(left, ast.Name) and isinstance(op, ast.In) and isinstance(right, ast.Name):
        members = _module_strings(module, right.id)
        return members.__contains__
    if isinstance(left, ast.Name) and isinstance(op, ast.Eq) and isinstance(right, ast.Constant):
        return right.value.__eq__
    if isinstance(left, ast.Constant) and isinstance(op, ast.In) and isinstance(right, ast.Name):
        return lambda bare, part=left.value: part in bare
    return None


def utils_predicates(tree: Path) -> dict[str, Callable[[str], bool]]:
    """``is_*`` functions of the tree's ``utils.py`` whose final ``return`` tests the op name."""
    module, found = _parse(tree, VULKAN / "utils.py"), {}
    for node in module.body if module is not None else ():
        last = node.body[-1] if isinstance(node, ast.FunctionDef) and node.name.startswith("is_") else None
        test = _predicate(module, last.value) if isinstance(last, ast.Return) and last.value is not None else None
        if test is not None:
            found[node.name] = test
    return found


def refs_of(tree: Path, relative: Path, predicates: dict[str, Callable[[str], bool]]) -> Refs:
    """The ops ``backends/vulkan/<relative>`` names, and the ``utils`` predicates it calls."""
    module = _parse(tree, VULKAN / relative)
    if module is None:
        return Refs()
    called = {sub.attr for sub in ast.walk(module) if isinstance(sub, ast.Attribute) and sub.attr in predicates}
    return Refs(names=frozenset(_references(module)), predicates=tuple(predicates[name] for name in sorted(called)))


def _function_refs(module: ast.Module | None, name: str) -> set[str]:
    for node in ast.walk(module) if module is not None else ():
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return _references(node)
    return set()


def _builder_fates(tree: Path) -> Iterator[tuple[Refs, Fate]]:
    """``operator`` targets ``VkGraphBuilder.process_node`` handles itself (``getitem``: never serialized)."""
    path = tree / VULKAN / "serialization/vulkan_graph_builder.py"
    text = path.read_text(errors="replace") if path.is_file() else ""
    handled = set(re.findall(r"node\.target == operator\.(\w+)", text))
    text = "handled by VkGraphBuilder.process_node, never serialized (serialization/vulkan_graph_builder.py)"
    yield Refs(names=frozenset(handled)), Fate(text=text, always=True)


def _pass_fates(tree: Path, predicates: dict[str, Callable[[str], bool]]) -> Iterator[tuple[Refs, Fate]]:
    """The removals of ``vulkan_preprocess``: asserts, no-op copies, Q/DQ pairs, a transposed linear weight."""
    passes = VULKAN / "_passes"
    asserts = _class_set(_parse(tree, passes / "remove_asserts.py"), "RemoveAssertsTransform", "assert_ops")
    yield Refs(names=frozenset(asserts)), Fate(text="removed by RemoveAssertsTransform (_passes/remove_asserts.py)",
                                               always=True)
    redundant = _class_set(_parse(tree, passes / "remove_redundant_ops.py"), "RemoveRedundantOpsTransform",
                           "redundant_ops")
    yield Refs(names=frozenset(redundant)), Fate(text="removed by RemoveRedundantOpsTransform where dtype and shape "
                                                      "are unchanged, a no-op (_passes/remove_redundant_ops.py)",
                                                 always=False)
    qdq = refs_of(tree, Path("_passes/fold_qdq.py"), predicates)
    yield Refs(predicates=qdq.predicates), Fate(text="erased by FoldQDQPass where a quantize feeds a dequantize "
                                                     "(_passes/fold_qdq.py)", always=False)
    linear = _function_refs(_parse(tree, VULKAN / "partitioner/vulkan_partitioner.py"), "is_linear_permute")
    yield Refs(names=frozenset(linear)), Fate(text="partitioned with the mm/addmm it feeds (VulkanPartitioner."
                                                   "is_linear_permute), which AddmmToLinearTransform makes an "
                                                   "aten.linear.default", always=False)


def fusions(tree: Path, predicates: dict[str, Callable[[str], bool]]) -> list[tuple[Path, Refs]]:
    """The pattern modules of ``FusePatternsPass`` and the fusing passes (relative to ``backends/vulkan``), with the
    ops each names."""
    root = tree / VULKAN
    files = sorted(root.glob("patterns/*.py")) + sorted(root.glob("_passes/fuse_*.py"))
    return [(path.relative_to(root), refs_of(tree, path.relative_to(root), predicates)) for path in files]


def _fused(names: tuple[str, ...], files: list[tuple[Path, Refs]], registered: set[str]) -> list[Fate]:
    """Where a pattern or fusing pass that names the op fuses it (into its registered et_vk ops, when few)."""
    where = []
    for relative, refs in files:
        if refs.hold(names):
            products = sorted(n for n in refs.names if n.startswith("et_vk.") and n in registered)
            where.append(f"{relative} (into {', '.join(products)})" if 0 < len(products) <= 2 else str(relative))
    return [Fate(text=f"fused where {' or '.join(where)} matches", always=False)] if where else []


def _declared_fates() -> Iterator[tuple[Refs, Fate]]:
    for op, text in DECLARED_FATES.items():
        yield Refs(names=frozenset({op})), Fate(text=text, always=False)


def fate_of(names: tuple[str, ...], sources: list[tuple[Refs, Fate]], fused: list[Fate]) -> tuple[str, bool]:
    """(the fate text, whether a delegate may still hold the op) of an accepted op the runtime lacks."""
    fates = [fate for refs, fate in sources if refs.hold(names)] + fused
    if any(fate.always for fate in fates):
        return "; ".join(fate.text for fate in fates if fate.always), False
    texts = [fate.text for fate in fates]
    return "; ".join(texts + [f"elsewhere {CANNOT_LOAD}" if texts else CANNOT_LOAD]), True


def accepted_not_registered(tree: Path) -> list[Mismatch]:
    """Ops the tree's partitioner accepts that its runtime does not register, each with its fate."""
    registered, predicates = set(registered_ops(tree)), utils_predicates(tree)
    sources = [*_builder_fates(tree), *_pass_fates(tree, predicates), *_declared_fates()]
    files, rows = fusions(tree, predicates), []
    for key in accepted_ops(tree):
        if not registered.intersection(key.names):
            fate, cannot_load = fate_of(key.names, sources, _fused(key.names, files, registered))
            rows.append(Mismatch(op=key.names[0], where=f"{OP_REGISTRY.name}:{key.line} ({key.features})", fate=fate,
                                 cannot_load=cannot_load))
    return rows


def _callers(tree: Path) -> dict[str, str]:
    """Op → the ``impl/*.cpp`` that calls it through ``VK_GET_OP_FN`` (another op's implementation)."""
    calls: dict[str, str] = {}
    for path in sorted((tree / IMPL_SUBDIR).glob("*.cpp")):
        for op in re.findall(r'VK_GET_OP_FN\(\s*"([\w.]+)"', path.read_text(errors="replace")):
            calls.setdefault(op, path.name)
    return calls


def _producers(tree: Path) -> dict[str, str]:
    """Op → the pass or pattern module (relative to ``backends/vulkan``) that names it."""
    root, found = tree / VULKAN, {}
    for path in sorted(root.glob("_passes/*.py")) + sorted(root.glob("patterns/*.py")):
        for name in _references(ast.parse(path.read_text(errors="replace"))):
            found.setdefault(name, str(path.relative_to(root)))
    return found


def registered_not_accepted(tree: Path) -> list[Mismatch]:
    """Ops the tree's runtime registers that no partitioner key names, each with how a graph can still hold it."""
    accepted = {name for key in accepted_ops(tree) for name in key.names}
    callers, producers = _callers(tree), _producers(tree)
    rows = []
    for op, file in registered_ops(tree).items():
        if op in accepted:
            continue
        namespaced = sorted(name for name in accepted if name.split(".", 1)[-1] == op and name != op)
        if namespaced:
            fate = (f"{namespaced[0]} as it serializes when its node targets the torch op rather than the edge op "
                    f"(VkGraphBuilder: node.target.__name__)")
        elif op in producers:
            fate = f"inserted by vulkan_preprocess ({producers[op]})"
        elif op in callers:
            fate = f"called by {callers[op]} through VK_GET_OP_FN"
        elif TEST_ONLY.search(op):
            fate = "test-only: ET-VK's op tests build it directly"
        else:
            fate = "no partitioner key: a graph from VulkanPartitioner never holds it"
        rows.append(Mismatch(op=op, where=file, fate=fate, cannot_load=False))
    return rows


def registration_document(tree: Path) -> dict[str, object]:
    """Both lists, for ``vkdiff coverage --json``."""
    accepted, registered = accepted_not_registered(tree), registered_not_accepted(tree)
    return {"accepted": len(accepted_ops(tree)), "registered": len(registered_ops(tree)),
            "accepted_not_registered": [dataclasses.asdict(row) for row in accepted],
            "registered_not_accepted": [dataclasses.asdict(row) for row in registered]}
