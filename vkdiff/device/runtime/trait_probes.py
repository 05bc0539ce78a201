"""vkdiff's own probe shaders, and how their readback reads as device traits in the Vulkan spec's terms.

Where the spec leaves an implementation a choice (subnormal flush, division accuracy, fma contraction, float16
for ``RelaxedPrecision``, NaN through ``min``/``max``/``clamp``, out-of-range float-to-int, transcendental
accuracy, subgroup size, robust access), a probe measures what the device chose, so a verdict asks whether a
result is allowed of a *trait*, never of a product name. The shaders are vkdiff's own GLSL (nothing of ET-VK's);
every input comes from a buffer, so no compiler (glslc, naga, the driver) can fold it away. This module runs
nothing: ``vkdiff.device.runtime.traits`` compiles, dispatches and caches; here each ``Probe`` holds its source,
its buffers and ``read``, which turns its readback into traits.

The trait names (``TRAITS``) are stable: results record them in ``device_info["traits"]`` and reports list them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import numpy as np

TRAITS: dict[str, str] = {
    "f32_denorm": "float32 subnormals: preserved, flushed, flushed on input, flushed on output or other",
    "f16_denorm": "float16 subnormals (float16_t arithmetic): preserved, flushed, flushed on input, flushed on output "
                  "or other",
    "div_f32_max_ulp": "largest error of x / y in ULP, divisors in [2^-126, 2^126] (the spec allows 2.5)",
    "div_f32_integral_exact": "whether x / y is exact where the quotient is an integer (floor division needs it; the "
                              "spec does not promise it)",
    "fma": "a * b + c without precise: contracted (one rounding), separate (two), mixed or other",
    "relaxed_precision_f16": "whether RelaxedPrecision (GLSL mediump) arithmetic is computed below float32",
    "nan_min_max": "min/max with one NaN operand: returns other operand, returns NaN, returns first operand, returns "
                   "second operand, or each form's result",
    "nan_clamp": "clamp(NaN, lo, hi): returns NaN, returns lo, returns hi, or the value",
    "f2i_out_of_range": "int() and uint() of out-of-range, infinite and NaN floats: the integer each gives (the spec "
                        "leaves them undefined)",
    "exp_max_ulp": "largest error of exp in ULP over [-87, 88.5] (the spec allows 3 + 2|x|)",
    "log_max_ulp": "largest error of log in ULP outside [0.5, 2] (the spec allows 3)",
    "log_max_abs_near_1": "largest absolute error of log inside [0.5, 2] (the spec allows 2^-21)",
    "pow_max_ulp": "largest error of pow(x, y), x > 0, in ULP (the spec: as exp2(y * log2(x)))",
    "tan_near_pi_2": "largest relative error of tan at float32(pi/2) and its two neighbours (the spec: as sin / cos)",
    "tanh_max_abs": "largest absolute error of tanh over [-100, 100]",
    "tanh_large": "tanh at |x| >= 10: saturates to +-1, NaN (computed through an exp that overflows) or inaccurate",
    "sin_cos_max_abs": "largest absolute error of sin and cos in [-pi, pi] (the spec allows 2^-11)",
    "sin_cos_large_max_abs": "largest absolute error of sin and cos at |x| in [100, 1e6] (the spec sets no bound)",
    "inversesqrt_max_ulp": "largest error of inversesqrt in ULP (the spec allows 2)",
    "subgroup_size": "gl_SubgroupSize in a 64-wide workgroup (a sorted list when dispatches see several)",
    "robust_access": "a read past a storage buffer's bound range: zero, clamped (its last element), in-range value, "
                     "past the range (the memory there) or undefined-but-ran",
}
"""Every trait a probe measures → what its value says. A trait a device cannot run is ``{"not_measured": why}``;
one whose probe failed is ``{"error": why}``. Errors and ULP counts that are not finite are the strings
``"inf"`` / ``"nan"``."""

ROW = np.dtype([("op", "<u4"), ("a", "<f4"), ("b", "<f4"), ("c", "<f4")])
"""One row of a row probe: an operation code and its operands (std430 ``struct Row``)."""
POISON = 0x7FA5A5A5
"""What a row probe's output holds before the dispatch (a NaN no operation here returns)."""
LOCAL_SIZE = 64
"""Workgroup width of every probe (every device allows it)."""

F32_OPS: dict[str, str] = {
    "mul": "floatBitsToUint(w.a * w.b)", "add": "floatBitsToUint(w.a + w.b)", "div": "floatBitsToUint(w.a / w.b)",
    "mul_add": "floatBitsToUint(w.a * w.b + w.c)", "min": "floatBitsToUint(min(w.a, w.b))",
    "max": "floatBitsToUint(max(w.a, w.b))", "clamp": "floatBitsToUint(clamp(w.a, w.b, w.c))",
    "int": "uint(int(w.a))", "uint": "uint(w.a)", "exp": "floatBitsToUint(exp(w.a))",
    "log": "floatBitsToUint(log(w.a))", "pow": "floatBitsToUint(pow(w.a, w.b))", "tan": "floatBitsToUint(tan(w.a))",
    "tanh": "floatBitsToUint(tanh(w.a))", "sin": "floatBitsToUint(sin(w.a))", "cos": "floatBitsToUint(cos(w.a))",
    "inversesqrt": "floatBitsToUint(inversesqrt(w.a))",
    "mediump_mul": "floatBitsToUint(mediump_mul(w.a, w.b))", "mediump_add": "floatBitsToUint(mediump_add(w.a, w.b))",
}
"""Operations of the float32 probe → the GLSL giving its 32 result bits (codes are positions, from 1)."""
F16_OPS: dict[str, str] = {
    "mul": "floatBitsToUint(float(float16_t(w.a) * float16_t(w.b)))",
    "add": "floatBitsToUint(float(float16_t(w.a) + float16_t(w.b)))",
}
"""Operations of the float16 probe: operands and result travel as float32, so it needs no 16-bit storage."""

HEADER = """#version 450
{extensions}precision highp float;
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
"""
ROW_BODY = """struct Row {{ uint op; float a; float b; float c; }};
layout(std430, set = 0, binding = 0) readonly buffer Rows {{ Row rows[]; }};
layout(std430, set = 0, binding = 1) writeonly buffer Out {{ uint r[]; }};
{helpers}
void main() {{
  uint i = gl_GlobalInvocationID.x;
  if (i >= uint(rows.length())) return;
  Row w = rows[i];
  switch (w.op) {{
{cases}
    default: r[i] = 0u; break;
  }}
}}
"""
MEDIUMP_HELPERS = """
float mediump_mul(mediump float a, mediump float b) { mediump float p = a * b; return p; }
float mediump_add(mediump float a, mediump float b) { mediump float s = a + b; return s; }
"""
SUBGROUP_BODY = """layout(std430, set = 0, binding = 0) writeonly buffer Out { uint r[]; };
void main() { r[gl_GlobalInvocationID.x] = gl_SubgroupSize; }
"""
ROBUST_BODY = """layout(std430, set = 0, binding = 0) readonly buffer Bound { uint v[]; };
layout(std430, set = 0, binding = 1) buffer Out { uint r[]; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < uint(r.length())) r[i] = v[r[i]];
}
"""


def row_source(ops: dict[str, str], extensions: Sequence[str] = (), helpers: str = "") -> str:
    """The GLSL of a row probe: each invocation applies its row's operation (code = position in ``ops``, from 1)."""
    cases = "\n".join(f"    case {code}u: r[i] = {glsl}; break;" for code, glsl in enumerate(ops.values(), 1))
    lines = "".join(f"#extension {name} : require\n" for name in extensions)
    return HEADER.format(extensions=lines) + ROW_BODY.format(helpers=helpers, cases=cases)


@dataclasses.dataclass(kw_only=True, frozen=True)
class Measure:
    """Traits read from a run of rows of a row probe."""

    rows: tuple[tuple[str, float, float, float], ...]
    """``(op, a, b, c)`` of each row, operands rounded to float32 when written."""
    read: Callable[[np.ndarray, np.ndarray], dict[str, Any]]
    """``(operands float32 [n, 3], result words uint32 [n])`` → trait values."""
    traits: tuple[str, ...]
    """Names (``TRAITS``) that ``read`` returns."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class Probe:
    """One shader, its buffers, and how its readback reads as traits."""

    name: str
    """Label of its pipeline and of its errors."""
    source: str
    """vkdiff's GLSL for it."""
    needs: tuple[str, ...]
    """Device features (wgpu's names, as ``DeviceInfo.features`` lists them) it cannot run without."""
    buffers: tuple[np.ndarray, ...]
    """Contents of bindings 0, 1, ...; the last is read back."""
    bound: tuple[int | None, ...]
    """Bytes bound of each buffer (None: all of it)."""
    invocations: int
    """Invocations dispatched (in workgroups of ``LOCAL_SIZE``)."""
    read: Callable[[np.ndarray], dict[str, Any]]
    """The read-back words (uint32) → trait values."""
    traits: tuple[str, ...]
    """Names (``TRAITS``) that ``read`` returns."""


def number(value: float, digits: int = 4) -> float | str:
    """A measured error as JSON keeps it: ``digits`` significant digits, non-finite as ``"inf"`` / ``"nan"``.

    Example::

        >>> number(2.123456), number(float("inf"))
        (2.123, 'inf')
    """
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf"
    return float(f"{value:.{digits}g}")


def ulp_errors(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """``|got - exact|`` in units of float32's last place at ``exact`` (infinite where ``got`` is not finite).

    Example::

        >>> ulp_errors(np.float32([1.0, 1.0000001]), np.array([1.0, 1.0]))
        array([0., 1.])
    """
    got64 = np.asarray(got, np.float64)
    exponent = np.frexp(exact)[1] - 1
    ulp = np.ldexp(1.0, np.maximum(exponent, -126) - 23)
    with np.errstate(invalid="ignore"):
        errors = np.abs(got64 - exact) / ulp
    return np.where(np.isfinite(got64), errors, np.inf)


def largest(errors: np.ndarray) -> float | str:
    """The largest of ``errors`` (``number``)."""
    return number(float(np.max(errors)))


def floats(words: np.ndarray) -> np.ndarray:
    """Result words as float32."""
    return np.ascontiguousarray(words, np.uint32).view(np.float32)


def _denorm(args: np.ndarray, words: np.ndarray, dtype: type) -> str:
    """Rows (``_denorm_rows``) 0–1 make a subnormal of normal operands, 2–3 take a subnormal operand to a normal
    result: which of the two kept their subnormals."""
    got = floats(words)
    a, b = args[:, 0].astype(dtype), args[:, 1].astype(dtype)
    exact = np.array([a[0] * b[0], a[1] + b[1], a[2] * b[2], a[3] * b[3]], dtype).astype(np.float32)
    kept, flushed = got == exact, got == 0
    outputs = "kept" if kept[:2].all() else "flushed" if flushed[:2].all() else "other"
    inputs = "kept" if kept[2:].all() else "flushed" if flushed[2:].all() else "other"
    return {("kept", "kept"): "preserved", ("flushed", "flushed"): "flushed", ("kept", "flushed"): "flushed on input",
            ("flushed", "kept"): "flushed on output"}.get((outputs, inputs), "other")


def _denorm_rows(tiny: float) -> tuple[tuple[str, float, float, float], ...]:
    """``_denorm``'s rows for a format whose smallest normal is ``tiny``."""
    return (("mul", tiny, 0.25, 0.0), ("add", 1.5 * tiny, -tiny, 0.0), ("mul", tiny / 64, 1024.0, 0.0),
            ("mul", 3 * tiny / 1024, 4096.0, 0.0))


def _division(args: np.ndarray, words: np.ndarray) -> dict[str, Any]:
    exact = args[:, 0].astype(np.float64) / args[:, 1].astype(np.float64)
    return {"div_f32_max_ulp": largest(ulp_errors(floats(words), exact))}


def _integral(args: np.ndarray, words: np.ndarray) -> dict[str, Any]:
    exact = args[:, 0].astype(np.float64) / args[:, 1].astype(np.float64)
    return {"div_f32_integral_exact": bool((floats(words).astype(np.float64) == exact).all())}


def _division_rows() -> tuple[tuple[str, float, float, float], ...]:
    """Divisions over the range the spec bounds, mantissas from a fixed seed."""
    rng = np.random.default_rng(34)
    mantissas = rng.uniform(1.0, 2.0, (20, 2))
    exponents = rng.integers(-40, 40, (20, 2))
    rows = [("div", float(np.float32(m[0] * 2.0 ** e[0])), float(np.float32(m[1] * 2.0 ** e[1])), 0.0)
            for m, e in zip(mantissas, exponents)]
    return tuple(rows) + (("div", 1.5 * 2.0 ** 100, 1.75 * 2.0 ** 125, 0.0), ("div", 1.5 * 2.0 ** -100,
                                                                              1.25 * 2.0 ** -125, 0.0))


INTEGRAL_ROWS = (("div", 21.0, 7.0, 0.0), ("div", 9.0, 3.0, 0.0), ("div", 49.0, 7.0, 0.0), ("div", 0.75, 0.25, 0.0),
                 ("div", 196605.0, 3.0, 0.0), ("div", 7e6, 7.0, 0.0), ("div", 1e4, 10.0, 0.0), ("div", 45.0, 9.0, 0.0))
"""Divisions whose quotient is an integer."""


def _fma_rows() -> tuple[tuple[str, float, float, float], ...]:
    """``a * b - round(a * b)``: 0 with two roundings, the product's rounding error with one."""
    rows = []
    for k, m in ((1, 1), (3, 5), (5, 9), (7, 3)):
        a, b = np.float32(1 + k * 2.0 ** -23), np.float32(1 + m * 2.0 ** -23)
        rows.append(("mul_add", float(a), float(b), -float(a * b)))
    return tuple(rows)


def _fma(args: np.ndarray, words: np.ndarray) -> dict[str, Any]:
    a, b, c = (args[:, i].astype(np.float64) for i in range(3))
    fused = (a * b + c).astype(np.float32)
    separate = ((a * b).astype(np.float32) + c.astype(np.float32)).astype(np.float32)
    got = floats(words)
    if (got == fused).all():
        return {"fma": "contracted"}
    if (got == separate).all():
        return {"fma": "separate"}
    return {"fma": "mixed" if ((got == fused) | (got == separate)).all() else "other"}


RELAXED_ROWS = (("mediump_mul", 1 + 2.0 ** -12, 1.0, 0.0), ("mediump_add", 1.0, 2.0 ** -12, 0.0),
                ("mediump_mul", 300.0, 300.0, 0.0))
"""mediump arithmetic whose float32 result float16 cannot hold (precision, then range)."""


def _relaxed(args: np.ndarray, words: np.ndarray) -> dict[str, Any]:
    single = np.array([args[0, 0] * args[0, 1], args[1, 0] + args[1, 1], args[2, 0] * args[2, 1]], np.float32)
    return {"relaxed_precision_f16": bool((floats(words) != single).any())}


NAN_ROWS = (("min", math.nan, 1.0, 0.0), ("min", 1.0, math.nan, 0.0), ("max", math.nan, 1.0, 0.0),
            ("max", 1.0, math.nan, 0.0), ("clamp", math.nan, 0.0, 2.0))
"""min/max with the NaN first and second, then clamp of NaN to [0, 2]."""


def _shown(value: float) -> str:
    return "NaN" if math.isnan(value) else f"{value:g}"


def _nan(args: np.ndarray, words: np.ndarray) -> dict[str, Any]:
    got = floats(words)
    forms = ["NaN" if math.isnan(v) else "x" if v == 1.0 else _shown(float(v)) for v in got[:4]]
    named = {("x",) * 4: "returns other operand", ("NaN",) * 4: "returns NaN",
             ("NaN", "x", "NaN", "x"): "returns first operand", ("x", "NaN", "x", "NaN"): "returns second operand"}
    each = ", ".join(f"{form}={_shown(float(v))}" for form, v in zip(("min(NaN,1)", "min(1,NaN)", "max(NaN,1)",
                                                                         "max(1,NaN)"), got[:4]))
    clamped = float(got[4])
    return {"nan_min_max": named.get(tuple(forms), each),
            "nan_clamp": "returns NaN" if math.isnan(clamped) else "returns lo" if clamped == 0.0
            else "returns hi" if clamped == 2.0 else f"returns {_shown(clamped)}"}


F2I_ROWS = (("int", 3e9, 0.0, 0.0), ("int", -3e9, 0.0, 0.0), ("int", math.nan, 0.0, 0.0), ("int", math.inf, 0.0, 0.0),
            ("int", -math.inf, 0.0, 0.0), ("uint", -1.0, 0.0, 0.0), ("uint", 5e9, 0.0, 0.0),
            ("uint", math.nan, 0.0, 0.0))
F2I_KEYS = ("int(3e9)", "int(-3e9)", "int(NaN)", "int(+inf)", "int(-inf)", "uint(-1)", "uint(5e9)", "uint(NaN)")
"""How ``f2i_out_of_range`` names each of ``F2I_ROWS``."""


def _f2i(args: np.ndarray, words: np.ndarray) -> dict[str, Any]:
    values = [int(w.view(np.int32)) if op == "int" else int(w) for (op, *_), w in zip(F2I_ROWS, words)]
    return {"f2i_out_of_range": dict(zip(F2I_KEYS, values))}


FLOAT32_PI = float(np.float32(math.pi))
FLOAT32_HALF_PI = float(np.float32(math.pi / 2))
EXP_ARGS = (-87.0, -20.5, -1.0, -2.0 ** -10, 0.5, 1.0, 10.25, 50.0, 88.5)
LOG_ARGS = (2.0 ** -126, 1e-30, 1e-5, 0.1, 0.3, 3.0, 1e5, 1e30, 3e38)
LOG_NEAR_1_ARGS = (0.5, 0.99, 1 - 2.0 ** -24, 1 + 2.0 ** -23, 1.0001, 1.5, 1.99)
POW_ARGS = ((2.0, 10.0), (2.0, -10.0), (1.0001, 10000.0), (10.0, 30.0), (0.5, 100.0), (3.0, 0.5), (1e-3, 5.0),
            (7.0, 20.0))
TAN_ARGS = (float(np.nextafter(np.float32(FLOAT32_HALF_PI), np.float32(0))), FLOAT32_HALF_PI,
            float(np.nextafter(np.float32(FLOAT32_HALF_PI), np.float32(2))))
TANH_ARGS = (-100.0, -50.0, -10.0, -1.0, -0.5, 1e-4, 0.5, 1.0, 10.0, 50.0, 89.0, 100.0)
SIN_COS_ARGS = (-FLOAT32_PI, -2.0, -0.5, 1e-4, 0.5, 1.0, 2.0, 3.0, FLOAT32_PI)
SIN_COS_LARGE_ARGS = (100.0, 1e4, -1e5, 1e6)
INVERSESQRT_ARGS = (2.0 ** -126, 1e-30, 0.25, 0.5, 2.0, 3.0, 1e10, 1e30, 3e38)


def _unary(op: str, args: Sequence[float]) -> tuple[tuple[str, float, float, float], ...]:
    return tuple((op, x, 0.0, 0.0) for x in args)


def _ulp_of(name: str, exact: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable:
    """A ``Measure.read`` giving the largest ULP error against ``exact(a, b)`` (float64 of the float32 operands)."""
    def read(args: np.ndarray, words: np.ndarray) -> dict[str, Any]:
        a, b = args[:, 0].astype(np.float64), args[:, 1].astype(np.float64)
        return {name: largest(ulp_errors(floats(words), exact(a, b)))}
    return read


def _abs_of(name: str, exact: Callable[[np.ndarray], np.ndarray]) -> Callable:
    """A ``Measure.read`` giving the largest absolute error against ``exact(a)``."""
    def read(args: np.ndarray, words: np.ndarray) -> dict[str, Any]:
        got = floats(words).astype(np.float64)
        with np.errstate(invalid="ignore"):
            errors = np.where(np.isfinite(got), np.abs(got - exact(args[:, 0].astype(np.float64))), np.inf)
        return {name: largest(errors)}
    return read


def _tan(args: np.ndarray, words: np.ndarray) -> dict[str, Any]:
    exact = np.tan(args[:, 0].astype(np.float64))
    got = floats(words).astype(np.float64)
    with np.errstate(invalid="ignore"):
        relative = np.where(np.isfinite(got), np.abs(got - exact) / np.abs(exact), np.inf)
    return {"tan_near_pi_2": largest(relative)}


def _tanh(args: np.ndarray, words: np.ndarray) -> dict[str, Any]:
    x = args[:, 0].astype(np.float64)
    got = floats(words).astype(np.float64)
    with np.errstate(invalid="ignore"):
        errors = np.where(np.isfinite(got), np.abs(got - np.tanh(x)), np.inf)
    large = np.abs(x) >= 10
    if np.isnan(got[large]).any():
        saturation = "NaN"
    else:
        saturation = "saturates to +-1" if (errors[large] <= 2.0 ** -20).all() else "inaccurate"
    return {"tanh_max_abs": largest(errors), "tanh_large": saturation}


def _sin_cos(name: str) -> Callable:
    """Rows: sin of each argument, then cos of each."""
    def read(args: np.ndarray, words: np.ndarray) -> dict[str, Any]:
        half = len(args) // 2
        x = args[:half, 0].astype(np.float64)
        got = floats(words).astype(np.float64)
        with np.errstate(invalid="ignore"):
            errors = np.where(np.isfinite(got), np.abs(got - np.concatenate([np.sin(x), np.cos(x)])), np.inf)
        return {name: largest(errors)}
    return read


F32_MEASURES: tuple[Measure, ...] = (
    Measure(rows=_denorm_rows(2.0 ** -126), traits=("f32_denorm",),
            read=lambda args, words: {"f32_denorm": _denorm(args, words, np.float32)}),
    Measure(rows=_division_rows(), traits=("div_f32_max_ulp",), read=_division),
    Measure(rows=INTEGRAL_ROWS, traits=("div_f32_integral_exact",), read=_integral),
    Measure(rows=_fma_rows(), traits=("fma",), read=_fma),
    Measure(rows=RELAXED_ROWS, traits=("relaxed_precision_f16",), read=_relaxed),
    Measure(rows=NAN_ROWS, traits=("nan_min_max", "nan_clamp"), read=_nan),
    Measure(rows=F2I_ROWS, traits=("f2i_out_of_range",), read=_f2i),
    Measure(rows=_unary("exp", EXP_ARGS), traits=("exp_max_ulp",), read=_ulp_of("exp_max_ulp", lambda a, b: np.exp(a))),
    Measure(rows=_unary("log", LOG_ARGS), traits=("log_max_ulp",), read=_ulp_of("log_max_ulp", lambda a, b: np.log(a))),
    Measure(rows=_unary("log", LOG_NEAR_1_ARGS), traits=("log_max_abs_near_1",),
            read=_abs_of("log_max_abs_near_1", np.log)),
    Measure(rows=tuple(("pow", x, y, 0.0) for x, y in POW_ARGS), traits=("pow_max_ulp",),
            read=_ulp_of("pow_max_ulp", np.power)),
    Measure(rows=_unary("tan", TAN_ARGS), traits=("tan_near_pi_2",), read=_tan),
    Measure(rows=_unary("tanh", TANH_ARGS), traits=("tanh_max_abs", "tanh_large"), read=_tanh),
    Measure(rows=_unary("sin", SIN_COS_ARGS) + _unary("cos", SIN_COS_ARGS), traits=("sin_cos_max_abs",),
            read=_sin_cos("sin_cos_max_abs")),
    Measure(rows=_unary("sin", SIN_COS_LARGE_ARGS) + _unary("cos", SIN_COS_LARGE_ARGS),
            traits=("sin_cos_large_max_abs",), read=_sin_cos("sin_cos_large_max_abs")),
    Measure(rows=_unary("inversesqrt", INVERSESQRT_ARGS), traits=("inversesqrt_max_ulp",),
            read=_ulp_of("inversesqrt_max_ulp", lambda a, b: 1 / np.sqrt(a))),
)
"""What the float32 probe's rows measure, in row order."""
F16_MEASURES: tuple[Measure, ...] = (
    Measure(rows=_denorm_rows(2.0 ** -14), traits=("f16_denorm",),
            read=lambda args, words: {"f16_denorm": _denorm(args, words, np.float16)}),
)
"""What the float16 probe's rows measure."""


def rows_of(measures: Sequence[Measure], ops: dict[str, str]) -> np.ndarray:
    """The ``ROW`` array of ``measures``' rows, operation codes from ``ops``.

    Raises:
        ValueError: a row names an operation ``ops`` lacks.
    """
    codes = {op: code for code, op in enumerate(ops, 1)}
    flat = [row for measure in measures for row in measure.rows]
    unknown = sorted({op for op, *_ in flat} - set(codes))
    if unknown:
        raise ValueError(f"probe rows name operations {unknown} not in {sorted(codes)}")
    out = np.zeros(len(flat), ROW)
    for i, (op, a, b, c) in enumerate(flat):
        out[i] = (codes[op], a, b, c)
    return out


def read_rows(measures: Sequence[Measure], rows: np.ndarray, words: np.ndarray) -> dict[str, Any]:
    """Each measure's traits from its slice of the readback.

    Raises:
        ValueError: a row's result is still the poison (its invocation never wrote).
    """
    words = np.asarray(words, np.uint32)[: len(rows)]
    unwritten = np.flatnonzero(words == POISON)
    if unwritten.size:
        raise ValueError(f"rows {unwritten[:5].tolist()} were never written")
    args = np.stack([rows["a"], rows["b"], rows["c"]], axis=1)
    found: dict[str, Any] = {}
    start = 0
    for measure in measures:
        stop = start + len(measure.rows)
        found.update(measure.read(args[start:stop], words[start:stop]))
        start = stop
    return found


def row_probe(name: str, source: str, measures: Sequence[Measure], ops: dict[str, str],
              needs: tuple[str, ...] = ()) -> Probe:
    """A probe whose invocation i applies row i's operation and writes its 32 result bits."""
    rows = rows_of(measures, ops)
    return Probe(name=name, source=source, needs=needs, buffers=(rows, np.full(len(rows), POISON, np.uint32)),
                 bound=(None, None), invocations=len(rows), read=lambda words: read_rows(measures, rows, words),
                 traits=tuple(t for m in measures for t in m.traits))


def _subgroup(words: np.ndarray) -> dict[str, Any]:
    sizes = sorted({int(w) for w in words})
    if 0 in sizes:
        raise ValueError("some invocations never wrote gl_SubgroupSize")
    return {"subgroup_size": sizes[0] if len(sizes) == 1 else sizes}


ROBUST_WORDS = 64
"""Words of the robust probe's buffer; only the first ``ROBUST_BOUND`` are bound."""
ROBUST_BOUND = 4
ROBUST_MARK = 0xDEADBEEF
"""What the buffer holds past the bound range."""
ROBUST_INDICES = (3, 4, 5, 40, 63)
"""The last bound word (a control), then reads past the range, all inside the buffer itself."""


def _robust(words: np.ndarray) -> dict[str, Any]:
    bound = [11, 12, 13, 14]
    if int(words[0]) != bound[-1]:
        raise ValueError(f"the in-range control read {int(words[0]):#x}, not {bound[-1]}")
    past = [int(w) for w in words[1:len(ROBUST_INDICES)]]
    if all(w == 0 for w in past):
        found = "zero"
    elif all(w == bound[-1] for w in past):
        found = "clamped"
    elif all(w in bound for w in past):
        found = "in-range value"
    elif all(w == ROBUST_MARK for w in past):
        found = "past the range"
    else:
        found = "undefined-but-ran"
    return {"robust_access": found}


def probes() -> tuple[Probe, ...]:
    """Every probe, in the order they are dispatched."""
    robust = np.full(ROBUST_WORDS, ROBUST_MARK, np.uint32)
    robust[:ROBUST_BOUND] = (11, 12, 13, 14)
    return (
        row_probe("float32", row_source(F32_OPS, helpers=MEDIUMP_HELPERS), F32_MEASURES, F32_OPS),
        row_probe("float16", row_source(F16_OPS, ("GL_EXT_shader_explicit_arithmetic_types_float16",)), F16_MEASURES,
                  F16_OPS, needs=("shader-f16",)),
        Probe(name="subgroup", source=HEADER.format(extensions="#extension GL_KHR_shader_subgroup_basic : require\n")
              + SUBGROUP_BODY, needs=("subgroup",), buffers=(np.zeros(2 * LOCAL_SIZE, np.uint32),), bound=(None,),
              invocations=2 * LOCAL_SIZE, read=_subgroup, traits=("subgroup_size",)),
        Probe(name="robust", source=HEADER.format(extensions="") + ROBUST_BODY, needs=(),
              buffers=(robust, np.array(ROBUST_INDICES, np.uint32)), bound=(ROBUST_BOUND * 4, None),
              invocations=len(ROBUST_INDICES), read=_robust, traits=("robust_access",)),
    )
