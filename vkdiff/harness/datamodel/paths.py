"""Where vkdiff keeps its on-disk cache (SPIR-V, generated headers, lowerings, trees, checkpoints)."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "VKDIFF_CACHE_DIR"


def cache_dir() -> Path:
    """Root of vkdiff's on-disk cache: ``$VKDIFF_CACHE_DIR``, else ``$XDG_CACHE_HOME/vkdiff`` or ``~/.cache/vkdiff``."""
    root = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "vkdiff")
    return Path(root)
