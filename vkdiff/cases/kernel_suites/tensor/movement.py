"""The view / copy / data-movement ops, part 1: permute, clone, dtype copies, squeeze, unsqueeze, select, slice,
expand, repeat, flip, constant padding and scalar tensors.

Edges: ranks 1 to 4 (5 for the buffer permute), size-1 dims, widths ≡ 1, 2, 3 (mod 4) so texels are partly
padding; permutations that move the packed dim; negative dims; slices with steps, negative starts and ends
past the size; pads that crop (negative) and fills of NaN and inf; flips over several dims including the
packed (channels) dim; repeats of the packed dim by counts that are not multiples of 4; every storage and
layout the C++ takes, and for ``clone`` each route its choice of shader makes (texture → texture in the same
or another layout, texture ↔ buffer, buffer → buffer), named by ``out<storage>`` / ``out<layout>`` in the id.
Values are N(0, 4²) in the case dtype; ``special`` cases scatter NaN, ±inf, -0.0, ± a subnormal and ± the
largest finite value over the input, which a copy keeps bit for bit; int32 cases hold int32's extremes.
Dtype conversions (``_to_copy``, ``_to_dim_order_copy``) take float16 rounding ties and values just past its
range (``ties``), where round-to-nearest-even decides.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator, Sequence

import numpy as np

from vkdiff.cases.kernel_suites.quantized.q8ta_elementwise import clone_int8x4_cases, int8_codes
from vkdiff.cases.kernels import KernelCase, register_test_suite

DTYPES = ("fp32", "fp16")
STORAGES = ("buffer", "texture3d")
NP = {"fp32": "float32", "fp16": "float16", "int32": "int32"}
TIES16 = (1 + 2.0**-11, 1 + 3 * 2.0**-11, -(1 + 2.0**-11), 2049.0, 2051.0, 65519.0, 65520.0, -65520.0, 1e-8,
          2.0**-25, 3 * 2.0**-26)
"""float32 values where the float16 rounding decides: ties (to even: down, up), the largest value that rounds to
65504 and the first that rounds to inf, a value that underflows to 0, the smallest subnormal's half (a tie to 0)
and a value just past it."""


ALL_DIMS = ("E", "N", "C", "H", "W")
"""Every size of the input: the ops below whose resize functions follow all of them shrink each one."""


def _names(shape: Sequence[int]) -> tuple[tuple[str, int], ...]:
    """Sizes named by position (``N``, ``C``, ``H``, ``W``; a fifth leading dim is ``E``)."""
    return tuple(zip("ENCHW"[5 - len(shape):], (int(s) for s in shape)))


def enc(values: Sequence[int]) -> str:
    """A list in an id token (``-1`` → ``m1``): ``[2, 0, -1]`` → ``2.0.m1``."""
    return ".".join(str(int(v)).replace("-", "m") for v in values)


def dec(token: str) -> list[int]:
    """The list ``enc`` wrote."""
    return [int(v.replace("m", "-")) for v in token.split(".")] if token else []


def _flag(case: KernelCase, prefix: str) -> str:
    return next(f[len(prefix):] for f in case.flags if f.startswith(prefix))


def _shape(case: KernelCase) -> tuple[int, ...]:
    return tuple(v for k, v in case.shape if k in "ENCHW")


def special_values(dtype: np.dtype) -> np.ndarray:
    """NaN, ±inf, -0.0, ± a subnormal, ± the largest finite value of ``dtype``."""
    info = np.finfo(dtype)
    tiny = float(info.smallest_subnormal) * 3
    return np.array([np.nan, np.inf, -np.inf, -0.0, tiny, -tiny, float(info.max), -float(info.max)], dtype)


def values(case: KernelCase, rng: np.random.Generator, shape: Sequence[int], dtype: str | None = None) -> np.ndarray:
    """Input data in ``dtype`` (the case's by default): see the module docstring."""
    name = dtype or NP[case.dtype]
    if name == "int32":
        x = rng.integers(-50_000, 50_000, shape).astype(np.int32)
        x.reshape(-1)[:2] = (np.iinfo(np.int32).max, np.iinfo(np.int32).min)[: x.size]
        return x
    x = (rng.standard_normal(shape) * 4).astype(name)
    flat = x.reshape(-1)
    lead = np.zeros(0, name)
    if case.has("special"):
        lead = special_values(np.dtype(name))
    if case.has("ties"):
        lead = np.array(TIES16, name)
    if lead.size:
        lead = lead[: flat.size]
        flat[rng.choice(flat.size, lead.size, replace=False)] = lead
    return x


def _case(op: str, name: str, shape: Sequence[int], dtype: str, storage: str, layout: str = "width",
          flags: Sequence[str] = (), options: Sequence[tuple[str, str]] = (),
          extra: Sequence[tuple[str, int]] = ()) -> KernelCase:
    return KernelCase(op=op, name=name, shape=_names(shape) + tuple(extra), dtype=dtype, storage=storage,
                      layout=layout, flags=tuple(flags), options=tuple(options))


def _grid(shapes, dtypes=DTYPES, storages=STORAGES) -> Iterator[tuple[Any, str, str]]:
    return itertools.product(shapes, dtypes, storages)


# -- permute -------------------------------------------------------------------------------------------------------

PERMUTES = (((3, 5, 6), (2, 0, 1)), ((2, 3, 5, 7), (0, 2, 3, 1)), ((2, 3, 5, 7), (3, 2, 1, 0)), ((67,), (0,)),
            ((5, 6), (1, 0)), ((2, 1, 7, 9), (-1, 0, -2, 1)))
"""(sizes, dims): width to channels and back, a full reversal, rank 1, a transpose, negative dims with a size-1
dim. Each moves the packed dim except rank 1."""


def permute_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    return {"self": values(case, rng, _shape(case)), "dims": dec(_flag(case, "p"))}


def _permute_cases(op: str, name: str, storages: Sequence[str]) -> Iterator[KernelCase]:
    for (shape, dims), dtype, storage in _grid(PERMUTES, DTYPES, storages):
        yield _case(op, name, shape, dtype, storage, flags=(f"p{enc(dims)}",))
    for storage, layout in itertools.product(storages, ("height", "channels")):
        yield _case(op, name, (2, 3, 5, 7), "fp16", storage, layout, flags=("p0.2.3.1",))
    for storage in storages:
        yield _case(op, name, (3, 5, 6), "fp32", storage, flags=("p2.0.1", "special"))
        yield _case(op, name, (3, 5, 6), "int32", storage, flags=("p2.0.1",))


@register_test_suite("aten.permute_copy.default", make_args=permute_args, resizable=ALL_DIMS)
def permute_copy_suite() -> Iterator[KernelCase]:
    yield from _permute_cases("aten.permute_copy.default", "permute_copy", STORAGES)
    yield _case("aten.permute_copy.default", "permute_copy", (2, 3, 1, 5, 6), "fp32", "buffer",
                flags=("p4.0.3.1.2",))


@register_test_suite("aten.permute.default", make_args=permute_args, resizable=ALL_DIMS)
def permute_suite() -> Iterator[KernelCase]:
    yield from _permute_cases("aten.permute.default", "permute", ("texture3d",))


# -- clone ---------------------------------------------------------------------------------------------------------

CLONE_ROUTES = (("texture3d", "width", ()), ("texture3d", "channels", ()),
                ("texture3d", "width", (("out_layout", "channels"),)),
                ("texture3d", "channels", (("out_storage", "buffer"), ("out_layout", "width"))),
                ("buffer", "width", (("out_storage", "texture3d"), ("out_layout", "channels"))),
                ("buffer", "width", ()), ("buffer", "channels", (("out_layout", "width"),)))
"""(input storage, input layout, output placement): ``clone_*`` twice, ``view_texture``, ``clone_image_to_buffer``,
``clone_buffer_to_image``, ``view_buffer`` in one dim order and across two."""


def clone_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    if case.dtype == "int8":
        return {"self": int8_codes(rng, _shape(case)), "memory_format": None}
    return {"self": values(case, rng, _shape(case)), "memory_format": None}


@register_test_suite("aten.clone.default", make_args=clone_args, resizable=ALL_DIMS)
def clone_suite() -> Iterator[KernelCase]:
    for shape, dtype, (storage, layout, options) in itertools.product(((3, 5, 6), (2, 1, 7, 9)), DTYPES,
                                                                      CLONE_ROUTES):
        yield _case("aten.clone.default", "clone", shape, dtype, storage, layout, options=options)
    for storage, layout, options in CLONE_ROUTES[2:5]:
        yield _case("aten.clone.default", "clone", (3, 5, 6), "fp16", storage, layout, ("special",), options)
        yield _case("aten.clone.default", "clone", (3, 5, 6), "int32", storage, layout, options=options)
    yield _case("aten.clone.default", "clone", (67,), "fp32", "texture3d", flags=("special",))
    yield from clone_int8x4_cases()


# -- dtype copies ----------------------------------------------------------------------------------------------------

CONVERSIONS = (("fp32", "fp32"), ("fp32", "fp16"), ("fp16", "fp32"), ("int32", "fp32"), ("fp32", "int32"),
               ("int32", "fp16"), ("fp16", "int32"))
"""(input, output) dtypes: a same-dtype copy and float ↔ half (``BlitNode``), then the ``view_convert`` ones."""


def to_copy_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """Float inputs of a conversion to int32 stay finite and within int32 (ATen leaves the rest undefined)."""
    x = values(case, rng, _shape(case))
    target = NP[_flag(case, "to")]
    if target == "int32" and x.dtype.kind == "f":
        x = np.where(np.isfinite(x), x, 0).astype(x.dtype)
    args = {"self": x, "dtype": target, "layout": None, "device": None, "pin_memory": None, "non_blocking": False}
    if case.op.startswith("dim_order_ops"):
        return {**args, "dim_order": list(range(x.ndim))}
    return {**args, "memory_format": None}


@register_test_suite("aten._to_copy.default", make_args=to_copy_args, resizable=ALL_DIMS)
def to_copy_suite() -> Iterator[KernelCase]:
    for (src, dst), storage in itertools.product(CONVERSIONS, STORAGES):
        flags = (f"to{dst}",) + (("special",) if src == dst else ())
        yield _case("aten._to_copy.default", "_to_copy", (3, 5, 6), src, storage, flags=flags)
    for (src, dst), storage in itertools.product(CONVERSIONS[3:], STORAGES):
        yield _case("aten._to_copy.default", "_to_copy", (2, 1, 7, 9), src, storage, "channels", (f"to{dst}",))
    yield _case("aten._to_copy.default", "_to_copy", (3, 5, 6), "fp32", "texture3d", flags=("tofp16", "ties"))


@register_test_suite("dim_order_ops._to_dim_order_copy.default", make_args=to_copy_args, resizable=ALL_DIMS)
def to_dim_order_copy_suite() -> Iterator[KernelCase]:
    op, name = "dim_order_ops._to_dim_order_copy.default", "_to_dim_order_copy"
    for src, dst in (("fp32", "fp32"), ("fp16", "fp16"), ("int32", "int32"), *CONVERSIONS[1:]):
        yield _case(op, name, (3, 5, 6), src, "buffer", flags=(f"to{dst}",) + (("special",) if src == dst != "int32"
                                                                               else ()))
    yield _case(op, name, (3, 5, 6), "fp32", "buffer", flags=("tofp16", "ties"))
    yield _case(op, name, (2, 3, 5, 7), "fp16", "buffer", "channels", ("tofp16",), (("out_layout", "width"),))
    yield _case(op, name, (2, 3, 5, 7), "fp32", "buffer", "channels", ("tofp16",), (("out_layout", "width"),))
    yield _case(op, name, (67,), "fp16", "buffer", flags=("tofp32",))


# -- squeeze / unsqueeze -------------------------------------------------------------------------------------------

SQUEEZES = (((1, 5, 6), (0,)), ((3, 1, 6), (1,)), ((2, 1, 7, 1), (-1, 1)), ((1, 1, 5), (-3,)), ((3, 5, 6), (1,)),
            ((4, 1, 3), (0, 1, 2)))
"""(sizes, dims): a leading size-1 dim given as 0 (textures clone), an inner one (permute), two with a negative,
the leading dim given as ``-3`` (textures permute), no size-1 dim (clone), and a mix."""


def squeeze_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    return {"self": values(case, rng, _shape(case)), "dim": dec(_flag(case, "d"))}


def squeeze_resizable(case: KernelCase) -> tuple[str, ...]:
    """Every dim but the listed ones (a listed dim that became 1 would change the output's rank)."""
    listed = {d % len(case.shape) for d in dec(_flag(case, "d"))}
    return tuple(k for i, (k, _) in enumerate(case.shape) if i not in listed)


@register_test_suite("aten.squeeze_copy.dims", make_args=squeeze_args, resizable=squeeze_resizable)
def squeeze_copy_suite() -> Iterator[KernelCase]:
    for (shape, dims), dtype, storage in _grid(SQUEEZES):
        yield _case("aten.squeeze_copy.dims", "squeeze_copy", shape, dtype, storage, flags=(f"d{enc(dims)}",))
    for storage in STORAGES:
        yield _case("aten.squeeze_copy.dims", "squeeze_copy", (2, 1, 7, 1), "fp32", storage, "channels",
                    ("d1.m1",))
        yield _case("aten.squeeze_copy.dims", "squeeze_copy", (3, 1, 6), "int32", storage, flags=("d1", "special"))


UNSQUEEZES = (((5, 6), 0), ((5, 6), -1), ((3, 5, 6), 1), ((67,), 0), ((2, 3, 5), 3), ((7,), -2))
"""(sizes, dim): a new leading dim, a new width (the packed dim moves), an inner dim, rank 1 → 2, a new last dim of
a 3-D tensor, a negative dim."""


def unsqueeze_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    return {"self": values(case, rng, _shape(case)), "dim": case.size("dim")}


@register_test_suite("aten.unsqueeze_copy.default", make_args=unsqueeze_args, resizable=ALL_DIMS)
def unsqueeze_copy_suite() -> Iterator[KernelCase]:
    for (shape, dim), dtype, storage in _grid(UNSQUEEZES):
        yield _case("aten.unsqueeze_copy.default", "unsqueeze_copy", shape, dtype, storage, extra=(("dim", dim),))
    for storage in STORAGES:
        yield _case("aten.unsqueeze_copy.default", "unsqueeze_copy", (3, 5, 6), "fp16", storage, "channels",
                    ("special",), extra=(("dim", 0),))
        yield _case("aten.unsqueeze_copy.default", "unsqueeze_copy", (5, 6), "int32", storage, extra=(("dim", 1),))


# -- select / slice (the view ops) --------------------------------------------------------------------------------

SELECTS = (((3, 5, 6), 0, -1), ((2, 3, 5, 7), 3, 2), ((2, 3, 5, 7), 1, -3), ((9, 6), -1, 5))
"""(sizes, dim, index): the batch-less dim 0 from the end, the width (partial texel), channels by a negative index,
a negative dim."""


def select_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    return {"self": values(case, rng, _shape(case)), "dim": case.size("dim"), "index": case.size("index")}


@register_test_suite("aten.select.int", make_args=select_args, resizable=("N", "H"))  # C and W are selected from
def select_suite() -> Iterator[KernelCase]:
    for (shape, dim, index), dtype, storage in _grid(SELECTS):
        yield _case("aten.select.int", "select", shape, dtype, storage, extra=(("dim", dim), ("index", index)))
    yield _case("aten.select.int", "select", (2, 3, 5, 7), "fp32", "texture3d", "channels", ("special",),
                extra=(("dim", 1), ("index", -3)))
    for storage in STORAGES:
        yield _case("aten.select.int", "select", (2, 3, 5, 7), "int32", storage, extra=(("dim", 3), ("index", 2)))


SLICES = (((3, 5, 10), 2, 1, 100, 3), ((2, 7, 5, 6), 1, -5, None, 2), ((9, 9), -1, 0, 9, 4), ((5, 6, 7), 0, 1, 3, 1),
          ((67,), 0, -60, -1, 5))
"""(sizes, dim, start, end, step): the width with step 3 and an end past the size, channels from a negative start to
the end, a negative dim with step 4, the batch, rank 1 between two negative bounds."""


def slice_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    end = case.sizes.get("end")
    return {"self": values(case, rng, _shape(case)), "dim": case.size("dim"), "start": case.size("start"),
            "end": None if case.has("noend") else end, "step": case.size("step")}


@register_test_suite("aten.slice.Tensor", make_args=slice_args, resizable=ALL_DIMS)
def slice_suite() -> Iterator[KernelCase]:
    for (shape, dim, start, end, step), dtype, storage in _grid(SLICES):
        extra = (("dim", dim), ("start", start)) + ((("end", end),) if end is not None else ()) + (("step", step),)
        yield _case("aten.slice.Tensor", "slice", shape, dtype, storage, flags=() if end is not None else ("noend",),
                    extra=extra)
    yield _case("aten.slice.Tensor", "slice", (2, 7, 5, 6), "fp16", "texture3d", "channels", ("special",),
                extra=(("dim", 1), ("start", 1), ("end", 6), ("step", 2)))
    for storage in STORAGES:
        yield _case("aten.slice.Tensor", "slice", (3, 5, 10), "int32", storage,
                    extra=(("dim", 2), ("start", 1), ("end", 100), ("step", 3)))


# -- expand / repeat / flip ----------------------------------------------------------------------------------------

EXPANDS = (((3, 1), (3, 7)), ((5, 6), (2, 3, 5, 6)), ((2, 1, 1, 9), (2, 3, -1, -1)), ((1, 5, 1), (4, 5, 6)))
"""(sizes, target): the packed dim 1 → 7, two new leading dims, ``-1`` keeping dims, several dims at once."""


def expand_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    return {"self": values(case, rng, _shape(case)), "size": dec(_flag(case, "to")), "implicit": False}


# Not resizable: the output is sized by the scalar ``size`` list, which cannot follow the input.
@register_test_suite("aten.expand_copy.default", make_args=expand_args)
def expand_copy_suite() -> Iterator[KernelCase]:
    for (shape, size), dtype, storage in _grid(EXPANDS):
        yield _case("aten.expand_copy.default", "expand_copy", shape, dtype, storage, flags=(f"to{enc(size)}",))
    for storage in STORAGES:
        yield _case("aten.expand_copy.default", "expand_copy", (1, 5, 1), "fp32", storage, "channels",
                    ("to4.5.6", "special"))
        yield _case("aten.expand_copy.default", "expand_copy", (3, 1), "int32", storage, flags=("to3.7",))


REPEATS = (((3, 5, 6), (1, 1, 3)), ((2, 5), (2, 3, 1)), ((2, 1, 7, 9), (1, 2, 1, 1)), ((5,), (3,)),
           ((2, 3, 5), (2, 1, 3)))
"""(sizes, repeats): the packed dim 6 × 3 (18, not a multiple of 4), a new leading dim, a size-1 dim repeated, rank 1
5 × 3, several dims at once."""


def repeat_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    return {"self": values(case, rng, _shape(case)), "repeats": dec(_flag(case, "r"))}


@register_test_suite("aten.repeat.default", make_args=repeat_args, resizable=ALL_DIMS)
def repeat_suite() -> Iterator[KernelCase]:
    for (shape, reps), dtype, storage in _grid(REPEATS):
        yield _case("aten.repeat.default", "repeat", shape, dtype, storage, flags=(f"r{enc(reps)}",))
    for storage, layout in itertools.product(STORAGES, ("height", "channels")):
        yield _case("aten.repeat.default", "repeat", (2, 3, 5), "fp32", storage, layout, ("r2.1.3", "special"))
    for storage in STORAGES:
        yield _case("aten.repeat.default", "repeat", (3, 5, 6), "int32", storage, flags=("r1.1.3",))


FLIPS = (((3, 5, 6), (0, 1, 2)), ((2, 3, 5, 7), (1,)), ((2, 3, 5, 7), (-1, 0)), ((6,), (0,)), ((2, 6, 3), (-3, 1)))
"""(sizes, dims): every dim of a 3-D tensor, the channels (packed) dim alone, the width and batch by a negative dim,
rank 1, the packed dim of a 3-D tensor with the leading one."""


def flip_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    return {"self": values(case, rng, _shape(case)), "dims": dec(_flag(case, "f"))}


@register_test_suite("aten.flip.default", make_args=flip_args, resizable=ALL_DIMS)
def flip_suite() -> Iterator[KernelCase]:
    """Flip takes channels-packed textures only (``check_flip_args``, and the partitioner's
    ``CHANNELS_PACKED_TEXTURE``)."""
    for (shape, dims), dtype in itertools.product(FLIPS, DTYPES):
        yield _case("aten.flip.default", "flip", shape, dtype, "texture3d", "channels", (f"f{enc(dims)}",))
    yield _case("aten.flip.default", "flip", (3, 5, 6), "fp16", "texture3d", "channels", ("f0.1.2", "special"))
    yield _case("aten.flip.default", "flip", (2, 3, 5, 7), "int32", "texture3d", "channels", ("f1",))


# -- constant padding / scalar tensors -------------------------------------------------------------------------------

PADS = (((3, 5, 6), (1, 2), "half"), ((3, 5, 6), (-1, 2, 1, -2), "neg"),
        ((2, 3, 5, 7), (0, 0, 0, 0, 1, 2, 1, 0), "nan"),
        ((5, 6), (3, 1, 2, 2), "inf"), ((67,), (-3, 4), "big"))
"""(sizes, pad, fill): width pads, crops mixed with pads, channels and batch pads, both inner dims with an
infinite fill, rank 1 crop + pad with a large fill (float32 only: ATen refuses a fill past float16's range)."""
FILLS = {"half": 0.5, "neg": -1.5, "nan": float("nan"), "inf": float("inf"), "big": 1e5}


def pad_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    fill = next(FILLS[f] for f in case.flags if f in FILLS)
    if case.dtype == "int32":
        fill = 7
    return {"self": values(case, rng, _shape(case)), "pad": dec(_flag(case, "p")), "value": fill}


# H and W do not shrink: the cropping pads would leave them empty.
@register_test_suite("aten.constant_pad_nd.default", make_args=pad_args, resizable=("N", "C"))
def constant_pad_nd_suite() -> Iterator[KernelCase]:
    for (shape, pad, fill), dtype, storage in _grid(PADS):
        if fill == "big" and dtype == "fp16":
            continue  # ATen refuses a fill past float16's range ("cannot be converted ... without overflow")
        yield _case("aten.constant_pad_nd.default", "constant_pad_nd", shape, dtype, storage,
                    flags=(f"p{enc(pad)}", fill))
    for storage, layout in itertools.product(STORAGES, ("height", "channels")):
        yield _case("aten.constant_pad_nd.default", "constant_pad_nd", (2, 3, 5, 7), "fp32", storage, layout,
                    ("p1.m2.0.1.2.1", "neg", "special"))
    for storage in STORAGES:
        yield _case("aten.constant_pad_nd.default", "constant_pad_nd", (3, 5, 6), "int32", storage,
                    flags=("p1.2", "half"))


SCALARS = {"f2.5": 2.5, "f0.1": 0.1, "fneg": -7.75, "i3": 3, "ineg": -40000, "big": 1e5, "btrue": True}
"""Scalars by id token: floats (0.1 is inexact in both float dtypes), ints (``-40000`` past float16's exact integers),
a float past float16's range, a bool."""


def scalar_tensor_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    return {"s": SCALARS[case.flags[0]], "dtype": NP[case.dtype], "layout": None, "device": None,
            "pin_memory": None}


@register_test_suite("aten.scalar_tensor.default", make_args=scalar_tensor_args)
def scalar_tensor_suite() -> Iterator[KernelCase]:
    op = "aten.scalar_tensor.default"
    for token, dtype, storage in itertools.product(("f2.5", "f0.1", "fneg"), ("fp32", "fp16", "int32"), STORAGES):
        yield KernelCase(op=op, name="scalar_tensor", shape=(("R", 0),), dtype=dtype, storage=storage, flags=(token,))
    for token, dtype, storage in itertools.product(("i3", "ineg"), ("fp32", "int32"), STORAGES):
        yield KernelCase(op=op, name="scalar_tensor", shape=(("R", 0),), dtype=dtype, storage=storage, flags=(token,))
    for storage in STORAGES:
        yield KernelCase(op=op, name="scalar_tensor", shape=(("R", 0),), dtype="fp16", storage=storage, flags=("big",))
        yield KernelCase(op=op, name="scalar_tensor", shape=(("R", 0),), dtype="fp32", storage=storage,
                         flags=("btrue",))
