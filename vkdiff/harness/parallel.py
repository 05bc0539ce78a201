"""Kernel cases over N worker processes (``vkdiff run --jobs N``), each with its own device and references.

A kernel case's host work (its graph, pipelines, references, judging) is Python on one
core while the GPU idles; N workers keep N cores busy. Cases go out in chunks of
consecutive ids (one op's cases share pipelines), dealt to whichever worker is free (a
slow chunk never holds the other workers back), and their results come back in case
order. Verdicts do not change: each case is seeded from its id, and a chunk whose worker
died (a driver abort, a lost device) is run again here, one case at a time, in the
caller's runner, with its isolation (``--timeout``).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import multiprocessing
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Generator, Iterator, Sequence

from vkdiff.cases.kernels import KernelCase
from vkdiff.datamodel import REPAIRS, Repair, Result
from vkdiff.datamodel.settings import RunSettings
from vkdiff.device.runtime.overlap import windows
from vkdiff.device.shaders.trees import TreeChoice

CHUNK = 16
"""Fewest consecutive cases a worker takes at a time (``chunk_size``)."""
CHUNKS_PER_WORKER = 32
"""Chunks ``chunk_size`` aims at per worker, up to ``MAX_CHUNK`` cases each: with few workers, longer runs of one op
stay in one process, which makes each pipeline and layout probe once."""
MAX_CHUNK = 64
AUTO_MAX = 16
"""Most workers ``--jobs auto`` starts (each holds a device and its pipelines). On a 16-core H200 host the kernel
suite took 27.9 s through wgpu with 8 workers and 20.0 s with 16 (raw Vulkan: 13.3 and 13.2 s)."""


def jobs_for(asked: int | None, kernel_cases: int) -> int:
    """Workers for a run: as asked, or (``auto``, None) one per core up to ``AUTO_MAX`` when there are at least four
    chunks of kernel cases per worker to share (starting a worker costs about a second), else none apart."""
    if asked is not None:
        return asked
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, AUTO_MAX, kernel_cases // (4 * CHUNK)))


def chunk_size(cases: int, jobs: int) -> int:
    """Cases a worker takes at a time: ``CHUNK``, or up to ``MAX_CHUNK`` while each worker still gets
    ``CHUNKS_PER_WORKER`` chunks. The kernel suite's 3,862 cases dealt to 2 workers in 16-case chunks make 4,124
    pipelines for 3,126 distinct ones (each 3.4 ms through wgpu on lavapipe); in 60-case chunks, 3,620."""
    return max(CHUNK, min(MAX_CHUNK, cases // (max(jobs, 1) * CHUNKS_PER_WORKER)))


@dataclasses.dataclass(kw_only=True, frozen=True)
class JobSpec:
    """What a worker needs to build the runner the caller has."""

    tree: TreeChoice
    slugs: tuple[str, ...]
    settings: RunSettings
    et_src: str | None
    on_driver_bug: Callable[..., dict[str, Any]] | None = None


_RUNNER: Any = None
"""The worker's own ``Runner`` (one per worker process, made by ``_start``)."""


def _start(spec: JobSpec) -> None:
    """The worker's runner; an interrupt is the caller's to act on (it stops between chunks)."""
    global _RUNNER
    import signal

    from vkdiff.device.transports.adapters import select

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from vkdiff.harness.runner import Runner

    settings = spec.settings
    adapters = select(list(spec.slugs), via=settings.transport, validate=settings.validate,
                      profile=settings.device_profile) if spec.slugs else []
    _RUNNER = Runner(tree=spec.tree, adapters=adapters, settings=settings, et_src=spec.et_src,
                     on_driver_bug=spec.on_driver_bug)


def _run_chunk(cases: Sequence[KernelCase]) -> tuple[list[Result], list[Repair]]:
    """The chunk's results, and the cache repairs the worker made meanwhile (the caller prints them)."""
    _RUNNER.schedule(cases)
    return [r for window in windows(cases) for r in _RUNNER.run_window(window)], _RUNNER.new_repairs()


def run_alone(runner: Any, cases: Sequence[KernelCase]) -> list[Result]:
    """Every result of ``cases`` on the runner's devices, in order, in this process."""
    return [result for case in cases for device in runner.devices_for(case) for result in runner.run(case, device)]


def spec_of(runner: Any) -> JobSpec:
    return JobSpec(tree=runner.tree, slugs=tuple(runner.slugs), settings=runner.settings, et_src=runner.et_src,
                   on_driver_bug=runner.on_driver_bug)


def run_parallel(cases: Sequence[KernelCase], runner: Any, jobs: int,
                 stop: Callable[[], bool] = lambda: False) -> Iterator[Result]:
    """The results of ``cases`` (kernel cases) from ``jobs`` workers, in case order; ``stop`` ends it between
    chunks (at most two chunks a worker are in flight, so the workers stop soon after).

    A free worker takes the next chunk whether or not the chunks before it are back, so a slow chunk holds back
    the order results are given in, never the other workers. When a worker dies, the first chunk not yet back runs
    again in ``runner`` and a fresh pool takes the chunks after it."""
    size = chunk_size(len(cases), jobs)
    chunks = [list(cases[i:i + size]) for i in range(0, len(cases), size)]
    spec = spec_of(runner)
    back: dict[int, list[Result]] = {}
    done: int | None = 0
    while done is not None and done < len(chunks):
        pool = concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                                                      initializer=_start, initargs=(spec,))
        try:
            done = yield from _drain(pool, chunks, back, done, 2 * jobs, stop)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        if done is not None and done < len(chunks):
            yield from run_alone(runner, chunks[done])
            done += 1


def _drain(pool: concurrent.futures.Executor, chunks: list[list[KernelCase]], back: dict[int, list[Result]],
           done: int, window: int, stop: Callable[[], bool]) -> Generator[Result, None, int | None]:
    """Yield the results of ``chunks[done:]`` in order as ``pool`` returns them, ``window`` chunks in flight
    (``back`` keeps those that came early). Returns the first chunk not back when the pool broke, ``len(chunks)``
    when all are given, None on ``stop``."""
    pending: dict[concurrent.futures.Future, int] = {}
    ahead = done
    while True:
        while done in back:
            yield from back.pop(done)
            done += 1
        if done == len(chunks) or stop():
            return None if done < len(chunks) else done
        try:
            while len(pending) < window and ahead < len(chunks):
                if ahead not in back:
                    pending[pool.submit(_run_chunk, chunks[ahead])] = ahead
                ahead += 1
        except BrokenProcessPool:
            return done  # a worker died before this submit
        if not pending:
            return done
        finished, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
        broke = False
        for future in finished:
            index = pending.pop(future)
            try:
                back[index], repairs = future.result()
            except BrokenProcessPool:
                broke = True
            else:
                REPAIRS.extend(repairs)  # the caller's runner reports them with its own (``new_repairs``)
        if broke:
            while done in back:
                yield from back.pop(done)
                done += 1
            return done
