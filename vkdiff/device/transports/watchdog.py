"""Progress beacon of device work run in a child process (``vkdiff.executors.isolate``).

A hung dispatch blocks the child inside a native wgpu call, so it cannot say anything
then; it says where it is *before* each blocking call instead. Around every call that
waits for the device (reading a tensor back, which waits for every dispatch submitted
before it, and creating a pipeline, which runs the driver's compiler) the child writes
the time and a label, naming the dispatches submitted since the last wait, into
shared memory, and clears the time afterwards. The parent calls it a hang when one
such wait lasts longer than ``--timeout``; host work (references, comparisons) never
counts. Outside a device worker the beacon is unset and every call here costs one
attribute check.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Iterator

BEACON: Any = None
"""``(multiprocessing.Value('d'), multiprocessing.Array('c', LABEL_BYTES))`` in a device worker, else None."""
LABEL_BYTES = 400
_pending: list[str] = []
"""Dispatches submitted since the last wait (the suspects when that wait hangs)."""


def note_dispatch(label: str) -> None:
    """Remember a submitted dispatch: the next wait names it."""
    if BEACON is not None:
        del _pending[:-3]
        _pending.append(label)


@contextlib.contextmanager
def waiting(what: str) -> Iterator[None]:
    """Mark a call that blocks on the device (no-op outside a device worker)."""
    if BEACON is None:
        yield
        return
    stamp, text = BEACON
    after = f" after dispatching {', '.join(_pending)}" if _pending else ""
    text.value = f"{what}{after}".encode(errors="replace")[: LABEL_BYTES - 1]
    stamp.value = time.monotonic()
    try:
        yield
    finally:
        stamp.value = 0.0
        _pending.clear()
