"""Preparing cases ahead of the device (once per data id, in order), and what a failing stage becomes."""

from __future__ import annotations

import threading

import numpy as np
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
    monkeypatch.setattr(references, "prepare_smaller", lambda *args: None)
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
    monkeypatch.setattr(references, "prepare_smaller", lambda *args: None)
    streamed = dict((case.id, prepared) for case, prepared in references.prepared_stream(CASES))
    assert {cid for cid, p in streamed.items() if p is None} == {c.id for c in CASES if c.data_id == bad}
    assert len(streamed) == len(CASES)


@pytest.mark.parametrize("ahead", [0, 5])
def test_lookahead_does_not_change_what_is_yielded(monkeypatch, ahead):
    monkeypatch.setattr(references, "prepare_case", lambda case, session_seed=0: (case.data_id, session_seed))
    monkeypatch.setattr(references, "prepare_smaller", lambda *args: None)
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


def test_smaller_runs_references_are_prepared_ahead_as_the_run_would_compute_them():
    """The reference thread also computes each smaller run's reference, with the same draw and kept constants as
    ``run_smaller`` would on the device thread."""
    import vkdiff.device.launchers  # noqa: F401 - registers the launchers whose constants are kept
    from vkdiff.cases.kernels import below_bound

    case = all_cases(r"^convolution\[C5-H9-W11-O7-K3-s1-p1-d1-g1-fp32-texture3d-channels-direct-bias\]$")[0]
    prepared = references._timed_prepare(case, 3)
    smaller = below_bound(case)
    assert smaller and list(prepared.smaller) == [s.data_id for s in smaller]
    for small in smaller:
        again = references.prepared_for(small, references.smaller_args(small, prepared, prepared.smaller_constants, 3))
        assert np.array_equal(prepared.smaller[small.data_id].expected, again.expected)
        assert prepared.smaller[small.data_id].args["weight"] is prepared.args["weight"], "a constant is kept"


@pytest.mark.parametrize("case_id", ["linear_q4gsw[M4-K4096-N64-g32-fp16-buffer]",
                                     "pow[C3-H5-W6-oC3-oH5-oW6-fp16-buffer-special]"])
def test_the_flushed_reference_computed_ahead_gives_the_envelope_the_device_thread_would(case_id):
    """Operands with float16 subnormals: the envelope from ``Prepared.flushed`` (the reference thread's) is the one
    computed from scratch, band for band, and it does hold the flushed band."""
    from vkdiff.reference import OPS
    from vkdiff.reference.spec.envelope import evaluate

    case = next(c for c in all_cases(r"^" + case_id.replace("[", r"\[").replace("]", r"\]") + "$"))
    prepared = references.prepare_case(case)
    assert prepared.flushed.get("float16") is not None
    variant = "undeclared_half"
    fn = OPS[case.op].fn
    ahead = evaluate(case.op, prepared.args, prepared.expected, variant, fn, stored="float16",
                     past_range=prepared.past_range, flushed=prepared.flushed)
    fresh = evaluate(case.op, prepared.args, prepared.expected, variant, fn, stored="float16",
                     past_range=prepared.past_range)
    assert [b.liberties for b in ahead.bands] == [b.liberties for b in fresh.bands]
    assert ("subnormal_flush",) in [b.liberties for b in ahead.bands]
    for mine, theirs in zip(ahead.bands, fresh.bands):
        for name in ("lo", "hi", "nan"):
            assert np.array_equal(getattr(mine, name), getattr(theirs, name), equal_nan=True)
