"""Where two runs' outputs differ, bit for bit: what repeats and whole-graph replays measure."""

from __future__ import annotations

from typing import Any

import numpy as np


def outputs(output: Any) -> tuple[np.ndarray, ...]:
    """An op's output as a tuple of arrays (one for a single output)."""
    return tuple(np.asarray(o) for o in output) if isinstance(output, tuple) else (np.asarray(output),)


def differing_elements(a: Any, b: Any) -> int:
    """Elements whose bits differ between two runs' outputs (NaN payloads included; shapes must agree)."""
    count = 0
    for x, y in zip(outputs(a), outputs(b)):
        x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return max(x.size, y.size)
        bits = x.view(np.uint8).reshape(x.size, -1) != y.view(np.uint8).reshape(y.size, -1)
        count += int(bits.any(axis=1).sum())
    return count


def difference_map(a: np.ndarray, b: np.ndarray, limit: int = 8) -> dict[str, Any]:
    """Where two outputs differ: how many elements, the first coordinates, and their bounding box (which tiles)."""
    a, b = np.asarray(a), np.asarray(b)
    bits = a.view(np.uint8).reshape(a.size, -1) != b.view(np.uint8).reshape(b.size, -1)
    where = np.argwhere(bits.any(axis=1).reshape(a.shape))
    return {"differing": int(len(where)), "total": int(a.size), "first": where[:limit].tolist(),
            "box": [where.min(axis=0).tolist(), where.max(axis=0).tolist()] if len(where) else []}
