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

LEVELS = ("datamodel", "capture", "store", "reference", "cases", "program", "fusions", "device", "reports", "lowering",
          "executors", "verdicts", "harness", "subjects", "tools", "repro", "bisect", "entry")
"""The rooms from the leaves up to the entry points (CLI, plugin, API): a room imports only rooms before it."""

ALLOWED: dict[str, frozenset[str]] = {
    "datamodel": frozenset(),
    "capture": frozenset(),
    "store": frozenset({"datamodel"}),
    "reference": frozenset(),
    "cases": frozenset({"datamodel"}),
    "program": frozenset({"datamodel"}),
    "fusions": frozenset({"datamodel", "reference"}),
    "device": frozenset({"datamodel", "capture"}),
    "reports": frozenset({"datamodel", "store"}),
    "lowering": frozenset({"datamodel", "capture", "cases", "program"}),
    "executors": frozenset({"datamodel", "capture", "cases", "device", "reference"}),
    "verdicts": frozenset({"datamodel", "device", "executors", "fusions", "reference"}),
    "harness": frozenset({"datamodel", "capture", "cases", "device", "executors", "fusions", "lowering", "verdicts"}),
    "subjects": frozenset({"datamodel", "cases", "harness", "lowering", "program"}),
    "tools": frozenset({"datamodel", "cases", "device", "executors", "harness", "reference", "verdicts"}),
    "repro": frozenset({"datamodel", "cases", "device", "executors", "harness", "verdicts"}),
    "bisect": frozenset({"datamodel", "cases", "device", "executors", "harness", "store", "verdicts"}),
    "entry": frozenset({"datamodel", "capture", "cases", "device", "lowering", "reports", "store", "verdicts", "harness",
                        "subjects", "tools", "repro", "bisect"}),
}
"""Room → the other rooms it imports, exactly: every edge is used (``test_every_allowed_edge_is_used``) and goes down
``LEVELS``. ``harness`` drives cases through lowering, executors and verdicts; ``subjects`` turns a user's programs,
modules, configs and inputs into cases; ``tools`` use the house without being a run of it."""


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
           if target.startswith("vkdiff.") and room(target) not in ALLOWED[mine] | {mine}]
    assert not bad, f"{module} ({mine}) may import only {sorted(ALLOWED[mine])}: " + "; ".join(bad)


def room_edges() -> dict[str, set[str]]:
    """Room → the other rooms its modules import."""
    used: dict[str, set[str]] = {name: set() for name in ALLOWED}
    for module in MODULES:
        if room(module) != "vkdiff":
            used[room(module)] |= {room(t) for t, _, _ in imports(module) if t.startswith("vkdiff.")} - {room(module)}
    return used


def test_every_allowed_edge_is_used():
    unused = {mine: sorted(ALLOWED[mine] - used) for mine, used in room_edges().items() if ALLOWED[mine] - used}
    assert not unused, f"the room table allows edges no import uses: {unused}"


def test_rooms_are_layered():
    assert set(LEVELS) == set(ALLOWED) == {room(m) for m in MODULES} - {"vkdiff"}
    upward = [f"{mine} -> {other}" for mine, others in ALLOWED.items() for other in others
              if LEVELS.index(other) >= LEVELS.index(mine)]
    assert not upward, f"rooms importing a room at or above their own level: {upward}"


def test_no_folder_holds_more_than_15_modules_flat():
    """Except ``device/launchers``, which mirrors ET-VK's ``runtime/graph/ops/impl``."""
    crowded = {str(folder.relative_to(PACKAGE)): count for folder in [PACKAGE, *PACKAGE.rglob("*/")]
               if folder.is_dir() and folder.name != "__pycache__" and folder != PACKAGE / "device" / "launchers"
               for count in [len([p for p in folder.glob("*.py") if p.name != "__init__.py"])] if count > 15}
    assert not crowded, crowded


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
    run = {t for t, _, _ in imports("vkdiff.entry.commands.run")}
    assert {"vkdiff.harness.runner", "vkdiff.cases.catalog", "vkdiff.entry.terminal"} <= run
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
