"""What the tree's codegen derived, kept per exact inputs, so a warm process need not run the codegen at all.

Building the codegen's variant map takes 0.25 s (166 yamls parsed, every variant's
parameters deep-copied), and checking a cached module's key against its variant
regenerates the variant's source. Both are functions of their inputs: every file of the
tree's shader folder, the codegen script, vkdiff's build module and the mediump knob.
This entry is named by a hash of all of them, so a changed template, yaml, codegen or
build rule names another entry and everything is derived again; the entry itself is a
vkdiff cache entry, checked when read. It holds the variant names (with the stems each
unreadable yaml claims) and each module key a process derived from its variant.
"""

from __future__ import annotations

import json
import time
import weakref
from pathlib import Path
from typing import Any

from vkdiff.datamodel.cache import CacheCorruptError, read_entry, record_repair, write_entry

WRITE_EVERY_S = 2.0
"""How often new keys are stored while variants are being derived (and once more when the builder goes)."""


class Derived:
    """The derived data of one set of inputs, read once, stored as it grows (merged with what others stored)."""

    def __init__(self, path: Path):
        self.path = path
        self.data: dict[str, Any] = _read(path)
        self._pending = {"dirty": False, "at": time.monotonic()}
        weakref.finalize(self, _store, path, self.data, self._pending)

    @property
    def variants(self) -> tuple[list[str], dict[str, str]] | None:
        """(names, claims) as stored, or None."""
        if "variants" not in self.data:
            return None
        return list(self.data["variants"]), dict(self.data.get("claims", {}))

    def set_variants(self, names: list[str], claims: dict[str, str]) -> None:
        self.data["variants"], self.data["claims"] = sorted(names), dict(claims)
        self._changed()

    def derives(self, name: str, key: str) -> bool:
        """Whether a process derived ``key`` from variant ``name`` under these very inputs."""
        return self.data.get("keys", {}).get(name) == key

    def remember(self, name: str, key: str) -> None:
        if not self.derives(name, key):
            self.data.setdefault("keys", {})[name] = key
            self._changed()

    def _changed(self) -> None:
        self._pending["dirty"] = True
        if time.monotonic() - self._pending["at"] > WRITE_EVERY_S:
            _store(self.path, self.data, self._pending)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_entry(path))
        if not isinstance(data, dict) or not isinstance(data.get("keys", {}), dict):
            raise CacheCorruptError(path, "not a derived-data record")
        return data
    except FileNotFoundError:
        return {}
    except (CacheCorruptError, ValueError) as exc:
        record_repair(exc if isinstance(exc, CacheCorruptError) else CacheCorruptError(path, f"bad record: {exc}"))
        path.unlink(missing_ok=True)
        return {}


def _store(path: Path, data: dict[str, Any], pending: dict[str, Any]) -> None:
    """Write ``data`` merged with the stored entry's keys (another process may have added some)."""
    pending["at"] = time.monotonic()
    if not pending["dirty"]:
        return
    pending["dirty"] = False
    try:
        stored = _read(path) if path.exists() else {}
        data["keys"] = {**stored.get("keys", {}), **data.get("keys", {})}
        write_entry(path, json.dumps(data, sort_keys=True).encode())
    except OSError:
        pass
