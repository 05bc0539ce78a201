"""The training family: every op ``AdamwStep.cpp``, ``LinearDw.cpp``, ``FusedCe.cpp`` and
``QuantizedLinearBackward.cpp`` register has a launcher, a reference and a suite, and each edge generator of the
suite reaches the edge it names."""

from __future__ import annotations

import numpy as np
import pytest

from tests.testutils import coverage_gaps
from vkdiff.cases.kernel_suites.nn import training
from vkdiff.cases.kernels import all_cases, suite_of

CPP = ("AdamwStep.cpp", "LinearDw.cpp", "FusedCe.cpp", "QuantizedLinearBackward.cpp")
ADAMW, LINEAR_DW, FUSED_CE, Q4GSW_BACKWARD = (r"^adamw_step\[", r"^linear_dW\[", r"^fused_ce\[",
                                              r"^linear_q4gsw_backward\[")
FLOAT32_MAX = float(np.finfo(np.float32).max)


def _args(case) -> dict:
    return suite_of(case).make_args(case, np.random.default_rng(case.seed()))


def test_every_op_the_cpps_register_is_covered(et_tree):
    registered, gaps = coverage_gaps(et_tree, *CPP)
    assert registered == {"et_vk.adamw_step.default", "et_vk.linear_dW.default", "et_vk.fused_ce.default",
                          "et_vk.linear_q4gsw_backward.default"} and not gaps


def test_ids_are_unique_and_tensors_never_constant():
    cases = [c for pattern in (ADAMW, LINEAR_DW, FUSED_CE, Q4GSW_BACKWARD) for c in all_cases(pattern)]
    assert len({c.id for c in cases}) == len(cases) == 50
    for case in cases:
        for name, value in _args(case).items():
            by_design = (case.has("fresh") and name in "mv") or (case.has("allignored") and name == "labels")
            if isinstance(value, np.ndarray) and value.size > 1 and not by_design:
                assert np.unique(value).size > 1, (case.id, name)


def test_the_only_route_is_float32_buffers_plus_the_placements_the_lowering_gives():
    """``linear_dW`` and ``fused_ce`` lower onto width-packed textures and admit float16; the others cannot be
    lowered, so they keep the C++'s one route."""
    for pattern in (ADAMW, Q4GSW_BACKWARD):
        assert {(c.storage, c.dtype) for c in all_cases(pattern)} == {("buffer", "fp32")}
    for pattern in (LINEAR_DW, FUSED_CE):
        assert {(c.storage, c.dtype) for c in all_cases(pattern)} == {("buffer", "fp32"), ("texture3d", "fp32"),
                                                                      ("buffer", "fp16")}


def test_adamw_reaches_first_and_late_steps_decay_and_learning_rates():
    hyper = [training.adamw_hyperparameters(c) for c in all_cases(ADAMW)]
    corrections = {(round(h["bias_correction1"], 12), round(h["bias_correction2"], 12)) for h in hyper}
    assert (0.1, 0.001) in corrections and (1.0, 1.0) in corrections
    assert {h["weight_decay"] for h in hyper} >= {0.0, 0.01, 0.1} and {h["lr"] for h in hyper} >= {1e-3, 0.5}
    fresh = [_args(c) for c in all_cases(ADAMW) if c.has("fresh")]
    assert fresh and all(not a["m"].any() and not a["v"].any() and a["bias_correction1"] == pytest.approx(0.1)
                         for a in fresh)


def test_adamw_tiny_gradients_reach_eps_and_below_float32s_square():
    for case in (c for c in all_cases(ADAMW) if c.has("tiny")):
        grad = np.abs(_args(case)["grad"].astype(np.float64))
        assert np.any((grad > 1e-10) & (grad < 1e-7))  # near eps = 1e-8: its placement matters
        assert np.any(0.001 * grad ** 2 < np.finfo(np.float32).tiny)


def test_adamw_huge_gradients_overflow_g_squared_but_not_the_update():
    (case,) = [c for c in all_cases(ADAMW) if c.has("huge")]
    args = _args(case)
    grad = np.abs(args["grad"].astype(np.float64))
    assert np.all(grad ** 2 > FLOAT32_MAX) and np.all(0.001 * grad ** 2 < FLOAT32_MAX)
    v_new = args["beta2"] * args["v"].astype(np.float64) + (1 - args["beta2"]) * grad ** 2
    assert np.all(v_new / args["bias_correction2"] < FLOAT32_MAX)


def test_linear_dw_reaches_odd_n_and_k_one_row_and_batches():
    shapes = [c.sizes for c in all_cases(LINEAR_DW)]
    assert any(s["N"] % 4 and s["K"] % 4 for s in shapes) and any(s["M"] == 1 for s in shapes)
    assert any("B" in s for s in shapes) and any(s["N"] < 4 and s["K"] < 4 for s in shapes)
    batched = next(c for c in all_cases(LINEAR_DW) if "B" in c.sizes)
    assert _args(batched)["d_out"].ndim == 3 and "B" in suite_of(batched).resizable_of(batched)


def test_fused_ce_rows_reach_logits_past_88_all_negative_ignored_and_the_last_class():
    reached = set()
    for case in all_cases(FUSED_CE):
        args = _args(case)
        logits, labels = args["logits"].astype(np.float64), args["labels"]
        assert labels.dtype == np.int32 and np.all(labels < case.size("V"))
        reached |= {"big"} if np.any(logits.min(axis=1) > training.HUGE_LOGIT) else set()
        reached |= {"negative"} if np.any(logits.max(axis=1) < 0) else set()
        reached |= {"ignored"} if np.any(labels == training.IGNORE_INDEX) else set()
        reached |= {"all ignored"} if np.all(labels < 0) else set()
        reached |= {"last class"} if np.any(labels == case.size("V") - 1) else set()
        reached |= {"odd vocab"} if case.size("V") % 4 else set()
    assert reached == {"big", "negative", "ignored", "all ignored", "last class", "odd vocab"}
    vocab = {c.size("V") for c in all_cases(FUSED_CE)}
    assert min(vocab) == 1 and any(v < 64 for v in vocab) and max(vocab) >= 32000


def test_fused_ce_n_valid_stays_when_rows_shrink():
    """A scalar the graph fixes at build: a smaller run below the bound must pass the same value."""
    case = next(c for c in all_cases(FUSED_CE) if c.size("R") == 13)
    assert suite_of(case).resizable_of(case) == ("R",)
    assert {_args(c)["n_valid"] for c in all_cases(FUSED_CE)} == {training.N_VALID} and training.N_VALID % 1


def test_q4gsw_backward_reaches_every_code_one_row_odd_n4_odd_k4_and_odd_groups():
    shapes = [c.sizes for c in all_cases(Q4GSW_BACKWARD)]
    assert any(s["M"] == 1 for s in shapes) and any(s["N"] % 8 == 4 for s in shapes)
    assert any(s["K"] % 8 == 4 for s in shapes) and {20, 4} <= {s["g"] for s in shapes}
    assert all(s["K"] % s["g"] == 0 and s["g"] % 4 == 0 and s["N"] % 4 == 0 for s in shapes)
    args = _args(next(c for c in all_cases(Q4GSW_BACKWARD) if c.size("K") == 128))
    packed = args["weights"]
    assert set(np.unique(packed & 0xF)) == set(range(16)) == set(np.unique(packed >> 4))
    assert args["weight_scales"].shape == (128 // 32, 44) and np.all(args["weight_scales"] > 0)
