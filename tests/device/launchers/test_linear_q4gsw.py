"""The real ET-VK linear_q4gsw kernels against the numpy reference (needs $VKDIFF_ET_SRC)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.testutils import requires_et_src, requires_vulkan
from vkdiff.cases.kernels import KernelCase, all_cases
from vkdiff.harness import kernels
from vkdiff.harness.status import Status

pytestmark = [requires_et_src, requires_vulkan]

SMALL = [c for c in all_cases(r"^linear_q4gsw\[M(1|13)-K(64|256)-N(40|64)-g(32|64)-") if c.size("N") < 100]


@pytest.mark.parametrize("case", SMALL, ids=lambda c: c.id)
def test_case_passes(et_ctx, case):
    result = kernels.run_case(et_ctx, case)
    assert result.status == Status.PASS.name, result.reason
    assert result.metrics["unwritten"] == 0
    assert result.shader.startswith("linear_q4gsw_" + ("coop" if case.size("M") == 1 else "tiled"))


def _wrong(monkeypatch, corrupt):
    """Run one case with the launcher's inputs corrupted by ``corrupt(inputs, case)``."""
    original = kernels.EXECUTORS["linear_q4gsw"]

    def launch(ctx, case, prepared):
        bad = dataclasses.replace(prepared, inputs=corrupt(dict(prepared.inputs), case))
        return original.launch(ctx, case, bad)

    monkeypatch.setitem(kernels.EXECUTORS, "linear_q4gsw",
                        dataclasses.replace(original, launch=launch))


CASE = KernelCase(op="linear_q4gsw", shape=(("M", 13), ("K", 256), ("N", 64), ("g", 32)), dtype="fp32",
                  storage="buffer")


def test_scales_in_untransposed_order_fail_numeric(et_ctx, monkeypatch):
    """A pass that forgets to transpose: the buffer holds [N, K/gs] order in a [K/gs, N] tensor."""
    def untransposed(inputs, case):
        scales_t = inputs["scales"]
        inputs["scales"] = np.ascontiguousarray(scales_t.T).reshape(scales_t.shape)
        return inputs

    _wrong(monkeypatch, untransposed)
    result = kernels.run_case(et_ctx, CASE)
    assert result.status == Status.FAIL_NUMERIC.name
    assert "Mismatched elements" in result.reason
    assert result.metrics["sqnr_db"] < 20  # a correct fp32 run gives ~130 dB


def test_swapped_nibbles_fail_numeric(et_ctx, monkeypatch):
    def swapped(inputs, case):
        w = inputs["packed_weight"]
        inputs["packed_weight"] = ((w >> 4) | (w << 4)).astype(np.uint8)
        return inputs

    _wrong(monkeypatch, swapped)
    assert kernels.run_case(et_ctx, CASE).status == Status.FAIL_NUMERIC.name


def test_variant_missing_is_not_run(et_ctx, monkeypatch):
    monkeypatch.setattr(et_ctx, "_variants", frozenset())
    result = kernels.run_case(et_ctx, CASE)
    assert result.status == Status.NOT_RUN.name
    assert "is not defined by" in result.reason


def test_repeat_runs_are_deterministic(et_ctx):
    assert kernels.run_case(et_ctx, CASE, repeat=3).status == Status.PASS.name
