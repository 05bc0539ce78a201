"""``Overlap``: tasks give way where they would wait for the device, and one wait serves every task parked then."""

from __future__ import annotations

import time

import pytest

from vkdiff.device.boundary import DeviceLostError
from vkdiff.device.runtime.overlap import Overlap, available, windows

pytestmark = pytest.mark.skipif(not available(), reason="NOT_RUN: greenlet is not installed (pip install -e .[all])")


class FakeDevice:
    """Records each shared wait's tokens; ``fail`` is raised by the first wait."""

    def __init__(self, fail: Exception | None = None, wait_s: float = 0.0):
        self.overlap = None
        self.waits: list[list] = []
        self.fail, self.wait_s = fail, wait_s

    def wait_parked(self, tokens):
        self.waits.append(list(tokens))
        time.sleep(self.wait_s)
        if self.fail is not None:
            fail, self.fail = self.fail, None
            raise fail


def _submitting(device, log, name, submissions=2, host_s=0.0):
    """A task that submits ``submissions`` times, giving way after each as a transport makes it."""
    def task():
        for n in range(submissions):
            time.sleep(host_s)
            log.append(f"{name} submits {n}")
            if device.overlap.in_task():
                device.overlap.park((name, n))
            log.append(f"{name} resumes {n}")
        return name.upper()
    return task


def test_every_task_submits_before_one_wait_serves_them_all():
    device, log = FakeDevice(), []
    done = Overlap(device).run([_submitting(device, log, name) for name in "abc"])
    assert [d.value for d in done] == ["A", "B", "C"] and all(d.error is None for d in done)
    assert device.waits == [[("a", 0), ("b", 0), ("c", 0)], [("a", 1), ("b", 1), ("c", 1)]]
    assert log[:3] == ["a submits 0", "b submits 0", "c submits 0"], "nobody resumes before everyone has submitted"
    assert log[3:6] == ["a resumes 0", "a submits 1", "b resumes 0"], "a task runs on until its next submission"
    assert device.overlap is None, "the device is left as it was found"


def test_no_more_tasks_are_in_flight_than_the_width():
    device, log = FakeDevice(), []
    Overlap(device, width=2).run([_submitting(device, log, name, submissions=1) for name in "abcde"])
    assert [len(w) for w in device.waits] == [2, 2, 1]
    assert log.index("c submits 0") > log.index("b resumes 0"), "c starts only once a or b has ended"


def test_a_failed_wait_raises_in_every_task_that_waited_and_a_task_error_is_its_outcome():
    device, log = FakeDevice(fail=DeviceLostError("vkWaitForFences: device lost")), []

    def broken():
        raise ValueError("a harness bug")

    done = Overlap(device).run([_submitting(device, log, "a"), broken, _submitting(device, log, "b")])
    assert [type(d.error) for d in done] == [DeviceLostError, ValueError, DeviceLostError]
    assert "a resumes 0" not in log and "b resumes 0" not in log


def test_a_tasks_seconds_are_its_own_host_time_and_its_share_of_each_wait():
    """Two tasks, 50 ms of host work before each of two submissions, 40 ms per wait: 100 + 2 * 20 ms each."""
    device, log = FakeDevice(wait_s=0.04), []
    tick = time.perf_counter()
    done = Overlap(device).run([_submitting(device, log, name, host_s=0.05) for name in "ab"])
    wall = time.perf_counter() - tick
    for d in done:
        assert 0.14 <= d.seconds < 0.14 + 0.05, d.seconds
    assert sum(d.seconds for d in done) <= wall


def test_a_task_outside_an_overlap_waits_itself():
    device = FakeDevice()
    overlap = Overlap(device)
    assert not overlap.in_task()
    done = overlap.run([lambda: overlap.in_task()])
    assert done[0].value is True and not overlap.in_task()


def test_windows_cover_every_item_in_order():
    assert [list(w) for w in windows(range(5), 2)] == [[0, 1], [2, 3], [4]]
