"""The grid ops: ``aten.grid_sampler_2d`` (``GridSampler2d.cpp``) and ``et_vk.grid_priors`` (``GridPriors.cpp``).

``grid_sampler_2d``: the C++ accepts bilinear interpolation, border padding and ``align_corners = true`` only
(``VK_CHECK_COND``; the partitioner keeps every other configuration on the CPU), so only that configuration has
cases; input and output are channels-packed texture3d and the grid a contiguous buffer (the C++ checks both), so
there is no storage choice. Grids reach outside ``[-1, 1]`` (border clamping) and hit the corners exactly;
channels ≡ 1, 2, 3 (mod 4); batches 1 and 2 (the shader derives the batch from the texel z); an input of height 1
(upper row clamped to the lower); half cases with |x| ≥ 256 and near 65504.

``grid_priors``: texture3d, channels packed (the partitioner's placement; the shader's ``packed_dim`` is fixed to
channels); strides 8, 16, 32 and offsets 0 and 0.5; a width of 1 and a grid past 2048 (float16 stops holding
every integer there).
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

SAMPLER = "aten.grid_sampler_2d.default"
PRIORS = "et_vk.grid_priors.default"
SAMPLER_SHAPES = ((1, 3, 5, 7, 4, 9), (2, 6, 6, 5, 3, 3), (1, 5, 1, 6, 2, 7), (1, 8, 9, 4, 5, 6))
"""(N, C, H, W, Ho, Wo): C ≡ 3, 2, 1, 0 (mod 4); a batch of 2; an input of height 1."""


def sampler_case(shape: tuple[int, ...], dtype: str, flags: tuple[str, ...] = ()) -> KernelCase:
    """A case of the one configuration the C++ accepts (bilinear, border, aligned corners)."""
    return KernelCase(op=SAMPLER, name="grid_sampler_2d", shape=tuple(zip(("N", "C", "H", "W", "Ho", "Wo"), shape)),
                      dtype=dtype, storage="texture3d", layout="channels", flags=flags)


def sampler_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """N(0, 2²) input (±300, and ±0.9·65504 for ``big``, first); grid uniform on [-1.5, 1.5] with the corners."""
    z = case.sizes
    x = rng.standard_normal((z["N"], z["C"], z["H"], z["W"])) * 2
    edges = [300.0, -300.0] + ([0.9 * 65504, -0.9 * 65504] if case.has("big") else [])
    flat = x.reshape(-1)
    flat[: len(edges)] = edges[: flat.size]
    grid = rng.uniform(-1.5, 1.5, (z["N"], z["Ho"], z["Wo"], 2))
    corners = [[-1.0, -1.0], [1.0, 1.0], [-1.0, 1.0], [1.25, -2.0]]
    points = grid.reshape(-1, 2)
    points[: len(corners)] = corners[: len(points)]
    return {"input": x.astype(case.np_dtype), "grid": grid.astype(case.np_dtype), "interpolation_mode": 0,
            "padding_mode": 1, "align_corners": True}


@register_test_suite(SAMPLER, make_args=sampler_args, resizable=("Ho", "Wo"))
def grid_sampler_suite() -> Iterator[KernelCase]:
    """Each shape in both dtypes, and one half case near 65504."""
    for shape in SAMPLER_SHAPES:
        for dtype in ("fp32", "fp16"):
            yield sampler_case(shape, dtype)
    yield sampler_case(SAMPLER_SHAPES[0], "fp16", ("big",))


PRIORS_SHAPES = ((3, 5, 7, 8, "o0"), (2, 9, 1, 16, "o5"), (1, 13, 3, 32, "o5"), (1, 3, 80, 32, "o5"))
"""(C, H, W, stride, offset flag): a width of 1; the last reaches 2544, past float16's exact integers."""
OFFSETS = {"o0": 0.0, "o5": 0.5}


def priors_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """Only the input's sizes are read; its data is drawn anyway (never all-equal)."""
    z = case.sizes
    x = rng.standard_normal((1, z["C"], z["H"], z["W"])).astype(case.np_dtype)
    return {"self": x, "stride": z["s"], "offset": OFFSETS[case.flags[0]]}


@register_test_suite(PRIORS, make_args=priors_args, resizable=("H", "W"))
def grid_priors_suite() -> Iterator[KernelCase]:
    """Each shape in both dtypes."""
    for c, h, w, stride, offset in PRIORS_SHAPES:
        for dtype in ("fp32", "fp16"):
            yield KernelCase(op=PRIORS, name="grid_priors", shape=(("C", c), ("H", h), ("W", w), ("s", stride)),
                             dtype=dtype, storage="texture3d", layout="channels", flags=(offset,))
