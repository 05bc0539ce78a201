"""What C++ of ET-VK vkdiff re-hosts, and whether a user's tree still has that source (``port-stale``).

Host-side code of ET-VK (dispatch rules, tensor metadata, staging) is ported to Python;
each port names its file and the sha256 of that file in the tree it was written
against. When a user's tree holds a different version, the port may no longer match
what the tree's runtime does, and results say so.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
from pathlib import Path
from typing import Iterable


@dataclasses.dataclass(kw_only=True, frozen=True)
class Port:
    """C++ of ET-VK that a launcher re-hosts, and the source it was written against."""

    file: str
    """Path under ``backends/vulkan/`` (``runtime/graph/ops/impl/QuantizedLinear.cpp``)."""
    functions: tuple[str, ...]
    """The functions ported."""
    sha256: str
    """sha256 of that file in the tree the port was written against."""
    tree: str
    """That tree (``executorch main cff6f4dd32``)."""


@functools.lru_cache(maxsize=256)
def _file_text(path: Path) -> str | None:
    return path.read_text(errors="replace") if path.is_file() else None


@functools.lru_cache(maxsize=256)
def _file_sha(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _vulkan_root(tree: Path | None) -> Path | None:
    """``backends/vulkan`` of an ExecuTorch source tree (or the folder itself)."""
    if tree is None:
        return None
    return tree / "backends" / "vulkan" if (tree / "backends" / "vulkan").is_dir() else tree


def registers(tree: Path | None, file: str, op: str) -> bool:
    """Whether ``file`` of the tree registers ``op`` with ``VK_REGISTER_OP``."""
    root = _vulkan_root(tree)
    text = _file_text(root / file) if root is not None else None
    return text is not None and re.search(r"VK_REGISTER_OP\(\s*" + re.escape(op) + r"\s*,", text) is not None


def stale_files(ports: Iterable[Port], tree: Path | None) -> list[str]:
    """File names of ``ports`` whose source in ``tree`` differs from the source they were written against (each
    file read once per process, as ``_file_sha`` reads it; every launch asks)."""
    return list(_stale(tuple(ports), tree))


@functools.lru_cache(maxsize=1024)
def _stale(ports: tuple[Port, ...], tree: Path | None) -> tuple[str, ...]:
    root = _vulkan_root(tree)
    if root is None:
        return ()
    stale = []
    for port in ports:
        sha = _file_sha(root / port.file)
        if sha is not None and sha != port.sha256:
            stale.append(port.file.rsplit("/", 1)[-1])
    return tuple(stale)
