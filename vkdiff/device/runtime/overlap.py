"""Independent tasks on one device, several at a time, with their waits for the device shared.

A kernel case alternates host work (building its graph, staging, references, judging)
with waits for what it submitted. Alone, the host idles while the device runs and the
device idles while the host works. Here up to ``width`` tasks run as greenlets on the
calling thread: where a task would wait for its submission, the transport parks it
instead (``park``), the next task builds and submits meanwhile, and once every task has
parked one wait covers all their submissions (``Transport.wait_parked``). A task resumes
only after its own submission is done, exactly where it would have waited, so its host
work runs in the same order, on the same data, as alone. Tasks switch only there:
nothing between two submissions of a task interleaves with another.

Raw Vulkan parks at every submission (``vk_commands.Queue._submit``); a wgpu submission
returns at once and never parks (``WgpuDevice.wait_parked`` says what was measured).
greenlet is a pinned dependency of the raw transport's extra; without it (a phone whose
pip cannot build it) ``available()`` is False and callers run their tasks one at a time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Any, Callable, Generic, Iterator, Sequence, TypeVar

T = TypeVar("T")

WIDTH = 8
"""Tasks in flight at once (``vkdiff run``'s kernel cases)."""
WINDOW = 16
"""Consecutive kernel cases given to one ``Overlap.run`` (``Runner.run_window``): their results are appended when the
last is done, and a stop waits for them."""


def available() -> bool:
    try:
        import greenlet  # noqa: F401
    except ImportError:
        return False
    return True


@dataclasses.dataclass(kw_only=True)
class Done(Generic[T]):
    """How one task ended."""

    value: T | None = None
    error: BaseException | None = None
    seconds: float = 0.0
    """Its own host time plus an equal share of each wait it was parked in: what it would have taken alone, less
    the idle time the overlap removed."""


class Overlap:
    """Runs tasks on ``device`` as greenlets; the device's transport calls ``park`` where a task would wait."""

    def __init__(self, device: Any, width: int = WIDTH):
        import greenlet

        self.device = device
        self.width = width
        self._greenlet = greenlet
        self._hub: Any = None
        self._parked: list[tuple[Any, Any]] = []
        """(the task's greenlet, what the transport waits on) of every task given way since the last wait."""
        self.waits = 0
        """Shared waits made (each for every task parked then)."""
        self.parks = 0

    def in_task(self) -> bool:
        """Called from one of this overlap's tasks (where a wait may be handed to the hub)."""
        return self._hub is not None and self._greenlet.getcurrent().parent is self._hub

    def park(self, token: Any) -> None:
        """From a task that has just submitted: give way until the device has run it (``token``: what
        ``wait_parked`` takes for that submission).

        Raises:
            Exception: what the shared wait raised (a lost device), as the task's own wait would have.
        """
        self._parked.append((self._greenlet.getcurrent(), token))
        self.parks += 1
        error = self._hub.switch()
        if error is not None:
            raise error

    def run(self, tasks: Sequence[Callable[[], T]]) -> list[Done[T]]:
        """Every task's outcome, in order; a task's exception is its outcome, never raised here."""
        done = [Done[T]() for _ in tasks]
        greenlets: dict[Any, int] = {}
        self._hub = self._greenlet.getcurrent()
        self.device.overlap = self
        try:
            started = 0
            while started < len(tasks) or self._parked:
                while started < len(tasks) and len(greenlets) < self.width:
                    task = self._greenlet.greenlet(_outcome(tasks[started], done[started]), parent=self._hub)
                    greenlets[task] = started
                    started += 1
                    self._switch(task, greenlets, done)
                if self._parked:
                    self._resume_parked(greenlets, done)
        finally:
            if self._parked:  # an interrupt: what is in flight must finish before its tasks are dropped
                with contextlib.suppress(Exception):
                    self.device.wait_parked([token for _, token in self._parked])
            self.device.overlap, self._hub, self._parked = None, None, []
        return done

    def _resume_parked(self, greenlets: dict[Any, int], done: list[Done]) -> None:
        """One wait for every parked task's submission, then each resumed (with the wait's error, if any)."""
        parked, self._parked = self._parked, []
        tick = time.perf_counter()
        try:
            self.device.wait_parked([token for _, token in parked])
            error = None
        except Exception as exc:  # every parked task raises it where it would have waited alone
            error = exc
        share = (time.perf_counter() - tick) / len(parked)
        self.waits += 1
        for task, _ in parked:
            done[greenlets[task]].seconds += share
            self._switch(task, greenlets, done, error)

    def _switch(self, task: Any, greenlets: dict[Any, int], done: list[Done], *resume: Any) -> None:
        """Run ``task`` until it parks or ends (a parked one resumed with ``resume``: the wait's error or None), its
        time added to its own."""
        tick = time.perf_counter()
        task.switch(*resume)
        done[greenlets[task]].seconds += time.perf_counter() - tick
        if task.dead:
            del greenlets[task]


def _outcome(task: Callable[[], T], into: Done[T]) -> Callable[[], None]:
    def run() -> None:
        try:
            into.value = task()
        except Exception as exc:  # the caller's to judge, as it would be alone
            into.error = exc
    return run


def windows(items: Sequence[T], width: int = WINDOW) -> Iterator[Sequence[T]]:
    """``items`` in consecutive runs of ``width`` (the last one shorter)."""
    for start in range(0, len(items), width):
        yield items[start:start + width]
