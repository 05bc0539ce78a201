"""What each ET-VK shader computes, as the GLSL writes it: the formula a spec envelope is evaluated from.

Each declaration is the shader's expression over ``Spec`` operations (``precision``),
read from its yaml or GLSL in the tree the launchers port (executorch main cff6f4dd32):
``unary_op.yaml``'s ``OPERATOR`` strings, ``binary_op_{buffer,texture}.yaml``, ``tan.glsl``.

* ``compute``: the dtype the arithmetic runs in. A texture variant computes in float32
  (``texel_type`` is ``vec4`` for an ``rgba16f`` image too; the store converts), a half
  buffer variant in float16 (``float16_t`` elements) unless the shader converts first:
  ``unary_op.glsl`` and ``tan.glsl`` read a buffer element with ``float(t_in[i])``.
* ``rules``: the liberties under which the shader, not the device, is at fault: a
  portable shader exists that holds ATen's tolerance under them, and the rule says what
  this one relies on. A liberty without a rule is the op's own builtin, or subnormal
  operands: no shader can do better, so a device that takes it is ``spec-allowed``.
* ``complete``: the formula is everything the shader does to an element, which it reads at
  the index it writes (the unary shaders), so a result outside the envelope (where the
  formula means ATen's op) is the device's doing. A binary shader's broadcast indexing is
  ET-VK's own code, where a wrong element is more often ET-VK's bug: not complete.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Callable, Mapping

import numpy as np

from vkdiff.reference.spec import witnesses
from vkdiff.reference.spec.precision import Interval, Spec

__all__ = ["DECLARED", "Declaration", "declaration_for"]

Formula = Callable[[Spec, Mapping[str, Any]], Interval]
Witness = Callable[[Mapping[str, Any], str, frozenset], np.ndarray]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Declaration:
    """The arithmetic of one op's shaders."""

    formula: Formula | None = None
    """The shader's expression over intervals (``precision.Spec``)."""
    witness: Witness | None = None
    """Or, for arithmetic whose every rounding matters, the shader run as a conformant device may run it
    (``witnesses``), under each of ``liberties``."""
    liberties: tuple[str, ...] = ()
    """The liberties a witness takes (``contraction``, ``division``)."""
    variants: str = ""
    """Regex over the variants this declaration describes (empty: every variant of the op)."""
    source: str
    """Where the formula is read from, and the formula as the GLSL writes it."""
    buffer_in_float32: bool = False
    """Half buffer variants convert each element to float32 before computing (``float(t_in[i])``)."""
    rules: Mapping[str, str] = dataclasses.field(default_factory=dict)
    complete: bool = True
    outputs: tuple[str, ...] = ()
    """Names of a tuple-returning op's outputs, as a witness returns them."""

    def compute(self, variant: str) -> str:
        """The dtype the variant ``variant`` computes in: a texture variant's texels are ``vec4`` whatever the image
        format (``texel_type``), a half buffer variant's elements ``float16_t``."""
        parts = variant.split("_")
        if "half" not in parts or any(p.startswith("texture") for p in parts):
            return "float32"
        return "float32" if self.buffer_in_float32 else "float16"


def declaration_for(op: str, variant: str) -> Declaration | None:
    """The declaration of the launched ``variant`` of ``op``, if any."""
    declared = DECLARED.get(op)
    if declared is None or (declared.variants and re.search(declared.variants, variant) is None):
        return None
    return declared


def _unary(body: Callable[[Spec, Interval], Interval]) -> Formula:
    return lambda s, args: s.result(body(s, s.of(args["self"])))


def _binary(body: Callable[[Spec, Interval, Interval], Interval]) -> Formula:
    return lambda s, args: s.result(body(s, s.of(args["self"]), s.of(args["other"])))


def _sigmoid(s: Spec, x: Interval) -> Interval:
    one = s.const(1.0, x)
    return s.div(one, s.result(s.add(one, s.result(s.exp(s.neg(x))))))


GELU_K = 0.7978845608
"""``sqrt(2 / 3.141593)`` as glslang folds it."""


def _gelu(s: Spec, x: Interval) -> Interval:
    cube = s.result(s.mul(s.result(s.mul(s.result(s.scale(x, 0.044715)), x)), x))
    inner = s.result(s.scale(s.result(s.add(x, cube)), GELU_K))
    half_x = s.result(s.scale(x, 0.5))
    return s.mul(half_x, s.result(s.add(s.const(1.0, x), s.result(s.tanh(inner)))))


def _power_of(s: Spec, x: Interval, y: float) -> Interval:
    """``power_of``: ``pow(|x|, y)`` (defined: |x| > 0), negated for a negative base and an odd integral ``y``; a zero
    base is 1 for ``y = 0``, else 0."""
    magnitude = s.pow_of(s.abs(x), s.const(y, x))
    odd = float(y).is_integer() and int(y) % 2 == 1
    negative = x.hi < 0
    if odd:
        magnitude = Interval(np.where(negative, -magnitude.hi, magnitude.lo),
                             np.where(negative, -magnitude.lo, magnitude.hi), magnitude.nan)
    zero = (x.lo == 0) & (x.hi == 0)
    at_zero = 1.0 if y == 0 else 0.0
    return Interval(np.where(zero, at_zero, magnitude.lo), np.where(zero, at_zero, magnitude.hi),
                    np.where(zero, False, magnitude.nan))


def _div_mode(s: Spec, args: Mapping[str, Any]) -> Interval:
    """``floor(X / Y)`` whatever the mode (``BinaryOp.cpp`` registers ``div.Tensor_mode`` as ``floor_divide``)."""
    return s.result(s.floor(s.result(s.div(s.of(args["self"]), s.of(args["other"])))))


def _bound(args: Mapping[str, Any], name: str, default: float) -> float:
    """A clamp bound as ``UnaryOp.cpp`` passes it: the argument, or ±infinity where it is absent."""
    value = args.get(name)
    return default if value is None else float(value)


def _clamped(low: Callable[[Mapping[str, Any]], float], high: Callable[[Mapping[str, Any]], float]) -> Formula:
    """``unary_op.yaml`` clamp: ``clamp(X, A, B)`` with the bounds in its push constants."""
    return lambda s, args: s.result(s.clamp(s.of(args["self"]), low(args), high(args)))


NAN_CLAMP = ("clamp of NaN is undefined (GLSL min/max): clamp(NaN, lo, hi) may be a bound where ATen keeps NaN (a "
             "portable shader tests isnan first)")
LOG10E = 0.4342944819
TANH_CLAMP = 15.0

DECLARED: dict[str, Declaration] = {
    "aten.tan.default": Declaration(formula=_unary(lambda s, x: s.tan(x)), source="tan.glsl: tan(X)",
                                    buffer_in_float32=True),
    "aten.exp.default": Declaration(formula=_unary(lambda s, x: s.exp(x)), source="unary_op.yaml exp: exp(X)",
                                    buffer_in_float32=True),
    "aten.sin.default": Declaration(formula=_unary(lambda s, x: s.sin(x)), source="unary_op.yaml sin: sin(X)",
                                    buffer_in_float32=True),
    "aten.cos.default": Declaration(formula=_unary(lambda s, x: s.cos(x)), source="unary_op.yaml cos: cos(X)",
                                    buffer_in_float32=True),
    "aten.sqrt.default": Declaration(formula=_unary(lambda s, x: s.sqrt(x)), source="unary_op.yaml sqrt: sqrt(X)",
                                     buffer_in_float32=True),
    "aten.rsqrt.default": Declaration(
        formula=_unary(lambda s, x: s.div(s.const(1.0, x), s.result(s.sqrt(x)))),
        source="unary_op.yaml rsqrt: (1 / sqrt(X))", buffer_in_float32=True),
    "aten.log10.default": Declaration(formula=_unary(lambda s, x: s.scale(s.result(s.log(x)), LOG10E)),
                                      source="unary_op.yaml log10: log(X) * 0.4342944819", buffer_in_float32=True),
    "aten.tanh.default": Declaration(
        formula=_unary(lambda s, x: s.tanh(s.clamp(x, -TANH_CLAMP, TANH_CLAMP))),
        source="unary_op.yaml tanh: tanh(clamp(X, -15.0, 15.0))", buffer_in_float32=True,
        rules={"tanh": f"tanh(clamp(x, -15, 15)) in float16 is inherited from exp(x), which overflows float16 past "
                       f"|x| = {math.log(65504):.2f}: clamped to ±15 it may be inf / inf, NaN (a half shader portable "
                       f"to such a device clamps to ±9, where tanh already rounds to ±1)",
               "nan_clamp": NAN_CLAMP}),
    **{op: Declaration(formula=_clamped(low, high), source=f"unary_op.yaml clamp: clamp(X, A, B) ({how})",
                       buffer_in_float32=True, rules={"nan_clamp": NAN_CLAMP})
       for op, low, high, how in (
           ("aten.clamp.default", lambda a: _bound(a, "min", -math.inf), lambda a: _bound(a, "max", math.inf),
            "min, max"),
           ("aten.hardtanh.default", lambda a: _bound(a, "min_val", -1.0), lambda a: _bound(a, "max_val", 1.0),
            "min_val, max_val"),
           ("aten.relu.default", lambda a: 0.0, lambda a: math.inf, "0, inf"),
           ("aten.relu6.default", lambda a: 0.0, lambda a: 6.0, "0, 6"))},
    **{op: Declaration(formula=lambda s, args, name=name: s.result(s.of(np.asarray(float(args[name])), flushable=False)),
                       source=f"{shader}: the float fill value, converted to the output", complete=False)
       for op, name, shader in (("aten.full.default", "fill_value", "full.glsl"),
                                ("aten.full_like.default", "fill_value", "full.glsl"),
                                ("aten.scalar_tensor.default", "s", "scalar_tensor.glsl"))},
    "aten.sigmoid.default": Declaration(formula=_unary(_sigmoid), source="unary_op.yaml sigmoid: 1 / (1 + exp(-1 * X))",
                                        buffer_in_float32=True),
    "aten.div.Tensor": Declaration(formula=_binary(lambda s, x, y: s.div(x, y)),
                                   source="binary_op_{buffer,texture}.yaml div: X / Y", complete=False),
    "aten.div.Tensor_mode": Declaration(
        formula=_div_mode, source="binary_op_{buffer,texture}.yaml floor_divide: floor(X / Y)", complete=False,
        rules={"division": "floor division exact only with correctly rounded division: floor(X / Y) of a quotient "
                           "that is an integer may land one below it (a portable shader corrects the quotient, e.g. "
                           "by checking X - q * Y)"}),
    "aten.mul.Tensor": Declaration(formula=_binary(lambda s, x, y: s.mul(x, y)),
                                   source="binary_op_{buffer,texture}.yaml mul: X * Y", complete=False),
    "aten.var.dim": Declaration(
        witness=witnesses.var_buffer, liberties=("contraction", "division"), variants=r"^var_buffer_",
        source="var_buffer.glsl: sum and sum_sq (v * v) per worker, then sum_sq / n - mean * mean", complete=False,
        rules={lib: "the one-pass variance sum_sq / n - mean * mean, in the shader's dtype, holds tolerance only where "
                    "every rounding falls as on a device that adds separately and divides exactly; " + how
               for lib, how in (("contraction", "contracted into fma(-mean, mean, sum_sq / n) it cancels differently "
                                                "(a two-pass variance, or precise, is portable)"),
                                ("division", "dividing as x * (1 / n) moves mean and sum_sq / n by an ULP each, which "
                                             "the cancellation magnifies (a two-pass variance is portable)"))}),
    "aten.abs.default": Declaration(formula=_unary(lambda s, x: s.abs(x)), source="unary_op.yaml abs: abs(X)",
                                    buffer_in_float32=True),
    "aten.neg.default": Declaration(formula=_unary(lambda s, x: s.neg(x)), source="unary_op.yaml neg: -X",
                                    buffer_in_float32=True),
    "aten.gelu.default": Declaration(
        formula=_unary(_gelu), buffer_in_float32=True,
        source="unary_op.yaml gelu: 0.5 * X * (1 + tanh(sqrt(2 / 3.141593) * (X + 0.044715 * X * X * X)))",
        rules={"tanh": "gelu's tanh(sqrt(2 / pi) * (x + 0.044715 x^3)) is inherited from exp(x), which overflows "
                       "float32 once the argument passes 88.7 (|x| past 13.5): inf / inf, NaN where ATen gives x "
                       "or -0 (a portable shader clamps the argument, as the tanh shader does to +-15)"}),
    "aten.round.default": Declaration(
        formula=_unary(lambda s, x: s.round(x)), source="unary_op.yaml round: round(X)", buffer_in_float32=True,
        rules={"round_half": "GLSL round(x) takes a half-way value in a direction the implementation chooses, "
                             "ATen rounds it to even (roundEven is portable)"}),
    "aten.minimum.default": Declaration(
        formula=lambda s, args: s.result(s.minimum(s.of(args["self"]), s.of(args["other"]))),
        source="binary_op_{buffer,texture}.yaml minimum: min(X, Y)", complete=False,
        rules={"nan_min_max": "GLSL min(x, y) of a NaN operand is undefined, ATen propagates the NaN (a portable "
                              "shader tests isnan first)"}),
    "aten.pow.Tensor_Tensor": Declaration(
        formula=lambda s, args: s.result(s.pow_of(s.of(args["self"]), s.of(args["exponent"]))),
        source="binary_op_{buffer,texture}.yaml pow: pow(X, Y)", complete=False,
        rules={"pow": "GLSL pow(x, y) is undefined for x < 0 (and for x = 0 with y <= 0), where ATen's power is "
                      "real for an integral exponent ((-2)^2 = 4): a device may give NaN or anything (power_of, "
                      "which pow.Tensor_Scalar uses, takes |x| and restores the sign: portable)"}),
    "aten.pow.Tensor_Scalar": Declaration(
        formula=lambda s, args: s.result(_power_of(s, s.of(args["self"]), float(args["exponent"]))),
        source="binary_op_defs.glslh power_of: 0^y as 1 or 0, else pow(abs(x), y) with the sign of an odd integral "
               "y", buffer_in_float32=True, complete=False),
    "aten.native_layer_norm.default": Declaration(
        witness=witnesses.layer_norm_buffer, liberties=("contraction", "division", "pow", "subnormal_flush"),
        variants=r"^native_layer_norm_buffer_", outputs=("out", "mean", "rstd"), complete=False,
        source="native_layer_norm_buffer.glsl: a strided two-pass mean and variance in T, then rstd = pow(var + "
               "T(epsilon), T(-0.5)) and (x - mean) * rstd * w + b",
        rules={"pow": "rstd = pow(var + epsilon, -0.5) is inherited from exp2(-0.5 * log2(x)): in float16 exp2 may be "
                      "1 + 2|x| ULP off, several units at the rstd of a near-constant row (inversesqrt, 1 ULP, is "
                      "portable)",
               "subnormal_flush": "T(epsilon) is a float16 subnormal for epsilon 1e-5: a device that flushes float16 "
                                  "subnormals adds 0, so a constant row's rstd is pow(0, -0.5) = inf and its outputs "
                                  "NaN (epsilon added in float32 is portable)",
               "division": "mean = sum / n need not be correctly rounded (2.5 ULP; or sum * (1 / n) with the multiply "
                           "fused into x - mean): a constant row's deviations are then the mean's rounding, not 0, "
                           "so its variance is not 0 and its rstd and outputs move off 1 / sqrt(epsilon) and 0; a "
                           "mean subtracted exactly (the first element taken out before summing) is portable"}),
    "aten.native_group_norm.default": Declaration(
        witness=witnesses.group_norm_texture, liberties=("contraction", "division"), variants=r"^group_norm_texture_",
        outputs=("out", "mean", "rstd"), complete=False,
        source="group_norm_reduce_texture.glsl: sum and sum_sq per worker in float32, then sum_sq / count - mean * "
               "mean and rstd = 1 / sqrt(variance + epsilon); group_norm_texture.glsl: (x - mean) * rstd * w + b",
        rules={lib: "the one-pass variance sum_sq / count - mean * mean holds tolerance only where every rounding "
                    "falls as on a device that adds separately and divides exactly: " + how
               for lib, how in (("contraction", "contracted into fma(-mean, mean, sum_sq / count), a constant group's "
                                                "variance may come out a tiny non-zero value, and rstd far from "
                                                "1 / sqrt(epsilon) (a two-pass variance is portable)"),
                                ("division", "dividing as x * (1 / count) moves mean and sum_sq / count by an ULP "
                                             "each, which the cancellation magnifies (a two-pass variance is "
                                             "portable)"))}),
    "et_vk.adamw_step.default": Declaration(
        witness=witnesses.adamw_step_buffer, liberties=("contraction", "division", "reassociation"),
        variants=r"^adamw_step_buffer_", outputs=("param", "m", "v"), complete=False,
        source="adamw_step.glsl: v = beta2 * v + (1.0 - beta2) * g * g, param = p - lr * mhat / (sqrt(vhat) + eps)",
        rules={"reassociation": "(1.0 - beta2) * g * g is not precise, so a compiler may form it as (1.0 - beta2) * "
                                "(g * g), which overflows float32 once |g| passes 1.8e19 where ATen's v' is finite: "
                                "v' is inf and the element's update 0 (((1.0 - beta2) * g) * g declared precise is "
                                "portable)"}),
}
"""Declared arithmetic by full op name. An op not here is evaluated by its reference on flushed operands only."""
