"""``vkdiff cache verify`` and ``vkdiff cache clear``: check every cache entry, or drop them all.

Entries and how each is checked (see ``vkdiff.datamodel.cache``):

=============  =========================  ==========================================
folder         entry                      check
=============  =========================  ==========================================
``spv/``       one SPIR-V module          header hash
``index/``     (tree, variant) → module   header hash
``lowered/``   a lowering (.pte + JSON)   header hash (each file)
``baked/``     a transformed module       header hash
``include/``   a tree's generated headers manifest of file hashes
``trees/``     an extracted tree          manifest of file hashes
``llm/``       a generated checkpoint     manifest of file hashes
=============  =========================  ==========================================

Hidden names (``.staging-…``, ``.tmp-…``) are leftovers of interrupted writes. ``repos/``
holds bare git clones, which git checks itself.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from vkdiff.datamodel import CacheCorruptError, read_entry, verify_manifest

FILE_ENTRIES = ("spv", "index", "lowered", "baked")
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

    def lines(self) -> list[str]:
        counts = ", ".join(f"{kind} {n}" for kind, n in self.ok.items())
        out = [f"sound: {counts or 'nothing cached'}"]
        out += [f"corrupt: {path} ({why})" for path, why in self.corrupt]
        out += [f"leftover of an interrupted write: {path}" for path in self.stale]
        return out


def _entries(root: Path, folder: str, files: bool) -> list[Path]:
    base = root / folder
    if not base.is_dir():
        return []
    found = base.rglob("*") if files else base.iterdir()
    return sorted(p for p in found if (p.is_file() if files else p.is_dir()))


def verify(root: Path, *, repair: bool = False) -> CacheReport:
    """Check every entry under ``root``; with ``repair``, delete corrupt entries and leftovers (rebuilt on use)."""
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
    return report


def clear(root: Path) -> tuple[int, int]:
    """Delete the whole cache; returns (files, bytes) removed."""
    if not root.exists():
        return 0, 0
    files = [p for p in root.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    shutil.rmtree(root)
    return len(files), size
