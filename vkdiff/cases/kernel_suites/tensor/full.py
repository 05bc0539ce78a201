"""The creation ops: ``Full.cpp``'s ``full``, ``full_like``, ``zeros``, ``zeros_like``, ``ones``, ``ones_like``, and
``aten.arange.start_step``.

Shapes: ranks 1 to 4 with the width ≡ 3, 2, 1 (mod 4), so a texel is partly padding.
Fill values: a fraction, a negative, and a value past float16's range (``overflow``:
ATen's float16 ``full`` is inf there; the shader converts the float fill with ``T()``).
``arange`` runs a width ≡ 1 (mod 4) count, a negative step, and past 2048, where float16
stops holding every integer (``start + i * step`` is computed in float, then rounded).
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

SHAPES = ((67,), (3, 5, 6), (2, 1, 7, 9))
FILLS = {"frac": 0.3, "neg": -2.5, "overflow": 1e5}
"""Fill values by flag; 0.3 is inexact in both dtypes, 1e5 overflows float16."""
OPS = ("full", "full_like", "zeros", "zeros_like", "ones", "ones_like")


def _dims(shape: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
    return tuple(zip("NCHW"[-len(shape):], shape))


def full_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    shape = tuple(case.sizes.values())
    args: dict[str, Any] = ({"self": rng.standard_normal(shape).astype(case.np_dtype)} if case.name.endswith("_like")
                            else {"size": list(shape)})
    if case.name.startswith("full"):
        args["fill_value"] = next(FILLS[flag] for flag in case.flags)
    return args


def _cases(name: str) -> Iterator[KernelCase]:
    fills = FILLS if name.startswith("full") else {"": None}
    for shape, dtype, storage, flag in itertools.product(SHAPES, ("fp32", "fp16"), ("buffer", "texture3d"), fills):
        if flag == "overflow" and dtype == "fp32":
            continue
        yield KernelCase(op=f"aten.{name}.default", name=name, shape=_dims(shape), dtype=dtype, storage=storage,
                         flags=(flag,) if flag else ())


def _register(name: str) -> None:
    def suite() -> Iterator[KernelCase]:
        yield from _cases(name)

    suite.__qualname__ = f"{name}_suite"
    # ``full``, ``zeros``, ``ones`` are sized by a scalar list (fixed at build); the ``*_like`` ops follow ``self``.
    register_test_suite(f"aten.{name}.default", make_args=full_args,
                        resizable=tuple("NCHW") if name.endswith("_like") else ())(suite)


for _name in OPS:
    _register(_name)


ARANGES = {"A": (3, 70, 1), "B": (40, -7, -3), "C": (2000, 2100, 1)}
"""(start, end, step) by label: 67 values; a negative step; integers past float16's exact range."""


def arange_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    start, end, step = ARANGES[case.flags[0]]
    return {"start": start, "end": end, "step": step}


@register_test_suite("aten.arange.start_step", make_args=arange_args)
def arange_suite() -> Iterator[KernelCase]:
    for label, dtype, storage in itertools.product(ARANGES, ("fp32", "fp16"), ("buffer", "texture3d")):
        start, end, step = ARANGES[label]
        count = max(-(-(end - start) // step), 0)
        yield KernelCase(op="aten.arange.start_step", name="arange", shape=(("W", count),), dtype=dtype,
                         storage=storage, flags=(label,))
