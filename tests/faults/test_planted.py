"""Planted faults in the real quantized kernels, float16 and float32: the verdict catches a single wrong code.

The device is given arguments with one fault, the reference keeps the true ones
(``vkdiff.tools.planted``). A float16 case is also judged by the tolerance policy
alone, which misses most single-code faults there: the arithmetic check is what catches them.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.cases.kernels import all_cases
from vkdiff.executors import kernel as executor
from vkdiff.executors import references
from vkdiff.tools import planted

CASES = [
    r"linear_q4gsw[M1-K256-N40-g32-{dtype}-buffer]",
    r"linear_q4gsw_tiled[M13-K256-N40-g32-{dtype}-buffer]",
    r"linear_q4gsw_tiled[M1-K256-N40-g32-{dtype}-buffer]",
    r"linear_q4gsw_tiled[M13-K256-N40-g32-{dtype}-texture3d]",
    r"linear_dq8ca_q4gsw[M4-K256-N40-g32-{dtype}-buffer]",
    r"embedding_q4gsw[V256-D64-g32-T7-{dtype}-buffer]",
]
CODE_TRIALS = 6


def _case(pattern: str, dtype: str):
    wanted = pattern.format(dtype=dtype)
    found = [c for c in all_cases("^" + wanted.replace("[", r"\[").replace("]", r"\]") + "$")]
    assert len(found) == 1, f"{wanted} is not one suite case"
    return found[0]


@requires_tree
@requires_vulkan
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("pattern", CASES)
def test_every_planted_fault_is_caught_and_the_clean_run_passes(et_ctx, pattern, dtype):
    case = _case(pattern, dtype)
    clean = references.prepare_case(case)
    launched = executor.launch(et_ctx, case, clean)
    statuses = planted.judge(case, et_ctx.info.slug, launched, clean)
    assert statuses["tolerance"] == statuses["arithmetic"] == "PASS"
    if "unmodelled" in statuses:
        pytest.skip(f"NOT_RUN: {et_ctx.info.slug} computes {launched.variant} in another order than its GLSL "
                    f"declares, so only the tolerance policy judges it there")
    trials = [planted.run_trial(et_ctx, case, clean, "code", t) for t in range(CODE_TRIALS)]
    trials += [planted.run_trial(et_ctx, case, clean, kind, 0) for kind in planted.KINDS[1:]]
    missed = [(t.kind, t.statuses) for t in trials if t is not None and not t.caught("arithmetic")]
    assert not missed, f"{case.id}: faults the verdict passed: {missed}"


@requires_tree
@requires_vulkan
def test_the_tolerance_policy_alone_misses_float16_codes_the_arithmetic_check_catches(et_ctx):
    """Why the check exists: on float16 accumulation most single-code faults hide in the noise bound."""
    case = _case(CASES[1], "fp16")
    clean = references.prepare_case(case)
    if "unmodelled" in planted.judge(case, et_ctx.info.slug, executor.launch(et_ctx, case, clean), clean):
        pytest.skip(f"NOT_RUN: {et_ctx.info.slug} computes float16 in another order than the tiled linear declares")
    trials = [planted.run_trial(et_ctx, case, clean, "code", t) for t in range(CODE_TRIALS)]
    assert all(t.caught("arithmetic") for t in trials)
    assert sum(t.caught("tolerance") for t in trials) < CODE_TRIALS // 2


def test_planters_change_one_thing_and_leave_the_arguments_untouched():
    case = _case(CASES[4], "fp16")
    args = references.prepare_case(case).args
    before = {k: np.copy(v) for k, v in args.items() if isinstance(v, np.ndarray)}
    rng = np.random.default_rng(3)
    code = planted.plant(case.op, args, "code", rng)
    nibbles = lambda w: np.stack([w & 0xF, w >> 4], axis=-1).astype(int)  # noqa: E731
    step = nibbles(code["weights"]) - nibbles(args["weights"])
    assert np.count_nonzero(step) == 1 and np.abs(step).sum() == 1
    zero = planted.plant(case.op, args, "zero_point", rng)
    assert np.count_nonzero(zero["input_zp"].astype(int) - args["input_zp"].astype(int)) == 1
    row = planted.plant(case.op, args, "row", rng)
    assert (np.flatnonzero((row["weights"] != args["weights"]).any(axis=1)).size == 1)
    for name, value in before.items():
        np.testing.assert_array_equal(args[name], value)
    with pytest.raises(KeyError, match="unknown fault kind"):
        planted.plant(case.op, args, "bits", rng)
