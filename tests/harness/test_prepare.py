"""Preparing cases ahead of the device (once per data id, in order), and what a failing stage becomes."""

from __future__ import annotations

import threading

import pytest

from vkdiff.cases.kernels import all_cases
from vkdiff.device.shaders.build import GlslcMissingError
from vkdiff.device.shaders.spirv import SpirvOptMissingError
from vkdiff.executors import references
from vkdiff.verdicts.statuses import status_of_exception

CASES = all_cases(r"^linear_q4gsw\[M(1|4)-K64-N40-g32-")


def test_stream_keeps_order_and_prepares_each_data_id_once(monkeypatch):
    calls: list[tuple[str, str]] = []

    def fake_prepare(case, session_seed=0):
        calls.append((case.data_id, threading.current_thread().name))
        return case.data_id

    monkeypatch.setattr(references, "prepare_case", fake_prepare)
    streamed = list(references.prepared_stream(CASES, ahead=1))
    assert [case for case, _ in streamed] == CASES
    assert all(prepared == case.data_id for case, prepared in streamed)
    assert [data_id for data_id, _ in calls] == list(dict.fromkeys(c.data_id for c in CASES))
    assert len(calls) == len(CASES) // 2 and all(name.startswith("vkdiff-prepare") for _, name in calls)


def test_failed_preparation_yields_none_and_the_stream_goes_on(monkeypatch):
    bad = CASES[0].data_id

    def fake_prepare(case, session_seed=0):
        if case.data_id == bad:
            raise ValueError("boom")
        return case.data_id

    monkeypatch.setattr(references, "prepare_case", fake_prepare)
    streamed = dict((case.id, prepared) for case, prepared in references.prepared_stream(CASES))
    assert {cid for cid, p in streamed.items() if p is None} == {c.id for c in CASES if c.data_id == bad}
    assert len(streamed) == len(CASES)


@pytest.mark.parametrize("ahead", [0, 5])
def test_lookahead_does_not_change_what_is_yielded(monkeypatch, ahead):
    monkeypatch.setattr(references, "prepare_case", lambda case, session_seed=0: (case.data_id, session_seed))
    streamed = list(references.prepared_stream(CASES, session_seed=7, ahead=ahead))
    assert streamed == [(c, (c.data_id, 7)) for c in CASES]


@pytest.mark.parametrize("exc, status", [
    (SpirvOptMissingError("spirv-opt not found"), "NOT_RUN"),
    (GlslcMissingError("glslc not found"), "BUILD_FAIL"),
    (KeyError("surprise"), "ERROR"),
])
def test_exceptions_map_to_statuses(exc, status):
    got, reason = status_of_exception(exc)
    assert got.name == status and reason
