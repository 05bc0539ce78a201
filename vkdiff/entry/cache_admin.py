"""``vkdiff cache verify`` and ``vkdiff cache clear``: check every cache entry, or drop them all.

Entries and how each is checked (see ``vkdiff.datamodel.cache``):

=============  =========================  ====================================================
folder         entry                      check
=============  =========================  ====================================================
``spv/``       one SPIR-V module          header hash; ``--rebuild``: compiled again, compared
``index/``     (tree, variant) → module   header hash; key derived again (on use, ``--rebuild``)
``lowered/``   a lowering (.pte + JSON)   header hash (each file)
``baked/``     a transformed module       header hash; ``--rebuild``: transformed again from its source
``traits/``    a device's probed traits,  header hash; ``--rebuild``: the probes compiled again, compared
               the probes' SPIR-V
``derived/``   a tree's variant names and header hash; named by a hash of every input the codegen reads
               module keys, as derived
``pipelines/`` a driver's VkPipelineCache  header hash; the Vulkan header names the device (on use)
``include/``   a tree's generated headers manifest; compared with the codegen's (on use)
``trees/``     an extracted tree          manifest; compared with its source (on use)
``llm/``       a generated checkpoint     manifest of file hashes
``locks/``     empty lock files           nothing to check (they order processes' writes)
=============  =========================  ====================================================

A header hash or manifest catches accidental corruption and interrupted writes, not an
entry forged by someone who can write the cache. Hidden names (``.staging-…``,
``.tmp-…``) are leftovers of interrupted writes. ``repos/`` holds git repositories
(bare clones, and the default fetch's), which trees are checked against.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

from vkdiff.datamodel import CacheCorruptError, read_entry, verify_manifest

FILE_ENTRIES = ("spv", "index", "lowered", "baked", "traits", "derived", "pipelines")
FOLDER_ENTRIES = ("include", "trees", "llm")


@dataclasses.dataclass(kw_only=True)
class CacheReport:
    """What ``verify`` found."""

    ok: dict[str, int] = dataclasses.field(default_factory=dict)
    """Sound entries per folder."""
    corrupt: list[tuple[Path, str]] = dataclasses.field(default_factory=list)
    """Corrupt entries and why."""
    stale: list[Path] = dataclasses.field(default_factory=list)
    """Leftovers of interrupted writes."""
    rebuilt: int | None = None
    """Modules compiled again and found identical (None: no ``--rebuild``)."""
    rebaked: int = 0
    """Transformed modules made again from their (sound) source and found identical."""
    unchecked: list[str] = dataclasses.field(default_factory=list)
    """What ``--rebuild`` could not compile again, and what to pass to check it."""

    def lines(self) -> list[str]:
        counts = ", ".join(f"{kind} {n}" for kind, n in self.ok.items())
        out = [f"sound: {counts or 'nothing cached'}"]
        if self.rebuilt is None:
            out.append("module bytes were checked against their own hash only: `vkdiff cache verify --rebuild` "
                       "compiles them again")
        else:
            out.append(f"compiled again, identical: {self.rebuilt}; transformed again, identical: {self.rebaked}")
        out += [f"corrupt: {path} ({why})" for path, why in self.corrupt]
        out += [f"not checked: {what}" for what in self.unchecked]
        out += [f"leftover of an interrupted write: {path}" for path in self.stale]
        return out


def _entries(root: Path, folder: str, files: bool) -> list[Path]:
    base = root / folder
    if not base.is_dir():
        return []
    found = base.rglob("*") if files else base.iterdir()
    return sorted(p for p in found if (p.is_file() if files else p.is_dir()))


def verify(root: Path, *, repair: bool = False, rebuild=None) -> CacheReport:
    """Check every entry under ``root``; with ``repair``, delete corrupt entries and leftovers (rebuilt on use).

    ``rebuild`` (a ``ShaderBuilder`` on ``root``) also generates and compiles again every module of its tree and
    compares the bytes (``ShaderBuilder.rechecked``); with ``repair`` a differing module is replaced.

    Raises:
        BuildError: ``rebuild``'s codegen cannot load, or glslc is missing.
    """
    report = CacheReport()
    for folder, files in [(f, True) for f in FILE_ENTRIES] + [(f, False) for f in FOLDER_ENTRIES]:
        report.ok[folder] = 0
        for path in _entries(root, folder, files):
            if path.name.startswith("."):
                report.stale.append(path)
                continue
            try:
                read_entry(path) if files else verify_manifest(path)
                report.ok[folder] += 1
            except CacheCorruptError as exc:
                report.corrupt.append((path, exc.why))
    if repair:
        for path in [p for p, _ in report.corrupt] + report.stale:
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
    if rebuild is not None:
        _rebuild(root, rebuild, report, repair)
    return report


def _rebuild(root: Path, builder, report: CacheReport, repair: bool) -> None:
    """Compile the tree's modules again into ``report``, and say what stays unchecked and how to check it."""
    checked = builder.rechecked(repair=repair)
    report.rebuilt = sum(r.state == "sound" for r in checked)
    report.corrupt += [(r.path, r.why) for r in checked if r.state == "corrupt"]
    report.unchecked += [f"{r.path} ({r.why})" for r in checked if r.state == "not checked"]
    report.unchecked += _other_trees(root, builder.tree)
    modules = len(_entries(root, "spv", True))
    seen = len({r.path for r in checked if r.path.parent.name == "spv"})
    if modules > seen:
        report.unchecked.append(f"{modules - seen} of {_modules(modules)} in spv/ belong to no variant of this tree "
                                f"(pass their tree with --et-src)")
    sources = {hashlib.sha256(r.module).hexdigest(): r.module for r in checked if r.module}
    sources.update(_recheck_probes(report, repair))
    _rebake(root, sources, report, repair)


def _recheck_probes(report: CacheReport, repair: bool) -> dict[str, bytes]:
    """The trait probes compiled again (their cached modules compared): sources of the transformed probe modules."""
    from vkdiff.device.runtime.traits import rechecked_probes

    corrupt, modules = rechecked_probes(repair=repair)
    report.corrupt += corrupt
    return modules


def _rebake(root: Path, sources: dict[str, bytes], report: CacheReport, repair: bool) -> None:
    """Transformed modules made again from the sound modules they record as their source (needs spirv-opt)."""
    from vkdiff.device.shaders.dispatch import rebaked

    skipped: dict[str, int] = {}
    for path in _entries(root, "baked", True):
        if path.name.startswith("."):
            continue
        state, why = rebaked(path, sources, repair=repair)
        if state == "sound":
            report.rebaked += 1
        elif state == "corrupt":
            report.corrupt.append((path, why))
        else:
            skipped[why] = skipped.get(why, 0) + 1
    report.unchecked += [f"{n} transformed module{'s' * (n != 1)} in baked/: {why}" for why, n in skipped.items()]


def _modules(count: int) -> str:
    return f"{count} module" + "s" * (count != 1)


def _other_trees(root: Path, tree: str) -> list[str]:
    """One line per other tree with modules in the index: how many, and the tree they were last built from."""
    lines = []
    for folder in sorted(p for p in (root / "index").glob("*") if p.is_dir() and p.name != tree):
        entries = sorted(folder.glob("*.json"))
        if entries:
            lines.append(f"{_modules(len(entries))} of another tree (index/{folder.name}, last built from "
                         f"{_built_from(entries[-1])}): pass that tree with --et-src")
    return lines


def _built_from(index: Path) -> str:
    try:
        return str(json.loads(read_entry(index)).get("tree", "an unrecorded path"))
    except (CacheCorruptError, ValueError, AttributeError):
        return "an unreadable entry"


def rebuilder(et_src: str | None, root: Path):
    """The ``ShaderBuilder`` that ``verify --rebuild`` compiles with: the tree ``--et-src`` names (as ``run`` resolves
    it), its codegen and glslc present.

    Raises:
        UsageError: no tree, no codegen or no glslc (one line saying what to give or install).
    """
    from vkdiff.device.shaders.build import BuildError, ShaderBuilder, glslc_version
    from vkdiff.device.shaders.trees import EtSourceError, choose_tree
    from vkdiff.entry.terminal import UsageError

    try:
        tree = choose_tree(et_src)
    except EtSourceError as exc:
        raise UsageError(str(exc)) from None
    if tree.path is None:
        raise UsageError(f"vkdiff cache verify --rebuild needs the tree the modules were built from: {tree.note}")
    builder = ShaderBuilder(tree.path, cache=root)
    try:
        glslc_version()
        builder.templates()
    except BuildError as exc:
        raise UsageError(f"vkdiff cache verify --rebuild: {exc}") from None
    return builder


def clear(root: Path) -> tuple[int, int]:
    """Delete the whole cache; returns (files, bytes) removed."""
    if not root.exists():
        return 0, 0
    files = [p for p in root.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    shutil.rmtree(root)
    return len(files), size
