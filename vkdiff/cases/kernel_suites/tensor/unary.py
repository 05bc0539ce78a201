"""Every op of ET-VK's ``UnaryOp.cpp`` (``unary_op`` shaders), at the edges where elementwise shaders break.

Shapes: ranks 1 to 4, the packed (width) dim ≡ 3, 2, 1 (mod 4) so texels are partly padding,
and size-1 dims; every case in both storages and dtypes, one shape also channels-packed.
Inputs are N(0, 2²) with edge values written first (``edges``): signed zeros, rounding ties,
``x < -13`` (gelu and tanh saturate), ``|x| ≥ 256``, a value near the dtype's largest; ``special``
cases add NaN and ±inf, whose propagation ATen defines, ``subnormal`` cases two subnormals
(Vulkan lets a device flush them: lavapipe and NVIDIA do, differently). Ops whose domain is ``x ≥ 0`` (sqrt, rsqrt, log10) get the
magnitudes; sin and cos stay on ``[-π, π]``, where Vulkan bounds them. ``gelu`` runs with both
``approximate`` values; ``bitwise_not`` on bool tensors (texture only: naga has no 8-bit
storage buffers), ``clamp`` also on int32. ``limit`` cases (relu) sit at texture limits (``LIMITS``).
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

FLOAT_OPS = ("abs", "cos", "exp", "neg", "sigmoid", "sin", "sqrt", "rsqrt", "tanh", "hardswish", "hardsigmoid",
             "log10", "round", "gelu", "clamp", "hardtanh", "relu", "relu6", "hardshrink", "leaky_relu")
"""Ops of ``UnaryOp.cpp`` on float tensors (``aten.<name>.default``)."""
POSITIVE = ("sqrt", "rsqrt", "log10")
"""Ops whose real domain is ``x ≥ 0``: their inputs are magnitudes."""
SHAPES = ((67,), (3, 5, 6), (2, 1, 7, 9), (1, 4, 1, 2))
"""Ranks 1-4; width ≡ 3, 2, 1, 2 (mod 4); size-1 dims."""
SCALARS: dict[str, dict[str, Any]] = {
    "clamp": {"min": -0.75, "max": 2.0}, "hardtanh": {"min_val": -2.0, "max_val": 0.5},
    "hardshrink": {"lambd": 0.75}, "leaky_relu": {"negative_slope": 0.2},
}
"""Scalar arguments, away from the defaults so a launcher that ignores them shows."""
LIMITS = ((16383,), (2049, 1, 3))
"""Texture-limit edges (width packed): an x extent of 4096 texels, the largest 3-D image lavapipe allows (NVIDIA:
16384), its last texel partly padding; a z extent of 2049, one past the partitioner's default 3-D limit (2048,
``DEFAULT_TEXTURE_LIMITS``), where ET-VK would pick a buffer, within both devices' own."""
TIES = (0.5, -0.5, 1.5, 2.5, -2.5)
SPECIAL = (np.nan, np.inf, -np.inf)


def edges(dtype: np.dtype, flags: tuple[str, ...] = ()) -> np.ndarray:
    """The edge values of one dtype (see the module docstring); ``special`` and ``subnormal`` cases lead with
    NaN and ±inf, or with two subnormals."""
    big = float(np.finfo(dtype).max) * 0.9
    values = (0.0, -0.0, *TIES, -13.5, -20.0, 13.5, 30.0, 300.0, -300.0, big, -big)
    tiny = float(np.finfo(dtype).smallest_subnormal) * 4
    lead = (SPECIAL if "special" in flags else ()) + ((tiny, -tiny) if "subnormal" in flags else ())
    return np.array(lead + values, np.float64)


PERIODIC = ("sin", "cos")
"""Vulkan bounds GLSL's ``sin``/``cos`` only on ``[-π, π]`` (absolute error 2^-11); their inputs stay there."""


DIMS = ("N", "C", "H", "W")
"""Every size of ``self``: the suite also runs below its cases' sizes (``resize_unary_op_node``)."""


def _dims(shape: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
    return tuple((name, size) for name, size in zip("NCHW"[-len(shape):], shape))


def unary_case(name: str, shape: tuple[int, ...], dtype: str, storage: str, layout: str = "width",
               flags: tuple[str, ...] = ()) -> KernelCase:
    return KernelCase(op=f"aten.{name}.default", name=name, shape=_dims(shape), dtype=dtype, storage=storage,
                      layout=layout, flags=flags)


def unary_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """N(0, 2²) in the case dtype with the edges first; bool and int32 cases draw their own."""
    shape = tuple(case.sizes.values())
    if case.dtype == "bool":
        return {"self": rng.random(shape) < 0.5}
    if case.dtype == "int32":
        return {"self": rng.integers(-5, 6, shape).astype(np.int32), "min": -2, "max": 3}
    x = rng.standard_normal(shape) * 2
    flat = x.reshape(-1)
    edge = edges(case.np_dtype, case.flags)
    if case.name in PERIODIC:
        x = rng.uniform(-np.pi, np.pi, shape)
        flat = x.reshape(-1)
        edge = np.array([0.0, -0.0, np.pi, -np.pi, np.pi / 2, *(SPECIAL if case.has("special") else ())])
    edge = edge[:flat.size]
    flat[:edge.size] = edge
    if case.name in POSITIVE:
        x = np.abs(x)
    args: dict[str, Any] = {"self": x.astype(case.np_dtype), **SCALARS.get(case.name, {})}
    if case.name == "gelu":
        args["approximate"] = "tanh" if case.has("tanh") else "none"
    return args


def _float_cases(name: str) -> Iterator[KernelCase]:
    for shape, dtype, storage in itertools.product(SHAPES, ("fp32", "fp16"), ("buffer", "texture3d")):
        yield unary_case(name, shape, dtype, storage)
    for dtype, storage, flag in itertools.product(("fp32", "fp16"), ("buffer", "texture3d"), ("special", "subnormal")):
        yield unary_case(name, SHAPES[1], dtype, storage, flags=(flag,))
    for dtype in ("fp32", "fp16"):
        yield unary_case(name, SHAPES[2], dtype, "texture3d", layout="channels")
    if name == "gelu":
        for dtype, storage in itertools.product(("fp32", "fp16"), ("buffer", "texture3d")):
            yield unary_case(name, SHAPES[1], dtype, storage, flags=("tanh",))
    if name == "relu":
        for shape, dtype in itertools.product(LIMITS, ("fp32", "fp16")):
            yield unary_case(name, shape, dtype, "texture3d", flags=("limit",))
    if name == "clamp":
        for storage in ("buffer", "texture3d"):
            yield unary_case(name, SHAPES[1], "int32", storage)


def _register(name: str) -> None:
    def suite() -> Iterator[KernelCase]:
        yield from _float_cases(name)

    suite.__qualname__ = f"{name}_suite"  # before registering: a re-import is recognised by module and qualname
    register_test_suite(f"aten.{name}.default", make_args=unary_args, resizable=DIMS)(suite)


for _name in FLOAT_OPS:
    _register(_name)


@register_test_suite("aten.bitwise_not.default", make_args=unary_args, resizable=DIMS)
def bitwise_not_suite() -> Iterator[KernelCase]:
    for shape in SHAPES:
        yield unary_case("bitwise_not", shape, "bool", "texture3d")
