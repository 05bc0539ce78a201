"""Where vkdiff keeps its on-disk cache (SPIR-V, generated headers, lowerings, trees, checkpoints)."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "VKDIFF_CACHE_DIR"
CACHE_LAYOUT = "v2"
"""Layout of the entries (v2: every entry verified, see ``cache``); entries of other layouts are never read."""


def cache_root() -> Path:
    """The cache folder the user sees: ``$VKDIFF_CACHE_DIR``, else ``$XDG_CACHE_HOME/vkdiff`` or ``~/.cache/vkdiff``."""
    root = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "vkdiff")
    return Path(root)


def cache_dir() -> Path:
    """Where this version's entries live: ``cache_root() / CACHE_LAYOUT``."""
    return cache_root() / CACHE_LAYOUT


class CacheUnwritableError(OSError):
    """vkdiff's cache folder cannot be created or written (a usage error, reported before any work)."""


def ensure_cache_writable() -> Path:
    """Create the cache folder and prove a file can be written there.

    Raises:
        CacheUnwritableError: one line naming the folder, the reason and ``$VKDIFF_CACHE_DIR``.
    """
    import tempfile

    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            pass
    except OSError as exc:
        raise CacheUnwritableError(f"cache folder {cache_root()} cannot be written ({exc.strerror or exc}): set "
                                   f"{CACHE_ENV} to a writable folder") from None
    return folder
