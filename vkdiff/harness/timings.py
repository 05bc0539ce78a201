"""How long each kernel case took last time on a (transport, devices): which chunks ``--jobs`` hands out first.

A chunk of slow cases that a worker takes late ends the run alone while the other workers
idle (on a 16-core H200 host: 11 s of wall for 7 s of work per worker, the four-bit linears'
chunk taking 5 s). The last run's seconds per case say which chunks those are. Only the
order chunks are handed out in reads them, never a verdict: a missing, stale or corrupt
entry (checked when read, as every cache entry) leaves the chunks in case order.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Mapping, Sequence

from vkdiff.datamodel.cache import CacheCorruptError, read_entry, record_repair, write_entry
from vkdiff.datamodel.paths import cache_dir

FOLDER = "timings"


def path_for(transport: str, slugs: Sequence[str]) -> Path:
    """The entry of a transport and set of devices (``timings/<transport>-<slug>[-<slug>...].json``)."""
    name = "-".join([transport, *sorted(slugs)]) if slugs else f"{transport}-none"
    return cache_dir() / FOLDER / f"{re.sub(r'[^A-Za-z0-9_.+-]', '_', name)}.json"


def load(path: Path) -> dict[str, float]:
    """Seconds by case id, or none (no entry; a corrupt one is deleted and the repair recorded)."""
    try:
        seconds = json.loads(read_entry(path))
        if not isinstance(seconds, dict) or not all(
                isinstance(k, str) and isinstance(v, (int, float)) and v >= 0 for k, v in seconds.items()):
            raise CacheCorruptError(path, "not a map of case ids to seconds")
    except FileNotFoundError:
        return {}
    except (CacheCorruptError, ValueError) as exc:
        record_repair(exc if isinstance(exc, CacheCorruptError) else CacheCorruptError(path, "not JSON"))
        path.unlink(missing_ok=True)
        return {}
    return {k: float(v) for k, v in seconds.items()}


def store(path: Path, seconds: Mapping[str, float]) -> None:
    """Write ``seconds`` (the caller merges what it loaded); a cache that cannot be written keeps the old entry."""
    try:
        write_entry(path, json.dumps(dict(seconds), sort_keys=True).encode())
    except OSError:
        pass
