"""``torchao.choose_qparams_affine`` per row, as 8da4w graphs call it before ``linear_dq8ca_q4gsw``.

Both outputs are judged: scales by the float policy, zero points exactly (int8, or float
zero points in the ``fpzp`` cases). Rows: one, a multiple of 4 and not (the shader
covers four rows per invocation group), a row whose values are all of one sign (the
range then includes 0).
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

OP = "torchao.choose_qparams_affine.default"

SHAPES = ((7, 64), (1, 64), (13, 256), (32, 4096))
"""(M rows, K)."""


def make_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    m, k = case.size("M"), case.size("K")
    x = (rng.standard_normal((m, k)) * rng.uniform(0.1, 4, (m, 1)) + rng.uniform(-1, 1, (m, 1)))
    x[0] = np.abs(x[0]) + 0.25
    return {"input": x.astype(case.np_dtype), "mapping_type": "ASYMMETRIC", "block_size": [1, k],
            "target_dtype": "int8", "quant_min": -128, "quant_max": 127, "eps": float(np.finfo(np.float32).eps),
            "scale_dtype": case.np_dtype.name, "zero_point_dtype": case.np_dtype.name if case.has("fpzp") else "int8",
            "keepdim": False}


@register_test_suite(OP, make_args=make_args, sampled=False)
def choose_qparams_suite() -> Iterator[KernelCase]:
    for (m, k), dtype, storage, flags in itertools.product(SHAPES, ("fp32", "fp16"), ("buffer", "texture3d"),
                                                           ((), ("fpzp",))):
        yield KernelCase(op=OP, name="choose_qparams", shape=(("M", m), ("K", k)), dtype=dtype, storage=storage,
                         flags=flags)
