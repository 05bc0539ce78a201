"""The strict device profile (#35): SPIR-V rewritten so that any device computes as the Vulkan spec lets the least
accurate conformant one.

Each rule turns one liberty of the spec's "Precision and Operation of SPIR-V Instructions"
(``vkdiff.reference.spec.precision.LIBERTIES``) into what the module asks for explicitly, so that lavapipe (or any
device) takes it:

``reassociation``
    ``(a * b) * c`` as ``a * (b * c)`` (the inner product used nowhere else, neither ``NoContraction``), as NVIDIA's
    compiler orders them: ``b * c`` may overflow where the written order does not.
``tanh``
    GLSL.std.450 ``Tanh``, ``Sinh`` and ``Cosh`` through the formulas their precision is inherited from,
    ``(exp(x) - exp(-x)) / (exp(x) + exp(-x))`` and the like: infinite over infinite, NaN, past ``|x| = 88.7``.
``pow``
    ``pow(x, y)`` as ``exp2(y * log2(x))``: NaN for ``x < 0``, where the spec leaves it undefined.
``sin_cos``
    ``tan`` as ``sin / cos``; ``sin`` and ``cos`` rounded to a multiple of 2^-11 (2^-7 in float16), half the
    absolute error the spec grants inside [-pi, pi].
``exp``, ``log``
    ``exp(x)`` as ``exp2(x * log2(e))`` and ``log(x)`` as ``log2(x) * ln(2)``, as hardware computes them: the
    product's rounding grows with ``|x|``, the 3 + 2|x| ULP the spec allows.
``inversesqrt``
    ``sqrt(x)`` as ``1 / inversesqrt(x)``, the formula its precision is inherited from.
``division``
    ``a / b`` as ``a * (1 / b)``: two correctly rounded operations, within the 2.5 ULP the spec grants; floor
    division of an integral quotient may land one below it.
``contraction``
    Every ``a * b + c`` (``OpFMul`` feeding ``OpFAdd`` or ``OpFSub``, neither ``NoContraction``) and every
    GLSL.std.450 ``Fma`` computed with one rounding: the product exact in float64, the sum rounded to float64 and
    then to the type (within half a float64 ULP of the fused result). Needs ``shaderFloat64``; lavapipe computes
    ``Fma`` itself with two roundings, so it must be spelled out.
``relaxed_precision``
    Every float32 result the module decorates ``RelaxedPrecision`` (GLSL ``mediump``) rounded to float16 and
    back: infinite past 65504, as a device computing mediump at 16 bits gives. Needs ``shaderFloat16``.
``subnormal_flush``
    Every arithmetic instruction, conversion, builtin, subgroup reduction and comparison reads a subnormal operand
    and gives a subnormal result as zero of its sign, as without ``DenormPreserve``; loads, stores, bitcasts,
    constants and moves keep subnormals, as the spec requires of them (a copy kernel copies them).

The rules apply in the order of ``RULES``: those that make divisions before ``division``, ``subnormal_flush``
last, so that it flushes what the others compute. Each keeps every instruction it does not rewrite as it is.
"""

from __future__ import annotations

from typing import Callable, Iterable

from vkdiff.device.shaders.spirv import DEC_RELAXED_PRECISION, OP_LOAD, SpirvError
from vkdiff.device.shaders.spirv_edit import OP_EXT_INST, SMALLEST_NORMAL, Edit, inst

__all__ = ["RULES", "rewrite"]

OP_FCONVERT, OP_CONVERT_S_TO_F, OP_CONVERT_U_TO_F, OP_BITCAST = 115, 111, 112, 124
OP_FNEGATE, OP_FADD, OP_FSUB, OP_FMUL, OP_FDIV, OP_FREM, OP_FMOD = 127, 129, 131, 133, 136, 140, 141
OP_VECTOR_TIMES_SCALAR, OP_DOT = 142, 148
OP_GROUP_FADD, OP_GROUP_FMUL, OP_GROUP_FMIN, OP_GROUP_FMAX = 350, 352, 355, 358
GROUP_OPS = frozenset({OP_GROUP_FADD, OP_GROUP_FMUL, OP_GROUP_FMIN, OP_GROUP_FMAX})
OP_SELECT, OP_IEQUAL, OP_BITWISE_AND = 169, 170, 199
DEC_NO_CONTRACTION = 42
GLSL_ROUND_EVEN, GLSL_SIN, GLSL_COS, GLSL_TAN = 2, 13, 14, 15
GLSL_SINH, GLSL_COSH, GLSL_TANH, GLSL_POW, GLSL_EXP, GLSL_LOG, GLSL_EXP2, GLSL_LOG2 = 19, 20, 21, 26, 27, 28, 29, 30
GLSL_SQRT, GLSL_INVERSE_SQRT, GLSL_FMA = 31, 32, 50
LOG2_E, LN_2 = 1.4426950408889634, 0.6931471805599453
SIN_COS_STEP = {32: 2.0 ** -11, 16: 2.0 ** -7}
ARITHMETIC = frozenset({OP_FCONVERT, OP_CONVERT_S_TO_F, OP_CONVERT_U_TO_F, OP_FNEGATE, OP_FADD, OP_FSUB, OP_FMUL,
                        OP_FDIV, OP_FREM, OP_FMOD, OP_VECTOR_TIMES_SCALAR, OP_DOT, OP_EXT_INST, OP_GROUP_FADD,
                        OP_GROUP_FMUL, OP_GROUP_FMIN, OP_GROUP_FMAX})
"""Instructions that compute a float: a flushing device may flush what they read and what they give. The spec
forbids it for loads, stores, bitcasts, constants and moves; texel fetches are left alone like loads."""
ROUNDED = ARITHMETIC | {OP_LOAD}
"""Results a device computing mediump in float16 holds in float16: what mediump arithmetic gives and reads."""
INTEGRAL = frozenset({OP_CONVERT_S_TO_F, OP_CONVERT_U_TO_F})
"""Conversions from integers: 0, or at least 1 in magnitude."""
COMPARISONS = frozenset(range(180, 192))
"""OpFOrdEqual … OpFUnordGreaterThanEqual: a flushing device compares flushed operands."""
OP_VECTOR_EXTRACT_DYNAMIC, OP_VECTOR_INSERT_DYNAMIC, OP_VECTOR_SHUFFLE = 77, 78, 79
OP_COMPOSITE_CONSTRUCT, OP_COMPOSITE_EXTRACT, OP_COMPOSITE_INSERT, OP_COPY_OBJECT, OP_PHI = 80, 81, 82, 83, 245
OP_FUNCTION_PARAMETER = 55
EXPONENT = {32: 0x7F800000, 16: 0x7C00}
"""Exponent bits by float width: all zero in a subnormal (and in zero)."""
MOVES = frozenset({OP_VECTOR_EXTRACT_DYNAMIC, OP_VECTOR_INSERT_DYNAMIC, OP_VECTOR_SHUFFLE, OP_COMPOSITE_CONSTRUCT,
                   OP_COMPOSITE_EXTRACT, OP_COMPOSITE_INSERT, OP_COPY_OBJECT, OP_PHI, 169})
"""Instructions that pass values on unchanged (``OpSelect`` among them)."""


def _calls(m: Edit, *numbers: int):
    """``(offset, instruction number, result type, result, arguments)`` of each GLSL.std.450 call of ``numbers``."""
    for at, op, ops in m.body():
        if op == OP_EXT_INST and ops[2] == m.glsl and ops[3] in numbers:
            yield at, ops[3], ops[0], ops[1], ops[4:]


def _hyperbolic(m: Edit) -> None:
    for at, number, rtype, result, (x,) in _calls(m, GLSL_TANH, GLSL_SINH, GLSL_COSH):
        up, negated, down, num = (m.fresh() for _ in range(4))
        words = (m.glsl_call(rtype, up, GLSL_EXP, x) + inst(OP_FNEGATE, rtype, negated, x)
                 + m.glsl_call(rtype, down, GLSL_EXP, negated))
        if number == GLSL_TANH:
            den = m.fresh()
            words += (inst(OP_FSUB, rtype, num, up, down) + inst(OP_FADD, rtype, den, up, down)
                      + inst(OP_FDIV, rtype, result, num, den))
        else:
            words += (inst(OP_FSUB if number == GLSL_SINH else OP_FADD, rtype, num, up, down)
                      + inst(OP_FMUL, rtype, result, num, m.constant(rtype, 0.5)))
        m.replaced[at] = words


def _pow(m: Edit) -> None:
    for at, _, rtype, result, (x, y) in _calls(m, GLSL_POW):
        log, product = m.fresh(), m.fresh()
        m.replaced[at] = (m.glsl_call(rtype, log, GLSL_LOG2, x) + inst(OP_FMUL, rtype, product, y, log)
                          + m.glsl_call(rtype, result, GLSL_EXP2, product))


def _quantised(m: Edit, rtype: int, result: int, number: int, x: int) -> list[int]:
    step = SIN_COS_STEP[m.float_shape(rtype)[0]]
    exact, scaled, rounded = m.fresh(), m.fresh(), m.fresh()
    return (m.glsl_call(rtype, exact, number, x) + inst(OP_FMUL, rtype, scaled, exact, m.constant(rtype, 1 / step))
            + m.glsl_call(rtype, rounded, GLSL_ROUND_EVEN, scaled)
            + inst(OP_FMUL, rtype, result, rounded, m.constant(rtype, step)))


def _sin_cos(m: Edit) -> None:
    for at, number, rtype, result, (x,) in _calls(m, GLSL_SIN, GLSL_COS, GLSL_TAN):
        if number == GLSL_TAN:
            sin, cos = m.fresh(), m.fresh()
            m.replaced[at] = (_quantised(m, rtype, sin, GLSL_SIN, x) + _quantised(m, rtype, cos, GLSL_COS, x)
                              + inst(OP_FDIV, rtype, result, sin, cos))
        else:
            m.replaced[at] = _quantised(m, rtype, result, number, x)


def _exp(m: Edit) -> None:
    for at, _, rtype, result, (x,) in _calls(m, GLSL_EXP):
        scaled = m.fresh()
        m.replaced[at] = (inst(OP_FMUL, rtype, scaled, x, m.constant(rtype, LOG2_E))
                          + m.glsl_call(rtype, result, GLSL_EXP2, scaled))


def _log(m: Edit) -> None:
    for at, _, rtype, result, (x,) in _calls(m, GLSL_LOG):
        log2 = m.fresh()
        m.replaced[at] = (m.glsl_call(rtype, log2, GLSL_LOG2, x)
                          + inst(OP_FMUL, rtype, result, log2, m.constant(rtype, LN_2)))


def _inversesqrt(m: Edit) -> None:
    for at, _, rtype, result, (x,) in _calls(m, GLSL_SQRT):
        rsqrt = m.fresh()
        m.replaced[at] = (m.glsl_call(rtype, rsqrt, GLSL_INVERSE_SQRT, x)
                          + inst(OP_FDIV, rtype, result, m.constant(rtype, 1.0), rsqrt))


def _division(m: Edit) -> None:
    for at, op, ops in m.body():
        if op == OP_FDIV:
            rtype, result, a, b = ops
            reciprocal = m.fresh()
            m.replaced[at] = (inst(OP_FDIV, rtype, reciprocal, m.constant(rtype, 1.0), b)
                              + inst(OP_FMUL, rtype, result, a, reciprocal))


def _reassociation(m: Edit) -> None:
    """``(a * b) * c`` as ``a * (b * c)`` where ``a * b`` is used only there and neither is ``NoContraction``."""
    precise = m.decorated(DEC_NO_CONTRACTION)
    products = {ops[1]: ops for _, op, ops in m.body() if op == OP_FMUL and ops[1] not in precise}
    uses: dict[int, int] = {}
    for _, op, ops in m.body():
        for v in ops[2:] if op != OP_EXT_INST else ops[4:]:
            uses[v] = uses.get(v, 0) + 1
    for at, op, ops in m.body():
        inner = products.get(ops[2]) if op == OP_FMUL and ops[1] not in precise else None
        if inner is not None and inner[0] == ops[0] and uses.get(ops[2]) == 1:
            rtype, result, _, c = ops
            later = m.fresh()
            m.replaced[at] = inst(OP_FMUL, rtype, later, inner[3], c) + inst(OP_FMUL, rtype, result, inner[2], later)


def _fused(m: Edit, rtype: int, result: int, a: int, b: int, c: int, negate: str = "") -> list[int]:
    """``a * b + c`` with one rounding (``negate`` names the operand taken negated: ``"a"`` or ``"c"``)."""
    wide = m.float_type(64, m.float_shape(rtype)[1])
    ids = {name: m.fresh() for name in ("a", "b", "c", "p", "s")}
    words = [w for name, v in zip("abc", (a, b, c)) for w in inst(OP_FCONVERT, wide, ids[name], v)]
    if negate:
        negated = m.fresh()
        words += inst(OP_FNEGATE, wide, negated, ids[negate])
        ids[negate] = negated
    return (words + inst(OP_FMUL, wide, ids["p"], ids["a"], ids["b"])
            + inst(OP_FADD, wide, ids["s"], ids["p"], ids["c"])
            + inst(OP_FCONVERT, rtype, result, ids["s"]))


def _contraction(m: Edit) -> None:
    precise = m.decorated(DEC_NO_CONTRACTION)
    products = {ops[1]: ops[2:] for _, op, ops in m.body() if op == OP_FMUL and ops[1] not in precise}
    for at, op, ops in m.body():
        if op in (OP_FADD, OP_FSUB) and ops[1] not in precise and m.float_shape(ops[0]):
            rtype, result, x, y = ops
            if x in products:
                m.replaced[at] = _fused(m, rtype, result, *products[x], y, "c" if op == OP_FSUB else "")
            elif y in products:
                m.replaced[at] = _fused(m, rtype, result, *products[y], x, "a" if op == OP_FSUB else "")
    for at, _, rtype, result, (a, b, c) in _calls(m, GLSL_FMA):
        m.replaced[at] = _fused(m, rtype, result, a, b, c)


def _relaxed_precision(m: Edit) -> None:
    relaxed = m.decorated(DEC_RELAXED_PRECISION)
    for at, op, ops in m.body():
        shape = m.float_shape(ops[0]) if op in ROUNDED and len(ops) > 1 and ops[1] in relaxed else None
        if shape and shape[0] == 32:
            m.replaced[at], exact = m.renamed(at, op, ops)
            half = m.fresh()
            m.after[at] = (inst(OP_FCONVERT, m.float_type(16, shape[1]), half, exact)
                           + inst(OP_FCONVERT, ops[0], ops[1], half))


def _subnormal_flush(m: Edit) -> None:
    """Every operand an arithmetic instruction reads that may hold a subnormal (a load, a bitcast, a texel, a
    constant, or a move of one) and every result it computes, flushed; moves, loads and stores keep subnormals, as the
    spec requires of them. An operand is flushed once, after the instruction that defines it, for all the arithmetic
    that reads it (where that instruction is a phi or a parameter, which must stay grouped, before each use)."""
    types = m.result_types()
    safe = _never_subnormal(m, types)
    defined = {result: at for result, (at, op, _) in m.definitions().items()
               if op not in (OP_PHI, OP_FUNCTION_PARAMETER)}
    once: dict[int, int] = {}
    for at, op, ops in m.body():
        positions = _float_operands(m, op, ops, types)
        shape = m.float_shape(ops[0]) if op in ARITHMETIC and op not in INTEGRAL else None
        flush_result = bool(shape) and shape[0] in SMALLEST_NORMAL and not _widening(m, op, ops, types)
        unsafe = [k for k in positions if ops[k] not in safe and m.float_shape(types[ops[k]])[0] in SMALLEST_NORMAL]
        if not unsafe and not flush_result:
            continue
        words, new = [], list(ops)
        for k in unsafe:
            value, value_type = ops[k], types[ops[k]]
            if value in defined:
                if value not in once:
                    once[value] = m.fresh()
                    m.after[defined[value]] = (m.after.get(defined[value], [])
                                               + _flushed(m, value_type, m.float_shape(value_type), value, once[value]))
                new[k] = once[value]
            else:
                new[k] = m.fresh()
                words += _flushed(m, value_type, m.float_shape(value_type), value, new[k])
        if flush_result:
            new[1] = m.fresh()
            m.after[at] = m.after.get(at, []) + _flushed(m, ops[0], shape, new[1], ops[1])
        m.replaced[at] = words + inst(op, *new)


def _float_operands(m: Edit, op: int, ops: list[int], types: dict[int, int]) -> list[int]:
    """Positions in ``ops`` of the float operands an arithmetic instruction or comparison computes with."""
    if op == OP_EXT_INST:
        first = 4 if ops[2] == m.glsl else len(ops)
    elif op in GROUP_OPS:
        first = 4  # after the scope and the group operation (a literal)
    elif op in ARITHMETIC or op in COMPARISONS:
        first = 2
    else:
        return []
    return [k for k in range(first, len(ops)) if ops[k] in types and m.float_shape(types[ops[k]])]


def _widening(m: Edit, op: int, ops: list[int], types: dict[int, int]) -> bool:
    """A narrower float converted to a wider one: never subnormal there."""
    return (op == OP_FCONVERT and ops[2] in types and m.float_shape(types[ops[2]]) is not None
            and m.float_shape(types[ops[2]])[0] < m.float_shape(ops[0])[0])


def _never_subnormal(m: Edit, types: dict[int, int]) -> set[int]:
    """Ids that hold no subnormal once the rule has run: flushed results, integers converted (0, or at least 1 in
    magnitude), constants that are not subnormal, and moves of those only (the largest such set: a loop's phi is kept
    while every value it may take is)."""
    safe = {ops[1] for _, op, ops in m.body() if op in ARITHMETIC and len(ops) > 1}
    safe |= set(m.float_constants(normal_only=True))
    movers = {ops[1]: [v for v in _moved(op, ops) if v in types and m.float_shape(types[v])]
              for _, op, ops in m.body() if op in MOVES}
    kept = set(movers)
    while True:
        dropped = {r for r in kept if any(v not in safe and v not in kept for v in movers[r])}
        if not dropped:
            return safe | kept
        kept -= dropped


def _moved(op: int, ops: list[int]) -> list[int]:
    if op == OP_PHI:
        return ops[2::2]
    if op == OP_SELECT:
        return ops[3:5]
    return ops[2:] if op == OP_COMPOSITE_CONSTRUCT else ops[2:4] if op in (OP_VECTOR_SHUFFLE, OP_COMPOSITE_INSERT,
                                                                         OP_VECTOR_INSERT_DYNAMIC) else ops[2:3]


def _flushed(m: Edit, rtype: int, shape: tuple[int, int], exact: int, result: int) -> list[int]:
    """``result`` as ``exact``, or zero of its sign where ``exact`` is subnormal (exponent bits all zero), in integer
    arithmetic on the value's bits: lavapipe computes float16 arithmetic through float32 and back, so a float test of
    each float16 value costs it more than the shader's own work."""
    width, components = shape
    bits_type = m.uint_type(width, components)
    bits, exponent, zero_exponent, sign, kept = (m.fresh() for _ in range(5))
    return (inst(OP_BITCAST, bits_type, bits, exact)
            + inst(OP_BITWISE_AND, bits_type, exponent, bits, m.uint_constant(width, components, EXPONENT[width]))
            + inst(OP_IEQUAL, m.bool_type(components), zero_exponent, exponent, m.uint_constant(width, components, 0))
            + inst(OP_BITWISE_AND, bits_type, sign, bits, m.uint_constant(width, components, 1 << (width - 1)))
            + inst(OP_SELECT, bits_type, kept, zero_exponent, sign, bits)
            + inst(OP_BITCAST, rtype, result, kept))


RULES: dict[str, Callable[[Edit], None]] = {
    "reassociation": _reassociation, "tanh": _hyperbolic, "pow": _pow, "sin_cos": _sin_cos, "exp": _exp, "log": _log,
    "inversesqrt": _inversesqrt,
    "division": _division, "contraction": _contraction, "relaxed_precision": _relaxed_precision,
    "subnormal_flush": _subnormal_flush}
"""Each rule of the strict profile, by the liberty it takes, in the order they apply."""
def rewrite(spv: bytes, rules: Iterable[str]) -> bytes:
    """``spv`` with each of ``rules`` applied, in ``RULES``' order.

    Raises:
        SpirvError: an unknown rule, or a module the rewrite cannot follow.
    """
    rules = set(rules)
    unknown = rules - set(RULES)
    if unknown:
        raise SpirvError(f"strict profile: unknown rule {sorted(unknown)[0]!r}; known: {', '.join(RULES)}")
    for name in (name for name in RULES if name in rules):
        module = Edit(spv)
        RULES[name](module)
        if module.replaced:
            spv = module.build()
    return spv
