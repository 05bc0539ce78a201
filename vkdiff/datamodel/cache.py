"""Cache entries verified when read, never trusted.

A single-file entry (SPIR-V, its index record, a lowering) carries its own content hash
in a one-line header and is written atomically (temporary file, then rename). A folder
entry (generated headers, an extracted ExecuTorch tree, a generated checkpoint) carries
a manifest of every file's hash, written last, inside a staging folder that is renamed
into place. A read that fails the check raises ``CacheCorruptError``; the caller
discards the entry, rebuilds it and calls ``record_repair``, so that the results that
used it carry the flag ``cache-repaired`` and the user sees one line.

The hash is unkeyed: it catches accidental corruption and interrupted writes, not an entry
forged by someone who can write the cache (edit, then hash again). What can be checked
against a source is checked by the caller: a folder entry may come with a ``check`` that
compares it with its source (trees against their tarball or git commit, headers against
the codegen), and SPIR-V index keys are derived again from the generated source.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

MAGIC = b"vkdiff-cache/1 "
MANIFEST = ".vkdiff-manifest"
REPAIRED_FLAG = "cache-repaired"
SKIPPED_IN_MANIFEST = ("__pycache__",)
"""Folders a manifest leaves out (Python may write bytecode next to a tree's codegen)."""


class CacheCorruptError(ValueError):
    """A cache entry failed its check; ``why`` says how."""

    def __init__(self, path: str | os.PathLike, why: str):
        super().__init__(f"cache entry {path} is corrupt ({why})")
        self.path = Path(path)
        self.why = why


@dataclasses.dataclass(kw_only=True, frozen=True)
class Repair:
    """A corrupt entry that was discarded and rebuilt."""

    path: str
    why: str

    def line(self) -> str:
        return f"cache repaired: {self.path} ({self.why}); rebuilt"


REPAIRS: list[Repair] = []
"""Every repair of this process, in order (runners flag the results produced while one happened)."""


def record_repair(error: CacheCorruptError) -> None:
    REPAIRS.append(Repair(path=str(error.path), why=error.why))


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_atomic(path: Path, data: bytes) -> None:
    """Write via a temporary file in the same folder and rename, so no reader sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_entry(path: str | os.PathLike, payload: bytes) -> None:
    """Store ``payload`` with a header holding its sha256 and size."""
    header = MAGIC + f"{_digest(payload)} {len(payload)}\n".encode()
    write_atomic(Path(path), header + payload)


def read_entry(path: str | os.PathLike) -> bytes:
    """The payload of an entry written by ``write_entry``.

    Raises:
        FileNotFoundError: there is no entry.
        CacheCorruptError: the header, size or hash does not match.
    """
    return check_entry(Path(path).read_bytes(), path)


def check_entry(data: bytes, path: str | os.PathLike) -> bytes:
    """The payload of an entry's bytes (read from ``path``, or about to be stored there), checked.

    Raises:
        CacheCorruptError: the header, size or hash does not match.
    """
    newline = data.find(b"\n")
    if not data.startswith(MAGIC) or newline < 0:
        raise CacheCorruptError(path, "no vkdiff header")
    fields = data[len(MAGIC):newline].split()
    payload = data[newline + 1:]
    if len(fields) != 2 or not fields[1].isdigit():
        raise CacheCorruptError(path, "unreadable header")
    if int(fields[1]) != len(payload):
        raise CacheCorruptError(path, f"{len(payload)} bytes, the header says {int(fields[1])}")
    if _digest(payload).encode() != fields[0]:
        raise CacheCorruptError(path, "content hash mismatch")
    return payload


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST
                  and not any(part in SKIPPED_IN_MANIFEST for part in p.relative_to(folder).parts))


def write_manifest(folder: str | os.PathLike) -> None:
    """Record the hash of every file of ``folder`` (call last, before publishing the folder)."""
    folder = Path(folder)
    hashes = {str(p.relative_to(folder)): _digest(p.read_bytes()) for p in _files(folder)}
    write_entry(folder / MANIFEST, json.dumps(hashes, sort_keys=True).encode())


def verify_manifest(folder: str | os.PathLike) -> int:
    """Check every file the manifest of ``folder`` lists; returns how many.

    Raises:
        CacheCorruptError: the manifest is missing or corrupt, or a listed file is missing or changed.
    """
    return len(verified_digests(folder))


def verified_digests(folder: str | os.PathLike) -> dict[str, str]:
    """Every file the manifest of ``folder`` lists → its content's sha256, each checked against the file.

    Raises:
        CacheCorruptError: the manifest is missing or corrupt, or a listed file is missing or changed.
    """
    folder = Path(folder)
    try:
        hashes = json.loads(read_entry(folder / MANIFEST))
    except FileNotFoundError:
        raise CacheCorruptError(folder, "no manifest: an interrupted write") from None
    except ValueError as exc:
        raise CacheCorruptError(folder, getattr(exc, "why", "unreadable manifest")) from None
    for name, digest in hashes.items():
        path = folder / name
        if not path.is_file():
            raise CacheCorruptError(path, "missing")
        if _digest(path.read_bytes()) != digest:
            raise CacheCorruptError(path, "content hash mismatch")
    return hashes


VERIFIED: set[Path] = set()
"""Folder entries checked against their manifest in this process (each is hashed once per run)."""


def cached_folder(target: str | os.PathLike, make: Callable[[Path], None],
                  check: Callable[[Path, dict[str, str]], None] | None = None) -> Path:
    """``target``, verified against its manifest (and by ``check``, once per process), or made by ``make(staging)``
    and published atomically.

    ``check(folder, digests)`` compares an existing copy with its source and raises ``CacheCorruptError`` when they
    differ: the manifest alone cannot tell a forged copy from a sound one. ``digests`` are the sha256 of the files
    the manifest lists, each just checked against its file (``verified_digests``), so a check need not read them
    again. A copy that fails either check is recorded as a repair, discarded and made again. When another process
    publishes first, its copy is kept.
    """
    target = Path(target)
    if target.exists() and target not in VERIFIED:
        try:
            digests = verified_digests(target)
            if check is not None:
                check(target, digests)
            VERIFIED.add(target)
        except CacheCorruptError as exc:
            record_repair(exc)
            shutil.rmtree(target, ignore_errors=True)
    if target in VERIFIED:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    try:
        make(staging)
        write_manifest(staging)
        staging.rename(target)
    except OSError:
        if not target.exists():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    VERIFIED.add(target)
    return target
