"""Kernel cases run overlapped (``Runner.run_window``) give the verdicts they get alone; a device lost at a shared
wait ends every case waiting there, and each of them runs again alone."""

from __future__ import annotations

import pytest

from tests.testutils import isolated, requires_tree, requires_vulkan
from vkdiff.cases.kernels import all_cases
from vkdiff.datamodel import DEVICE_LOST_FLAG
from vkdiff.datamodel.settings import RunSettings
from vkdiff.device.boundary import DeviceLostError
from vkdiff.device.runtime import overlap
from vkdiff.device.shaders.trees import TreeChoice
from vkdiff.harness.runner import Runner

pytestmark = [requires_vulkan, requires_tree,
              pytest.mark.skipif(not overlap.available(), reason="NOT_RUN: greenlet is not installed")]

CASES = r"^(add|softmax|permute|linear|sum)\["


def _rows(results):
    return [(r.case, r.device, r.status, r.reason) for r in results]


def _runner(et_tree, transport: str) -> Runner:
    from vkdiff.device.transports.adapters import select

    return Runner(tree=TreeChoice(path=et_tree, note="test"), adapters=select(via=transport)[:1],
                  settings=RunSettings(transport=transport))


class Counted(overlap.Overlap):
    """Records, per run, the submissions parked and the shared waits made for them."""

    runs: list[tuple[int, int]] = []

    def run(self, tasks):
        try:
            return super().run(tasks)
        finally:
            Counted.runs.append((self.parks, self.waits))


def _alone_and_overlapped(et_tree, transport: str):
    """(rows alone, rows overlapped, [(parks, waits)] of each overlap), in a process of its own (``isolated``)."""
    cases = all_cases(CASES)[::7][:20]
    runner = _runner(et_tree, transport)
    slug = runner.slugs[0]
    alone = _rows(r for case in cases for r in runner.run(case, slug))
    overlap.Overlap = Counted
    return alone, _rows(runner.run_window(cases)), Counted.runs


def test_overlapped_cases_give_the_verdicts_they_get_alone_on_raw_vulkan(et_tree):
    """Several cases' submissions are in flight at each wait (two or more, on average)."""
    alone, overlapped, runs = isolated(_alone_and_overlapped, et_tree, "vulkan")
    assert "PASS" in {status for _, _, status, _ in alone}
    assert overlapped == alone
    parks, waits = runs[0]
    assert waits and parks >= 2 * waits, f"{parks} submissions gave way in {waits} waits: the cases did not overlap"


def test_through_wgpu_a_window_runs_its_cases_in_turn_with_the_verdicts_they_get_alone(et_tree):
    """wgpu's submissions never park (``WgpuDevice.wait_parked``): each case runs through, as alone."""
    alone, overlapped, runs = isolated(_alone_and_overlapped, et_tree, "wgpu")
    assert "PASS" in {status for _, _, status, _ in alone}
    assert overlapped == alone
    assert runs == [(0, 0)]


def _lost_at_the_first_shared_wait(et_tree):
    """(rows alone, rows overlapped, any device-lost flag, whether a fresh device ran the reruns)."""
    cases = all_cases(CASES)[::7][:8]
    runner = _runner(et_tree, "vulkan")
    slug = runner.slugs[0]
    alone = _rows(r for case in cases for r in runner.run(case, slug))
    lost = runner._context(slug).device

    def first_wait_lost(tokens):
        del lost.wait_parked
        raise DeviceLostError(f"waiting for {len(tokens)} overlapped submissions: VK_ERROR_DEVICE_LOST")

    lost.wait_parked = first_wait_lost
    again = runner.run_window(cases)
    return alone, _rows(again), any(DEVICE_LOST_FLAG in r.flags for r in again), runner._context(slug).device is not lost


def test_a_device_lost_at_a_shared_wait_reruns_each_case_that_waited_alone(et_tree):
    """The raw transport's first shared wait reports the device lost: the cases parked there end with the lost
    device, each runs again alone on a fresh device, and those results are the ones given."""
    alone, again, flagged, fresh = isolated(_lost_at_the_first_shared_wait, et_tree)
    assert again == alone and not flagged
    assert fresh, "the alone runs opened a fresh device"


def test_cases_run_one_at_a_time_where_each_needs_its_own_process_or_layer(et_tree):
    cases = all_cases(CASES)[:2]
    tree = TreeChoice(path=et_tree, note="test")
    slug_runner = _runner(et_tree, "wgpu")
    slug = slug_runner.slugs[0]
    assert slug_runner.overlaps(slug, cases)
    assert not slug_runner.overlaps(slug, cases[:1])
    timed = Runner(tree=tree, adapters=[slug_runner.adapters[slug]], settings=RunSettings(timeout=30))
    assert not timed.overlaps(slug, cases)
    validated = Runner(tree=tree, adapters=[slug_runner.adapters[slug]], settings=RunSettings(validate="sync"))
    assert not validated.overlaps(slug, cases)
