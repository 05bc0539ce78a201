"""``et_vk.embedding_q4gsw``: both weight conventions, both scale dtypes, shapes that leave partial texels."""

from __future__ import annotations

import itertools
from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

OP = "et_vk.embedding_q4gsw.default"

SHAPES = ((256, 64, 32, 7), (67, 128, 64, 13), (1024, 2048, 128, 31), (32000, 64, 32, 9))
"""(V vocabulary, D embedding dim, g group size, T indices); 32000 is a Llama vocabulary (first and last rows
are always among the indices)."""
DTYPES = ("fp32", "fp16")
IO_STORAGES = ("buffer", "texture3d")


def make_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """A uniformly random 4-bit table (every code in both nibbles), positive scales in the case dtype, and
    ``[1, T]`` int32 indices drawn with repeats over the whole vocabulary (first and last rows included)."""
    v, d, g, t = (case.size(k) for k in "VDgT")
    indices = rng.integers(0, v, (1, t)).astype(np.int32)
    indices[0, :2] = np.array([0, v - 1])[:t]
    return {"weight": rng.integers(0, 256, (v, d // 2), dtype=np.uint8),
            "weight_scales": (rng.uniform(0.5, 1.5, (v, d // g)) / 8).astype(case.np_dtype),
            "group_size": g, "indices": indices, "is_linear_weight": case.has("linear_weight")}


@register_test_suite(OP, make_args=make_args, sampled=False, resizable=("T",))
def embedding_q4gsw_suite() -> Iterator[KernelCase]:
    for (v, d, g, t), dtype, storage, flags in itertools.product(SHAPES, DTYPES, IO_STORAGES,
                                                                 ((), ("linear_weight",))):
        yield KernelCase(op=OP, name="embedding_q4gsw", shape=(("V", v), ("D", d), ("g", g), ("T", t)),
                         dtype=dtype, storage=storage, flags=flags)
