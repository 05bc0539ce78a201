"""``vkdiff run --jobs N``: kernel cases over worker processes give the serial run's results, in case order; a chunk
whose worker dies is run again in the caller's runner."""

from __future__ import annotations

import os

import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.cases.kernels import all_cases
from vkdiff.datamodel.settings import RunSettings
from vkdiff.device.shaders.trees import TreeChoice
from vkdiff.harness import parallel
from vkdiff.harness.runner import Runner

DIES_ON = "add[B1-H7-W64-fp32-buffer]"


def _dying_chunk(cases):
    """A worker's chunk that aborts the worker (a driver abort) when it holds ``DIES_ON``."""
    if any(c.id == DIES_ON for c in cases):
        os._exit(3)
    return parallel._run_chunk(cases)


def _rows(results):
    return [(r.case, r.device, r.status, r.reason) for r in results]


def test_auto_jobs_start_workers_only_with_cases_enough_to_share():
    assert parallel.jobs_for(3, 1) == 3
    assert parallel.jobs_for(None, 10) == 1
    assert 1 <= parallel.jobs_for(None, 10_000) <= parallel.AUTO_MAX


def test_few_workers_take_longer_chunks_many_keep_the_shortest():
    """Each worker still gets ``CHUNKS_PER_WORKER`` chunks; never shorter than ``CHUNK`` nor longer than ``MAX_CHUNK``."""
    assert parallel.chunk_size(3862, 2) == 3862 // (2 * parallel.CHUNKS_PER_WORKER) == 60
    assert parallel.chunk_size(3862, 16) == parallel.CHUNK
    assert parallel.chunk_size(100_000, 1) == parallel.MAX_CHUNK
    assert parallel.chunk_size(5 * parallel.CHUNK, 2) == parallel.CHUNK
    for jobs in (1, 2, 3, 4, 8):
        size = parallel.chunk_size(3862, jobs)
        assert parallel.CHUNK <= size <= parallel.MAX_CHUNK
        assert size == parallel.CHUNK or -(-3862 // size) >= jobs * parallel.CHUNKS_PER_WORKER


def test_a_dead_workers_chunk_reruns_here_and_the_order_holds(monkeypatch):
    """No tree: every result is NOT_RUN, which the workers and the caller both give; the worker holding ``DIES_ON``
    dies, its chunk (and those in flight with it) come from the caller's runner, a fresh pool takes the rest."""
    cases = all_cases(r"^add\[")[:5 * parallel.CHUNK]
    assert any(c.id == DIES_ON for c in cases)
    runner = Runner(tree=TreeChoice(path=None, note="no tree (test)"), adapters=[])
    monkeypatch.setattr(parallel, "_run_chunk", _dying_chunk)
    got = list(parallel.run_parallel(cases, runner, 2))
    assert _rows(got) == _rows(parallel.run_alone(runner, cases))


def _slow_first_chunk(cases):
    """The first chunk waits (up to 30 s) until the last chunk has run, as a chunk of slow cases holds its worker;
    it records whether the other worker reached the last chunk meanwhile."""
    import time

    marks = os.environ["VKDIFF_TEST_MARKS"]
    if cases[0].id == os.environ["VKDIFF_TEST_LAST"]:
        open(os.path.join(marks, "last-ran"), "w").close()
    if cases[0].id == os.environ["VKDIFF_TEST_FIRST"]:
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(marks, "last-ran")) and time.monotonic() < deadline:
            time.sleep(0.05)
        open(os.path.join(marks, "first-saw-last" if time.monotonic() < deadline else "first-gave-up"), "w").close()
    return parallel._run_chunk(cases)


def test_a_slow_chunk_holds_back_only_the_order_not_the_other_workers(monkeypatch, tmp_path):
    """Eight chunks, two workers: while the first chunk's worker is held, the other takes every later chunk (four
    in flight at most), and the results still come in case order."""
    cases = all_cases()[:8 * parallel.CHUNK]
    runner = Runner(tree=TreeChoice(path=None, note="no tree (test)"), adapters=[])
    monkeypatch.setenv("VKDIFF_TEST_MARKS", str(tmp_path))
    monkeypatch.setenv("VKDIFF_TEST_FIRST", cases[0].id)
    monkeypatch.setenv("VKDIFF_TEST_LAST", cases[7 * parallel.CHUNK].id)
    monkeypatch.setattr(parallel, "_run_chunk", _slow_first_chunk)
    got = list(parallel.run_parallel(cases, runner, 2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first-saw-last", "last-ran"]
    assert _rows(got) == _rows(parallel.run_alone(runner, cases))


def _repairing_chunk(cases):
    """A worker's chunk during which the worker repaired a cache entry."""
    from vkdiff.datamodel.cache import CacheCorruptError, record_repair

    record_repair(CacheCorruptError(f"/cache/{cases[0].id}", "content hash mismatch"))
    return parallel._run_chunk(cases)


def test_a_workers_cache_repairs_reach_the_callers_runner(monkeypatch):
    """Each repair a worker made is reported by the caller's runner (``new_repairs``), which prints it in a run."""
    cases = all_cases(r"^add\[")[:2 * parallel.CHUNK]
    runner = Runner(tree=TreeChoice(path=None, note="no tree (test)"), adapters=[])
    monkeypatch.setattr(parallel, "_run_chunk", _repairing_chunk)
    list(parallel.run_parallel(cases, runner, 2))
    assert sorted(r.path for r in runner.new_repairs()) == sorted(f"/cache/{c.id}" for c in cases[::parallel.CHUNK])


class BreaksOnSubmit:
    """A pool whose third submit finds it broken (a worker died between submits), as a loaded machine shows."""

    submits = 0

    def __init__(self, *args, **kwargs):
        pass

    def submit(self, fn, chunk):
        import concurrent.futures
        from concurrent.futures.process import BrokenProcessPool

        BreaksOnSubmit.submits += 1
        if BreaksOnSubmit.submits == 3:
            raise BrokenProcessPool("a worker died")
        future = concurrent.futures.Future()
        future.set_result((parallel.run_alone(RUNNER, chunk), []))
        return future

    def shutdown(self, **kwargs):
        pass


RUNNER = Runner(tree=TreeChoice(path=None, note="no tree (test)"), adapters=[])


def test_a_pool_found_broken_at_submit_reruns_the_chunk_here(monkeypatch):
    cases = all_cases()[:5 * parallel.CHUNK]
    monkeypatch.setattr(parallel.concurrent.futures, "ProcessPoolExecutor", BreaksOnSubmit)
    got = list(parallel.run_parallel(cases, RUNNER, 1))
    assert _rows(got) == _rows(parallel.run_alone(RUNNER, cases))
    assert BreaksOnSubmit.submits > 3, "a fresh pool took the chunks after the broken one"


@requires_vulkan
@requires_tree
def test_workers_give_the_serial_verdicts_in_case_order(et_tree):
    """Three ops' cases (textures and buffers) through two workers on the first adapter (wgpu, which this process
    may drive itself): the same statuses, reasons and order as one process."""
    from vkdiff.device.transports.adapters import select

    cases = all_cases(r"^(add|softmax|permute)\[")[::3][:3 * parallel.CHUNK]
    runner = Runner(tree=TreeChoice(path=et_tree, note="test"), adapters=select()[:1], settings=RunSettings())
    serial = _rows(parallel.run_alone(runner, cases))
    runner.close()
    assert len(serial) == len(cases) and "PASS" in {status for _, _, status, _ in serial}
    assert _rows(parallel.run_parallel(cases, runner, 2)) == serial


@pytest.mark.parametrize("text", ["0", "-1", "two"])
def test_a_bad_jobs_value_is_one_line(text):
    import argparse

    from vkdiff.entry.commands.run import _jobs

    with pytest.raises(argparse.ArgumentTypeError, match="--jobs must be auto or a whole number"):
        _jobs(text)
