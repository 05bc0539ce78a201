"""``Full.cpp``'s creation ops: ``full``, ``full_like``, ``zeros``, ``zeros_like``, ``ones``, ``ones_like``.

Shapes: ranks 1 to 4 with the width ≡ 3, 2, 1 (mod 4), so a texel is partly padding.
Fill values: a fraction, a negative, and a value past float16's range (``overflow``:
ATen's float16 ``full`` is inf there; the shader converts the float fill with ``T()``).
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
    register_test_suite(f"aten.{name}.default", make_args=full_args)(suite)


for _name in OPS:
    _register(_name)
