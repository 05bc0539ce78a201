"""The room table of ``../shared/DESIGN.md``, enforced on vkdiff's own imports.

Every import in ``vkdiff/`` (module level and inside functions; ``if TYPE_CHECKING:``
blocks excepted) is read from the source with ``ast``. A room may import only the
rooms the table allows; the data model is a leaf; nothing imports another module's
private names; there are no import cycles; ``vkdiff.reference`` imports numpy and the
standard library only, and importing it never loads torch.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "vkdiff"

ALLOWED: dict[str, frozenset[str]] = {
    "datamodel": frozenset({"datamodel"}),
    "capture": frozenset({"capture"}),
    "store": frozenset({"datamodel", "store"}),
    "reference": frozenset({"reference"}),
    "cases": frozenset({"cases", "datamodel"}),
    "fusions": frozenset({"fusions", "reference", "datamodel"}),
    "device": frozenset({"device", "datamodel", "capture"}),
    "reports": frozenset({"reports", "datamodel", "store"}),
    "program": frozenset({"program", "datamodel"}),
    "lowering": frozenset({"lowering", "program", "cases", "datamodel", "capture"}),
    "executors": frozenset({"executors", "program", "cases", "device", "reference", "datamodel", "capture"}),
    "verdicts": frozenset({"verdicts", "executors", "program", "device", "fusions", "reference", "datamodel"}),
    "harness": frozenset({"harness", "verdicts", "executors", "lowering", "program", "cases", "reference", "fusions",
                          "device", "datamodel", "store", "reports", "capture"}),
    "repro": frozenset({"repro", "harness", "verdicts", "executors", "lowering", "program", "cases", "reference",
                        "device", "datamodel", "store", "capture"}),
    "bisect": frozenset({"bisect", "repro", "harness", "verdicts", "executors", "lowering", "program", "cases",
                         "reference", "device", "datamodel", "store", "capture"}),
    "entry": frozenset({"entry", "bisect", "repro", "harness", "verdicts", "executors", "lowering", "program", "cases",
                        "reference", "fusions", "device", "datamodel", "store", "reports", "capture"}),
}
"""Room → rooms it may import, from the leaves (``datamodel``, ``capture``) up to the entry points (CLI, plugin,
API). A room never imports one above it."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "vkdiff"


def _type_checking_blocks(tree: ast.AST) -> set[int]:
    """ids of import nodes inside ``if TYPE_CHECKING:``."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for child in node.body for n in ast.walk(child)}
    return skipped


def imports(module: str) -> list[tuple[str, list[str], int]]:
    """``(target module, imported names, line)`` of every import in ``module``."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_blocks(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, [], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.append((target, [], node.lineno) if target in MODULES else (base, [alias.name], node.lineno))
    return found


def vkdiff_edges() -> dict[str, set[str]]:
    return {m: {t for t, _, _ in imports(m) if t in MODULES and t != m} for m in MODULES}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_room_imports_only_what_the_table_allows(module):
    mine = room(module)
    if mine == "vkdiff":
        return
    bad = [f"line {line}: {target} ({room(target)})" for target, _, line in imports(module)
           if target.startswith("vkdiff.") and room(target) not in ALLOWED[mine]]
    assert not bad, f"{module} ({mine}) may import only {sorted(ALLOWED[mine])}: " + "; ".join(bad)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_name_crosses_a_module(module):
    bad = [f"line {line}: {target}.{name}" for target, names, line in imports(module) if target.startswith("vkdiff")
           for name in names if name.startswith("_")]
    assert not bad, f"{module} imports private names: " + "; ".join(bad)


def test_no_import_cycles():
    edges = vkdiff_edges()
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    assert not cycles, f"import cycles: {cycles}"


def test_reference_imports_numpy_and_the_standard_library_only():
    third_party = {(m, t.split(".")[0]) for m in MODULES if room(m) == "reference" for t, _, _ in imports(m)
                   if not t.startswith("vkdiff") and t.split(".")[0] not in sys.stdlib_module_names}
    assert {top for _, top in third_party} <= {"numpy"}, third_party


def test_importing_reference_never_loads_torch():
    script = "import sys, vkdiff.reference, vkdiff.reference.ops\nprint('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


def test_the_checks_see_real_imports():
    """The parser finds what a module imports, lazy ones included (so the tests above can fail)."""
    cli = {t for t, _, _ in imports("vkdiff.entry.cli")}
    assert {"vkdiff.harness.runner", "vkdiff.cases.catalog", "vkdiff.entry.terminal"} <= cli
    assert room("vkdiff.datamodel.result") == "datamodel" and room("vkdiff.device.launchers.registry") == "device"
    assert "vkdiff.datamodel.status" in vkdiff_edges()["vkdiff.datamodel.result"]


def test_every_name_imported_from_vkdiff_exists():
    """Lazy imports inside functions run only on some paths: each ``from vkdiff.x import name`` must resolve."""
    import importlib

    missing = []
    for module in MODULES:
        for target, names, line in imports(module):
            if not target.startswith("vkdiff") or not names:
                continue
            loaded = importlib.import_module(target)
            missing += [f"{module}:{line} {target}.{n}" for n in names
                        if not hasattr(loaded, n) and f"{target}.{n}" not in MODULES]
    assert not missing, missing
