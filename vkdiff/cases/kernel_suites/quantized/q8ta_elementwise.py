"""Static-int8 elementwise ops and the float ↔ int8x4 boundary: quantize / dequantize per tensor, ``q8ta_relu``,
``q8ta_add``, ``q8ta_pixel_shuffle`` (and the int8x4 clone that ``aten.clone``'s suite takes from here).

Every packed-int8 layout (``int8x4_4w``, ``_4c``, ``_4c1w``, ``_4w4c``, ``_4h4w``) on the int8 side; the float
side of quantize/dequantize on a contiguous buffer and a channels-packed texture (the partitioner's placements),
once each on a width-packed texture and a channels-packed buffer (the C++ takes any). The static-int8 model
cases (XNNPACKQuantizer per-channel recipes) lower to: quantize into ``4c1w`` / ``4w4c`` / ``4h4w`` / ``4w``,
dequantize from ``4c1w`` / ``4h4w`` / ``4w`` / ``4w4c``, ``q8ta_add`` of ``4w4c`` + ``4c1w`` into ``4c1w``, clone
``4h4w`` → ``4c1w``; all are cases here.
Mixed layouts within a packed-dim group are legal for relu, add and pixel shuffle; across groups the C++ refuses.

Shapes: C and W not multiples of 4, N > 1, ranks 2 to 4, size-1 dims. Qparams are fixed per flag (never drawn
from the shape, so the smaller runs below the bound keep the graph's scalars):

=======  ============================================================================================
flag     edge
=======  ============================================================================================
mid      ordinary qparams (a few codes clamp)
zpmin    zero points -128          zpmax   zero points 127
sat      an output scale so small that most codes pin at -128 / 127
tie      power-of-two scales and values with ``x / s`` exactly ``k + 0.5`` (round half to even decides)
huge     quantize: ``|x / s|`` up to 1e10, past int32 (the shader converts to int before it clamps)
q127     quantize with ``quant_min = -127`` (the shader ignores the op's bounds and clamps at -128)
same     relu/add/pixel shuffle: input and output qparams equal (pixel shuffle: a pure byte shuffle)
near     pixel shuffle: ``1 / output_inv_scale`` one float32 ulp off the input scale (passthrough anyway)
alpha*   add with ``alpha`` 0.5 or -1 (the shader has no alpha)
bN1/bH1  add with ``input_b`` of one batch / one row: broadcast (the shader indexes ``b`` with the output's index)
r3       pixel shuffle with ``upscale_factor`` 3 (the fusion pattern takes any int; the C++ refuses all but 2)
=======  ============================================================================================

The ``huge`` quantize passes through wgpu: naga makes float → int conversions saturate (gfx-rs/wgpu#7387), so the
undefined ``ivec4(round(x * inv_scale))`` of an out-of-range value (before the clamp) cannot show here.
Layout pairs the C++ refuses (across packed-dim groups, pixel shuffle off channels) are pinned as host checks in
``tests/cases/test_q8ta_elementwise_suite.py``: the partitioner never asks for them.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator, Sequence

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

QUANTIZE = "quantized_decomposed.quantize_per_tensor.default"
DEQUANTIZE = "quantized_decomposed.dequantize_per_tensor.default"
RELU = "et_vk.q8ta_relu.default"
ADD = "et_vk.q8ta_add.default"
PIXEL_SHUFFLE = "et_vk.q8ta_pixel_shuffle.default"

LAYOUTS = ("int8x4_4w", "int8x4_4c", "int8x4_4c1w", "int8x4_4w4c", "int8x4_4h4w")
"""Every packed-int8 layout vkdiff (and ET-VK's staging) knows."""
CHANNELS_PACKED = ("int8x4_4c", "int8x4_4c1w", "int8x4_4w4c")
"""Packed along C with block size 4: what pixel shuffle takes."""
FLOAT_SIDES = (("buffer", "width"), ("texture3d", "channels"))
"""The partitioner's placements of the float side (``CHANNELS_PACKED_TEXTURE_OR_CONTIGUOUS_BUFFER``)."""

GRID_SHAPES = ((2, 5, 3, 7), (6, 5, 9))
"""Every layout runs these: C = 5 and W = 7 (or 9) are not multiples of 4, N = 2; a 3-D tensor."""
SMALL_SHAPES = ((1, 8, 4, 12), (1, 1, 1, 5), (1, 3, 5, 1), (13, 6))
"""Aligned sizes, size-1 dims (a lone row; a lone column), and a 2-D [M, K] as the linears read it; quantize and
dequantize also run a rank-0 tensor (DeiT's int8 attention-scale constant, ``4w4c``)."""
EDGE_SHAPE = (2, 5, 3, 7)

ALL_DIMS = ("N", "C", "H", "W")

QDQ = {"mid": (0.0375, 3), "zpmin": (0.02, -128), "zpmax": (0.02, 127), "sat": (0.002, 0), "tie": (0.25, 0),
       "huge": (1e-6, 5), "q127": (0.02, 0)}
"""(scale, zero point) of quantize / dequantize per flag."""
UNARY = {"mid": (0.05, 3, 0.03, -128), "same": (0.04, -5, 0.04, -5), "zpmin": (0.03, -128, 0.02, -128),
         "zpmax": (0.03, 127, 0.02, 5), "sat": (0.1, 0, 0.01, -128), "tie": (0.5, 0, 1.0, 0)}
"""(input scale, input zp, output scale, output zp) of relu per flag."""
BINARY = {"mid": (0.05, 3, 0.02, -7, 0.06, 1), "same": (0.04, 0, 0.04, 0, 0.04, 0),
          "zpmin": (0.03, -128, 0.03, -128, 0.05, -128), "zpmax": (0.03, 127, 0.02, 127, 0.05, 127),
          "sat": (0.1, 0, 0.1, 0, 0.005, 0), "tie": (0.25, 0, 0.25, 0, 0.5, 0)}
"""(a scale, a zp, b scale, b zp, output scale, output zp) of add per flag."""
ALPHAS = {"alpha0.5": 0.5, "alpham1": -1.0}
SHUFFLE = {"mid": (0.05, 3, 1 / 0.03, -2), "same": (0.05, 3, 20.0, 3), "zpmin": (0.02, -128, 25.0, -128),
           "zpmax": (0.02, 127, 20.0, 127), "sat": (0.1, 0, 100.0, 0), "tie": (0.5, 0, 1.0, 0),
           "near": (0.05, 3, float(np.nextafter(np.float32(20.0), np.float32(21.0))), 3)}
"""(input scale, input zp, output inverse scale, output zp) of pixel shuffle per flag."""


def f32(value: float) -> float:
    """A float32-representable Python float (the device's ``float`` argument)."""
    return float(np.float32(value))


def _named(shape: Sequence[int]) -> tuple[tuple[str, int], ...]:
    """Sizes named by position; a rank-0 tensor is ``R0``."""
    return tuple(zip("NCHW"[4 - len(shape):], (int(s) for s in shape))) or (("R", 0),)


def _shape(case: KernelCase) -> tuple[int, ...]:
    return tuple(v for k, v in case.shape if k in ALL_DIMS)


def _flag(case: KernelCase, table: dict) -> str:
    return next(f for f in case.flags if f in table)


def int8_codes(rng: np.random.Generator, shape: Sequence[int]) -> np.ndarray:
    """Uniform int8 codes with both extremes present (where two elements fit)."""
    q = np.asarray(rng.integers(-128, 128, shape), np.int8)
    q.reshape(-1)[: 2] = np.array([-128, 127], np.int8)[: q.size]
    return q


def _for_rank(layout: str, shape: Sequence[int]) -> str:
    """A 2-D [M, K] takes ``4h4w`` (what ``q8ta_linear`` reads) where a 4-D one takes ``4w4c``."""
    return "int8x4_4h4w" if len(shape) == 2 and layout == "int8x4_4w4c" else layout


def _case(op: str, name: str, shape: Sequence[int], dtype: str, storage: str, layout: str, flags: Sequence[str],
          options: Sequence[tuple[str, str]] = ()) -> KernelCase:
    return KernelCase(op=op, name=name, shape=_named(shape), dtype=dtype, storage=storage, layout=layout,
                      flags=tuple(flags), options=tuple(options))


# -- quantize / dequantize -------------------------------------------------------------------------------------------

def quantize_input(case: KernelCase, rng: np.random.Generator) -> np.ndarray:
    """Float values spanning a little more than the codes' range at the flag's scale (see the module table)."""
    shape, flag = _shape(case), _flag(case, QDQ)
    scale, zp = QDQ[flag]
    if flag == "tie":
        k = rng.integers(-120, 120, shape)
        x = (k + np.where(rng.random(shape) < 0.6, 0.5, rng.uniform(-0.45, 0.45, shape))) * scale
    elif flag == "huge":
        x = np.where(rng.random(shape) < 0.5, rng.choice([-1.0, 1.0], shape) * 10.0 ** rng.uniform(2, 4, shape),
                     rng.uniform(-1e-4, 1e-4, shape))
    else:
        spread = 20 if flag == "sat" else 1
        x = rng.uniform(-135, 135, shape) * scale * spread - zp * scale * (flag in ("zpmin", "zpmax"))
    return np.asarray(x, case.np_dtype)


def quantize_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    scale, zp = QDQ[_flag(case, QDQ)]
    qmin = -127 if case.has("q127") else -128
    return {"input": quantize_input(case, rng), "scale": f32(scale), "zero_point": zp, "quant_min": qmin,
            "quant_max": 127, "dtype": "int8"}


def dequantize_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    scale, zp = QDQ[_flag(case, QDQ)]
    return {"input": int8_codes(rng, _shape(case)), "scale": f32(scale), "zero_point": zp, "quant_min": -128,
            "quant_max": 127, "dtype": "int8", "out_dtype": case.np_dtype.name}


def _qdq_cases(op: str, name: str, quantize: bool) -> Iterator[KernelCase]:
    """The layout × placement grid, small shapes, edges, other placements, float16 (no variant in the tree)."""
    def case(shape, float_side, int8_layout, flags=("mid",), dtype="fp32") -> KernelCase:
        storage, layout = float_side
        if quantize:
            options = ((("out_storage", "buffer"),) if storage != "buffer" else ()) + (("out_layout", int8_layout),)
            return _case(op, name, shape, dtype, storage, layout, flags, options)
        options = ((("out_storage", storage),) if storage != "buffer" else ()) + (("out_layout", layout),)
        return _case(op, name, shape, dtype, "buffer", int8_layout, flags, options)

    for shape, side, int8_layout in itertools.product(GRID_SHAPES, FLOAT_SIDES, LAYOUTS):
        yield case(shape, side, int8_layout)
    for shape, (side, int8_layout) in itertools.product(SMALL_SHAPES, zip(FLOAT_SIDES, ("int8x4_4w4c", "int8x4_4w"))):
        yield case(shape, side, _for_rank(int8_layout, shape))
    edges = ("zpmin", "zpmax", "sat", "tie") + (("huge", "q127") if quantize else ())
    for flag, (side, int8_layout) in itertools.product(edges, zip(FLOAT_SIDES, ("int8x4_4w4c", "int8x4_4c1w"))):
        yield case(EDGE_SHAPE, side, int8_layout, (flag,))
    yield case(EDGE_SHAPE, ("texture3d", "width"), "int8x4_4w")
    yield case(EDGE_SHAPE, ("buffer", "channels"), "int8x4_4c1w")
    yield case(EDGE_SHAPE, FLOAT_SIDES[1], "int8x4_4c1w", dtype="fp16")
    yield case((), FLOAT_SIDES[0], "int8x4_4w4c")


@register_test_suite(QUANTIZE, make_args=quantize_args, resizable=ALL_DIMS)
def quantize_per_tensor_suite() -> Iterator[KernelCase]:
    yield from _qdq_cases(QUANTIZE, "quantize_per_tensor", quantize=True)


@register_test_suite(DEQUANTIZE, make_args=dequantize_args, resizable=ALL_DIMS)
def dequantize_per_tensor_suite() -> Iterator[KernelCase]:
    yield from _qdq_cases(DEQUANTIZE, "dequantize_per_tensor", quantize=False)


# -- relu and add ----------------------------------------------------------------------------------------------------

def relu_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    in_scale, in_zp, out_scale, out_zp = UNARY[_flag(case, UNARY)]
    return {"input": int8_codes(rng, _shape(case)), "input_scale": f32(in_scale), "input_zero_point": in_zp,
            "output_scale": f32(out_scale), "output_zero_point": out_zp}


def add_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """``input_b`` of the case's shape, or with N (``bN1``) or H (``bH1``) of 1."""
    a_scale, a_zp, b_scale, b_zp, out_scale, out_zp = BINARY[_flag(case, BINARY)]
    shape = _shape(case)
    b_shape = list(shape)
    for flag, axis in (("bN1", -4), ("bH1", -2)):
        if case.has(flag):
            b_shape[axis] = 1
    alpha = next((value for flag, value in ALPHAS.items() if case.has(flag)), 1.0)
    return {"input_a": int8_codes(rng, shape), "input_b": int8_codes(rng, b_shape), "input_a_scale": f32(a_scale),
            "input_a_zero_point": a_zp, "input_b_scale": f32(b_scale), "input_b_zero_point": b_zp,
            "output_scale": f32(out_scale), "output_zero_point": out_zp, "alpha": alpha}


def _elementwise_cases(op: str, name: str, edges: Sequence[str]) -> Iterator[KernelCase]:
    """Every layout on the grid shapes, two on the small ones, each edge on two layouts."""
    for shape, layout in itertools.product(GRID_SHAPES, LAYOUTS):
        yield _case(op, name, shape, "int8", "buffer", layout, ("mid",))
    for shape, layout in itertools.product(SMALL_SHAPES, ("int8x4_4w4c", "int8x4_4w")):
        yield _case(op, name, shape, "int8", "buffer", _for_rank(layout, shape), ("mid",))
    for flag, layout in itertools.product(edges, ("int8x4_4c1w", "int8x4_4w")):
        yield _case(op, name, EDGE_SHAPE, "int8", "buffer", layout, (flag,))


MIXED = (("int8x4_4w4c", "int8x4_4c1w"), ("int8x4_4c1w", "int8x4_4w4c"), ("int8x4_4h4w", "int8x4_4w"),
         ("int8x4_4c", "int8x4_4w4c"))
"""(input layout, output layout) pairs within one packed-dim group: the C++ accepts them (across groups it refuses,
``VK_CHECK_COND(input_info.packed_dim == output_info.packed_dim)``, and the partitioner never asks)."""


@register_test_suite(RELU, make_args=relu_args, resizable=ALL_DIMS)
def q8ta_relu_suite() -> Iterator[KernelCase]:
    yield from _elementwise_cases(RELU, "q8ta_relu", tuple(f for f in UNARY if f != "mid"))
    for in_layout, out_layout in MIXED:
        yield _case(RELU, "q8ta_relu", EDGE_SHAPE, "int8", "buffer", in_layout, ("mid",),
                    (("out_layout", out_layout),))


@register_test_suite(ADD, make_args=add_args, resizable=ALL_DIMS)
def q8ta_add_suite() -> Iterator[KernelCase]:
    yield from _elementwise_cases(ADD, "q8ta_add", tuple(f for f in BINARY if f != "mid"))
    for flag in (*ALPHAS, "bN1", "bH1"):
        yield _case(ADD, "q8ta_add", EDGE_SHAPE, "int8", "buffer", "int8x4_4w4c", ("mid", flag))
    model = ("int8x4_4w4c", "int8x4_4c1w", "int8x4_4c1w")
    for a, b, out in (model, ("int8x4_4c1w", "int8x4_4w4c", "int8x4_4w4c"), ("int8x4_4h4w", "int8x4_4w", "int8x4_4w")):
        yield _case(ADD, "q8ta_add", EDGE_SHAPE, "int8", "buffer", a, ("mid",),
                    (("storage.input_b", f"buffer:{b}"), ("out_layout", out)))


# -- pixel shuffle ---------------------------------------------------------------------------------------------------

SHUFFLE_SHAPES = ((1, 8, 3, 5), (2, 16, 4, 4), (1, 12, 3, 7), (1, 20, 2, 3), (1, 4, 1, 1))
"""[N, 4·C_out, H, W]: C_out = 2, 4, 3, 5 (an output word partly beyond C_out), 1 with H = W = 1."""


def pixel_shuffle_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    in_scale, in_zp, inv_out, out_zp = SHUFFLE[_flag(case, SHUFFLE)]
    return {"input": int8_codes(rng, _shape(case)), "input_scale": f32(in_scale), "input_zero_point": in_zp,
            "output_inv_scale": f32(inv_out), "output_zero_point": out_zp,
            "upscale_factor": 3 if case.has("r3") else 2}


@register_test_suite(PIXEL_SHUFFLE, make_args=pixel_shuffle_args, resizable=("N", "H", "W"))
def q8ta_pixel_shuffle_suite() -> Iterator[KernelCase]:
    name = "q8ta_pixel_shuffle"
    for (shape, layout), flag in zip(itertools.product(SHUFFLE_SHAPES, CHANNELS_PACKED),
                                     itertools.cycle(("mid", "same"))):
        yield _case(PIXEL_SHUFFLE, name, shape, "int8", "buffer", layout, (flag,))
    for flag, layout in itertools.product(("zpmin", "zpmax", "sat", "tie", "near"), ("int8x4_4w4c", "int8x4_4c1w")):
        yield _case(PIXEL_SHUFFLE, name, (1, 12, 3, 7), "int8", "buffer", layout, (flag,))
    for in_layout, out_layout in (("int8x4_4w4c", "int8x4_4c1w"), ("int8x4_4c1w", "int8x4_4c")):
        yield _case(PIXEL_SHUFFLE, name, (1, 12, 3, 7), "int8", "buffer", in_layout, ("mid",),
                    (("out_layout", out_layout),))
    yield _case(PIXEL_SHUFFLE, name, (1, 18, 2, 3), "int8", "buffer", "int8x4_4w4c", ("mid", "r3"))


# -- the int8x4 clone (aten.clone.default's suite, kernel_suites/movement.py, takes these) ----------------------------

CLONE_PAIRS = (("int8x4_4h4w", "int8x4_4c1w"), ("int8x4_4w4c", "int8x4_4c1w"), ("int8x4_4w", "int8x4_4w4c"),
               ("int8x4_4c", "int8x4_4h4w"), ("int8x4_4c1w", "int8x4_4w"))
"""(input, output) layouts of ``Clone.cpp``'s int8x4 route: DeiT's 4h4w → 4c1w, each layout once on either side."""


def clone_int8x4_cases() -> Iterator[KernelCase]:
    """``aten.clone.default`` between int8x4 buffers (``add_q8ta_clone_node``)."""
    for in_layout, out_layout in CLONE_PAIRS:
        yield _case("aten.clone.default", "clone", EDGE_SHAPE, "int8", "buffer", in_layout, (),
                    (("out_layout", out_layout),))
