"""Verdicts against the spec envelope: spec-allowed, FAIL_PORTABILITY, FAIL_DRIVER, and where the envelope refuses."""

from __future__ import annotations

import math
import re

import numpy as np

from vkdiff.datamodel import Status
from vkdiff.reference.spec.envelope import evaluate
from vkdiff.verdicts.envelope import judge

FLUSHES = {"f32_denorm": "flushed", "div_f32_max_ulp": 1.14, "fma": "contracted"}
KEEPS = {"f32_denorm": "preserved", "div_f32_max_ulp": 0.45, "fma": "separate"}


def rsqrt_case():
    x = np.array([5.6e-45, 4.0, 2.25], np.float32)
    expected = 1 / np.sqrt(x.astype(np.float64))
    return x, expected, 1e-5 + 1e-5 * np.abs(expected)


def test_a_flushed_subnormal_is_spec_allowed_on_a_device_that_flushes():
    x, expected, bound = rsqrt_case()
    env = evaluate("aten.rsqrt.default", {"self": x}, expected, "rsqrt_float_buffer")
    device = np.array([np.inf, 0.5, 1 / 1.5], np.float32)
    verdict = judge(Status.FAIL_NAN, device, expected, bound, env, "float32", FLUSHES)
    assert verdict.status is Status.PASS and verdict.flags == ["spec-allowed:f32_denorm"]


def test_the_envelope_refuses_a_liberty_the_device_says_it_does_not_take():
    x, expected, bound = rsqrt_case()
    env = evaluate("aten.rsqrt.default", {"self": x}, expected, "rsqrt_float_buffer")
    device = np.array([np.inf, 0.5, 1 / 1.5], np.float32)
    verdict = judge(Status.FAIL_NAN, device, expected, bound, env, "float32", KEEPS)
    assert verdict.status is Status.FAIL_DRIVER and "outside what the Vulkan spec allows" in verdict.reason


def test_a_planted_fault_is_never_spec_allowed():
    """(The spec's tan is loose: 2^-11 on sin and cos is ~1.4% of tan(-1.38) = -5.2, so a fault must be placed where
    the envelope is narrow to be told apart; near 0 it is.)"""
    x = np.linspace(-3.0, 3.0, 64, dtype=np.float32)
    expected = np.tan(x.astype(np.float64))
    bound = 1e-5 + 1e-5 * np.abs(expected)
    env = evaluate("aten.tan.default", {"self": x}, expected, "tan_float_buffer")
    device = expected.astype(np.float32)
    device[31] += np.float32(0.05)   # tan(-0.048): sin / cos within 2^-11 moves it by ~1e-3, never by 0.05
    verdict = judge(Status.FAIL_NUMERIC, device, expected, bound, env, "float32", FLUSHES)
    assert verdict is not None and verdict.status is Status.FAIL_DRIVER
    assert not verdict.flags


def test_floor_division_is_a_portability_failure_even_where_the_device_is_right():
    x, y = np.array([6.0, 7.5, 9.0], np.float32), np.array([3.0, 2.0, 4.0], np.float32)
    expected = np.floor(x.astype(np.float64) / y)
    args = {"self": x, "other": y, "rounding_mode": "floor"}
    env = evaluate("aten.div.Tensor_mode", args, expected, "binary_floor_divide_buffer")
    verdict = judge(Status.PASS, expected.astype(np.float32), expected, np.zeros(3), env, "float32", KEEPS)
    assert verdict.status is Status.FAIL_PORTABILITY
    assert "floor division exact only with correctly rounded division" in verdict.reason
    assert verdict.metrics["portability"]["index"] == [0]


def test_a_device_that_floors_one_low_is_the_same_portability_failure():
    x, y = np.array([6.0, 7.5], np.float32), np.array([3.0, 2.0], np.float32)
    expected = np.floor(x.astype(np.float64) / y)
    env = evaluate("aten.div.Tensor_mode", {"self": x, "other": y, "rounding_mode": "floor"}, expected, "binary_floor_divide_buffer")
    verdict = judge(Status.FAIL_NUMERIC, np.array([1.0, 3.0], np.float32), expected, np.zeros(2), env, "float32",
                    FLUSHES)
    assert verdict.status is Status.FAIL_PORTABILITY and "this device takes it" in verdict.reason


def test_a_result_past_the_envelope_of_a_non_portable_shader_stays_a_plain_failure():
    x, y = np.array([6.0, 7.5], np.float32), np.array([3.0, 2.0], np.float32)
    expected = np.floor(x.astype(np.float64) / y)
    env = evaluate("aten.div.Tensor_mode", {"self": x, "other": y, "rounding_mode": "floor"}, expected, "binary_floor_divide_buffer")
    kept = judge(Status.FAIL_NUMERIC, np.array([2.0, 5.0], np.float32), expected, np.zeros(2), env, "float32",
                 FLUSHES)
    assert kept.status is Status.FAIL_NUMERIC and not kept.reason and not kept.flags
    assert kept.metrics["unexplained"] == 1 and kept.metrics["portability"]["liberties"] == ["division"]


def test_tan_at_its_pole_is_spec_allowed_and_names_the_trait():
    x = np.array([np.nextafter(np.float32(math.pi / 2), np.float32(0)), 0.25], np.float32)
    expected = np.tan(x.astype(np.float64))
    env = evaluate("aten.tan.default", {"self": x}, expected, "tan_float_buffer")
    device = np.array([np.inf, np.tan(0.25)], np.float32)
    verdict = judge(Status.FAIL_NAN, device, expected, 1e-5 + 1e-5 * np.abs(expected), env, "float32", FLUSHES)
    assert verdict.status is Status.PASS and verdict.flags == ["spec-allowed:sin_cos_max_abs"]


def test_a_passing_result_without_a_portability_rule_is_left_alone():
    x, expected, bound = rsqrt_case()
    env = evaluate("aten.rsqrt.default", {"self": x}, expected, "rsqrt_float_buffer")
    assert judge(Status.PASS, expected.astype(np.float32), expected, bound, env, "float32", KEEPS) is None


def _floor_division_run(x: np.ndarray, y: np.ndarray, output: np.ndarray):
    """A checked floor-divide launch of ``output`` (stand-ins for the launch: only what judging reads)."""
    from vkdiff.datamodel import Tolerance
    from vkdiff.device.graph import Launch
    from vkdiff.executors.kernel import checked
    from vkdiff.executors.references import Prepared

    prepared = Prepared(args={"self": x, "other": y, "rounding_mode": "floor"},
                        expected=np.floor(x.astype(np.float64) / y), magnitude=None,
                        tolerance=Tolerance.for_dtype(np.float32))
    launch = Launch(output=output, variant="binary_floor_divide_buffer")
    return checked("aten.div.Tensor_mode", launch, prepared)


def test_a_portability_finding_does_not_hide_a_failure_below_the_bound():
    from types import SimpleNamespace

    from vkdiff.datamodel import Result
    from vkdiff.executors.kernel import KernelRun, Smaller
    from vkdiff.verdicts.kernels import judge_kernel

    x, y = np.array([6.0, 7.5, 9.0], np.float32), np.array([3.0, 2.0, 4.0], np.float32)
    first = _floor_division_run(x, y, np.array([2.0, 3.0, 2.0], np.float32))          # right, but 6 / 3 is not portable
    small = SimpleNamespace(id="div_mode[W2]", sizes=[2])
    wrong = _floor_division_run(x[1:], y[1:], np.array([3.0, 7.0], np.float32))      # 9 / 4 floored to 7: a real fault
    run = KernelRun(case=SimpleNamespace(id="div_mode[W3]"), repeat=1, first=first,
                    smaller=[Smaller(case=small, output_sizes=[(2,)], wanted=[(2,)], run=wrong)])
    result = Result(case="div_mode[W3]", op="aten.div.Tensor_mode", variant="", knobs={}, shape=[3], device="d",
                    status="ERROR")
    judge_kernel(result, run)
    assert result.status == "FAIL_NUMERIC" and result.reason.startswith("below the bound: div_mode[W2]")
    assert result.metrics["envelope"]["portability"]["index"] == [0]             # the finding is still recorded


def test_a_tuple_op_is_judged_across_its_outputs_and_names_the_output():
    from tests.reference.test_spec_envelope import constant_row_layer_norm
    args, expected = constant_row_layer_norm()
    env = evaluate("aten.native_layer_norm.default", args, expected, "native_layer_norm_buffer_half")
    flat = np.concatenate([e.reshape(-1) for e in expected])
    bound = 1e-3 + 1e-3 * np.abs(flat)
    device = flat.astype(np.float16)
    device[14] = 314.25                                   # the constant row's rstd as NVIDIA computes it
    verdict = judge(Status.FAIL_NUMERIC, device, flat, bound, env, "float16", {"pow_max_ulp": 8520.0})
    assert verdict.status is Status.FAIL_PORTABILITY and "at out [0, 1, 1]" in verdict.reason
    device[9] = 70.0                                      # and an output of the other row no liberty reaches
    kept = judge(Status.FAIL_NUMERIC, device, flat, bound, env, "float16", {"pow_max_ulp": 8520.0})
    assert kept.status is Status.FAIL_NUMERIC and kept.metrics["unexplained"] == [1, 0, 0]
    assert kept.metrics["portability"]["liberties"] == ["pow"] and not kept.reason


def test_a_device_that_computes_mediump_in_float32_refuses_the_relaxed_band():
    x = np.array([2.0, 3.0], np.float16)
    expected = np.sqrt(x.astype(np.float64))
    env = evaluate("aten.sqrt.default", {"self": x}, expected, "sqrt_half_texture3d", stored="float16", relaxed=True)
    device = expected + 3e-4                         # within a float16 rounding, far past float32's
    bound = np.full(2, 1e-5)
    takes = judge(Status.FAIL_NUMERIC, device, expected, bound, env, "float32", {"relaxed_precision_f16": True})
    assert takes.status is Status.FAIL_PORTABILITY and "mediump" in takes.reason
    assert "relaxed_precision" in takes.metrics["liberties"]
    refuses = judge(Status.FAIL_NUMERIC, device, expected, bound, env, "float32", {"relaxed_precision_f16": False})
    assert refuses.status is Status.FAIL_DRIVER      # its own probe computes mediump in float32: sqrt is 1e-7 off


def test_nan_a_liberty_gives_on_top_of_the_shaders_own_error_is_that_error():
    """gelu(approximate='none') through ET-VK's tanh formula: wrong against erf at 1.0 whatever the device, and NaN
    past |x| ~ 13.5 on a device whose tanh goes through exp. What no liberty explains is the numeric error."""
    import math

    x = np.array([-20.0, -1.0, 0.5, 1.0, 20.0], np.float32)
    expected = 0.5 * x.astype(np.float64) * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    bound = 1e-5 + 1e-5 * np.abs(expected)
    env = evaluate("aten.gelu.default", {"self": x, "approximate": "none"}, expected, "gelu_float_buffer")
    device = env.exact.astype(np.float32)
    device[[0, 4]] = np.nan
    verdict = judge(Status.FAIL_NAN, device, expected, bound, env, "float32", {"tanh_large": "NaN"})
    assert verdict.status is Status.FAIL_NUMERIC, verdict.reason
    assert re.match(r"Mismatched elements: \d+ / \d+ ", verdict.reason) and "the other 2 are NaN, what" in verdict.reason
    assert "tanh" in verdict.reason and verdict.metrics["unexplained_max_abs"] < 1e-3
    planted = device.copy()
    planted[2] = np.nan                                 # tanh of 0.4 is no overflow: a NaN nothing explains
    assert judge(Status.FAIL_NAN, planted, expected, bound, env, "float32", {"tanh_large": "NaN"}).status \
        is Status.FAIL_NAN
    lost, nan_expected = device.copy(), expected.copy()
    nan_expected[3] = np.nan                            # ATen's NaN, the device's number: a NaN lost stays FAIL_NAN
    lost_env = evaluate("aten.gelu.default", {"self": x, "approximate": "none"}, nan_expected, "gelu_float_buffer")
    assert judge(Status.FAIL_NAN, lost, nan_expected, bound, lost_env, "float32", {"tanh_large": "NaN"}).status \
        is Status.FAIL_NAN
