"""The spec's precision table as intervals, and the envelopes declared shaders get from it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vkdiff.reference.ops import OPS
from vkdiff.reference.spec import witnesses
from vkdiff.reference.spec.declarations import DECLARED
from vkdiff.reference.spec.envelope import evaluate
from vkdiff.reference.spec.precision import LIBERTIES, Spec, flush_subnormals


def band(envelope, *liberties):
    return next(b for b in envelope.bands if b.liberties == liberties)


def test_exact_evaluation_widens_nothing():
    s = Spec("float32")
    q = s.div(s.of(np.array([1.0, 7.0])), s.of(np.array([3.0, 2.0])))
    assert np.array_equal(q.lo, q.hi) and np.allclose(q.lo, [1 / 3, 3.5])
    assert {"division"} <= s.used


def test_division_is_two_and_a_half_ulp_and_floor_may_land_below():
    s = Spec("float32", {"division"})
    q = s.div(s.of(np.array([6.0])), s.of(np.array([3.0])))
    ulp = float(np.spacing(np.float32(2.0)))
    assert q.lo[0] == pytest.approx(2.0 - 2.5 * ulp) and q.hi[0] == pytest.approx(2.0 + 2.5 * ulp)
    assert s.floor(q).lo[0] == 1.0 and s.floor(q).hi[0] == 2.0


def test_a_nonzero_over_zero_is_infinite_and_a_subnormal_divisor_unbounded():
    s = Spec("float32", {"division"})
    q = s.div(s.of(np.array([1.0, 1.0])), s.of(np.array([0.0, 1e-40]), flushable=False))
    assert q.lo[0] == q.hi[0] == np.inf
    assert q.lo[1] == -np.inf and q.hi[1] == np.inf and q.nan[1]


def test_tan_near_half_pi_is_unbounded_and_narrow_elsewhere():
    x = np.array([np.nextafter(np.float32(math.pi / 2), np.float32(0)), 0.5, 1e4], np.float32)
    env = evaluate("aten.tan.default", {"self": x}, np.tan(x.astype(np.float64)), "tan_float_buffer")
    trig = band(env, "sin_cos")
    assert trig.lo[0] == -np.inf and trig.hi[0] == np.inf          # cos may be 0 within 2^-11
    assert trig.hi[1] - trig.lo[1] < 4 * 2.0 ** -11                 # inside [-pi, pi]: the spec's bound
    assert trig.nan[2]                                              # outside it: no bound at all


def test_overflow_converts_to_the_largest_finite_value_or_infinity():
    x = np.array([300.0, 11.1, 11.0], np.float16)
    env = evaluate("aten.exp.default", {"self": x}, np.exp(x.astype(np.float64)), "exp_half_texture3d",
                   stored="float16")
    over = band(env, "overflow")
    assert over.lo.tolist()[:2] == [65504.0, 65504.0] and over.hi.tolist()[:2] == [np.inf, np.inf]
    assert over.lo[2] == over.hi[2] < 65504                       # in range: unmoved
    assert np.isfinite(band(env, "exp").lo[2])                    # the largest value's spacing is finite


def test_an_infinite_result_stays_infinite():
    s = Spec("float32", {"overflow", "exp"})
    out = s.store(s.exp(s.of(np.array([np.inf]))), "float16")
    assert out.lo[0] == out.hi[0] == np.inf


def test_subnormal_operands_may_read_as_zero():
    x = np.array([1e-45, 4.0], np.float32)
    env = evaluate("aten.rsqrt.default", {"self": x}, 1 / np.sqrt(x.astype(np.float64)), "rsqrt_float_buffer")
    flush = band(env, "subnormal_flush")
    assert flush.hi[0] == np.inf and flush.lo[0] == pytest.approx(1 / math.sqrt(float(np.float32(1e-45))))
    assert flush.lo[1] == flush.hi[1] == 0.5
    assert flush_subnormals(np.array([-1e-45, 1e-30]), "float32").tolist() == [-0.0, 1e-30]


def test_tanh_through_exp_overflows_in_float16_only():
    """(No highp variant computes tanh in float16; a mediump build's may: the declaration is evaluated there.)"""
    formula = DECLARED["aten.tanh.default"].formula
    x = np.array([12.0, 3.0], np.float16)
    half = formula(Spec("float16", {"tanh"}), {"self": x})
    single = formula(Spec("float32", {"tanh"}), {"self": x})
    assert half.nan[0] and not half.nan[1] and "tanh" in DECLARED["aten.tanh.default"].rules
    assert not single.nan.any()


def test_nan_through_clamp_may_come_out_a_bound():
    x = np.array([np.nan, 1.0], np.float32)
    env = evaluate("aten.tanh.default", {"self": x}, np.tanh(x.astype(np.float64)), "tanh_float_buffer")
    clamp = band(env, "nan_clamp")
    assert (clamp.lo[0], clamp.hi[0]) == pytest.approx((-1.0, 1.0)) and "clamp of NaN" in clamp.rule


def test_an_undeclared_op_gets_only_the_subnormal_band_and_only_when_it_matters():
    ref = OPS["aten.hardswish.default"].fn
    x = np.array([1.0, 2.0], np.float32)
    assert evaluate("aten.hardswish.default", {"self": x}, ref(x), "hardswish_float_buffer", ref) is None
    tiny = np.array([1e-45, 2.0], np.float32)
    env = evaluate("aten.hardswish.default", {"self": tiny}, ref(tiny), "hardswish_float_buffer", ref)
    assert [b.liberties for b in env.bands] == [("subnormal_flush",)] and not env.complete


@pytest.mark.parametrize("variant, compute", [("tan_half_texture3d", "float32"), ("tan_half_buffer", "float32"),
                                              ("tan_float_buffer", "float32")])
def test_unary_half_variants_compute_in_float32(variant, compute):
    assert DECLARED["aten.tan.default"].compute(variant) == compute


def test_binary_half_buffers_compute_in_float16():
    assert DECLARED["aten.div.Tensor_mode"].compute("binary_floor_divide_buffer_half") == "float16"
    assert DECLARED["aten.div.Tensor_mode"].compute("binary_floor_divide_texture3d_half") == "float32"


def test_every_declaration_names_a_real_op_and_known_liberties():
    for op, declared in DECLARED.items():
        assert op in OPS, op
        assert set(declared.rules) <= set(LIBERTIES), op


def test_the_variance_witness_contracted_is_the_rounding_of_a_square():
    x = np.array([[[1.3]]], np.float16)
    args = {"self": x, "dim": [-1], "unbiased": False}
    assert witnesses.var_buffer(args, "float16", frozenset()).item() == 0.0
    contracted = witnesses.var_buffer(args, "float16", frozenset({"contraction"})).item()
    square = float(x.item()) ** 2                                  # exact in float64
    assert contracted == float(np.float16(square)) - square and contracted != 0.0


def test_a_variance_witness_band_is_a_portability_finding_and_skips_the_shaders_own_answers():
    x = np.array([[37.3], [2.0]], np.float16)                   # 37.3125^2 is 0.19 from a float16
    expected = np.zeros((2, 1))
    env = evaluate("aten.var.dim", {"self": x, "dim": [-1], "unbiased": False}, expected, "var_buffer_half")
    contraction = band(env, "contraction")
    assert contraction.rule and max(-contraction.lo[0, 0], contraction.hi[0, 0]) > 0.1
    assert contraction.lo[1, 0] == contraction.hi[1, 0] == 0.0     # 2^2 is exact: no rounding to fall either way
    single = evaluate("aten.var.dim", {"self": x, "dim": [-1], "unbiased": True}, np.full((2, 1), np.nan),
                      "var_buffer_half")     # ATen's NaN for one element, the shader's 0: no liberty speaks there
    assert all(np.isnan(b.lo).all() and b.nan.all() for b in single.bands)
    assert evaluate("aten.var.dim", {"self": x, "dim": [-1], "unbiased": False}, expected, "var_texture3d_half",
                    OPS["aten.var.dim"].fn) is None      # the texture shader is not declared


def test_any_op_may_store_a_finite_value_past_the_range_as_the_largest_one():
    """(``expected`` holds ATen's inf there; ``past_range`` says the reference was finite.)"""
    expected = np.array([np.inf, np.inf, -np.inf, 5.0])
    past = np.array([True, False, True, False])
    env = evaluate("aten.mm.default", {"self": np.ones((1, 1), np.float16)}, expected, "matmul_half",
                   stored="float16", past_range=past)
    over = band(env, "overflow")
    assert over.lo.tolist() == [65504.0, np.inf, -np.inf, 5.0]       # a true inf converts to inf only
    assert over.hi.tolist() == [np.inf, np.inf, -65504.0, 5.0]


def test_clamp_family_declarations_carry_the_nan_clamp_rule():
    x = np.array([np.nan, -3.0, 8.0], np.float32)
    for op, args, bounds in (("aten.relu6.default", {}, (0.0, 6.0)), ("aten.relu.default", {}, (0.0, np.inf)),
                             ("aten.hardtanh.default", {}, (-1.0, 1.0)),
                             ("aten.clamp.default", {"min": None, "max": 2.0}, (-np.inf, 2.0))):
        expected = np.where(np.isnan(x), np.nan, np.clip(x, *bounds))
        clamp = band(evaluate(op, {"self": x, **args}, expected, "clamp_float_buffer"), "nan_clamp")
        assert (clamp.lo[0], clamp.hi[0]) == bounds and clamp.rule, op
        assert clamp.lo[1:].tolist() == clamp.hi[1:].tolist() == expected[1:].tolist(), op


def test_pow_is_inherited_from_exp2_and_log2():
    x = np.array([float(np.float16(1e-5))])
    exact = Spec("float16").pow(Spec("float16").of(x, flushable=False), -0.5)
    assert exact.lo[0] == exact.hi[0] == pytest.approx(x[0] ** -0.5)
    s = Spec("float16", {"pow"})
    inherited = s.pow(s.of(x, flushable=False), -0.5)
    assert inherited.lo[0] < 314.25 < 316.0 < inherited.hi[0]     # NVIDIA's 314.25 is 1 + 2 * 8.3 ULP of exp2 away
    assert inherited.hi[0] - inherited.lo[0] < 25


def constant_row_layer_norm():
    x = np.array([[[1.25] * 6, [1.0, -2.0, 0.5, 3.0, -1.5, 2.25]]], np.float16)
    args = {"input": x, "normalized_shape": [6], "weight": None, "bias": None, "eps": 1e-5}
    return args, tuple(np.asarray(o, np.float64) for o in OPS["aten.native_layer_norm.default"].fn(**args))


def test_the_layer_norm_witness_names_pow_and_the_flushed_epsilon():
    args, expected = constant_row_layer_norm()
    env = evaluate("aten.native_layer_norm.default", args, expected, "native_layer_norm_buffer_half")
    assert [name for name, _ in env.parts] == ["out", "mean", "rstd"]
    rstd = slice(12 + 2, 12 + 4)                                   # out [1, 2, 6], mean [1, 2, 1], rstd [1, 2, 1]
    assert env.locate(14) == "rstd [0, 0, 0]"
    assert band(env, "pow").rule and band(env, "pow").lo[rstd][0] < 314.25 < band(env, "pow").hi[rstd][0]
    flushed = band(env, "subnormal_flush")
    assert flushed.rule and flushed.hi[rstd][0] == np.inf and flushed.nan[:6].all()   # the constant row's out: NaN
    assert evaluate("aten.native_layer_norm.default", args, expected, "native_layer_norm_texture3d_half") is None


def test_the_group_norm_witness_reproduces_a_contracted_inexact_divider():
    """(NVIDIA's 580 driver gives 319.09 for the constant group: fma(-mean, mean, sum_sq * (1 / 15)).)"""
    x = np.stack([np.arange(15, dtype=np.float32).reshape(3, 1, 5) / 7 - 1, np.full((3, 1, 5), 1.25, np.float32)])
    args = {"input": x, "weight": None, "bias": None, "N": 2, "C": 3, "HxW": 5, "group": 1, "eps": 1e-5}
    out, mean, rstd = witnesses.group_norm_texture(args, "float32", frozenset({"contraction", "division"}))[0]
    assert rstd[1, 0] == pytest.approx(319.09, abs=0.01)
    assert witnesses.group_norm_texture(args, "float32", frozenset())[0][2][1, 0] == pytest.approx(316.2278, abs=1e-3)


def test_the_adamw_witness_overflows_only_when_reassociated():
    g = np.array([3e19, 2.0], np.float32)
    args = {"param": np.ones(2, np.float32), "m": np.zeros(2, np.float32), "v": np.zeros(2, np.float32), "grad": g,
            "lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01,
            "bias_correction1": 0.1, "bias_correction2": 0.001}
    for grant, finite in ((frozenset(), True), (frozenset({"contraction"}), True),
                          (frozenset({"reassociation"}), False)):
        param, m, v = witnesses.adamw_step_buffer(args, "float32", grant)[0]
        assert bool(np.isfinite(v[0])) is finite and np.isfinite(v[1]), grant
    assert param[0] == pytest.approx(1 - 1e-5, rel=1e-6)        # an infinite v': the update is lost, decay only


def test_relaxed_precision_rounds_every_result_to_float16():
    x = np.array([1.0 + 2.0 ** -12, 70000.0])
    exact = Spec("float32").result(Spec("float32").of(x))
    assert exact.lo.tolist() == exact.hi.tolist() == x.tolist()
    s = Spec("float32", {"relaxed_precision"})
    relaxed = s.result(s.of(x))
    assert relaxed.lo[0] <= 1.0 < x[0] <= relaxed.hi[0]                 # float16 holds 1.0 nearest
    assert relaxed.hi[0] - relaxed.lo[0] == 2.0 ** -10                  # half a float16 step either way
    assert relaxed.hi[1] == np.inf                                  # past float16's range


def test_a_mediump_half_texture_tanh_is_not_portable_and_a_highp_one_is():
    x = np.array([12.0, 0.5], np.float16)
    expected = np.tanh(x.astype(np.float64))
    relaxed = evaluate("aten.tanh.default", {"self": x}, expected, "tanh_half_texture3d", stored="float16",
                       relaxed=True)
    assert band(relaxed, "relaxed_precision").rule and band(relaxed, "relaxed_precision").hi[1] > expected[1]
    widest = relaxed.bands[-1]
    assert "relaxed_precision" in widest.liberties and widest.nan[0]      # tanh through a float16 exp: inf / inf
    highp = evaluate("aten.tanh.default", {"self": x}, expected, "tanh_half_texture3d", stored="float16")
    assert all("relaxed_precision" not in b.liberties for b in highp.bands)
    assert not any(b.nan[0] for b in highp.bands)                        # float32's exp(12) is finite
