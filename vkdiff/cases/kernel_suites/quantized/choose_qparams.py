"""``torchao.choose_qparams_affine`` per row, as 8da4w graphs call it before ``linear_dq8ca_q4gsw``.

Both outputs are judged: scales by the float policy, zero points exactly (int8, or float
zero points in the ``fpzp`` cases). Rows: one, a multiple of 4 and not (the shader
covers four rows per invocation group), a row whose values are all of one sign (the
range then includes 0).

``etvk.choose_qparams_per_row`` (the op ``ChooseQParams.cpp`` registers without the per-row checks):
rows of every fbgemm branch (``ROW_EDGES``), K from one texel to 4096 and K % 4 != 0, int8 and float
zero points, the int4 range and None bounds; rows shrink below the bound.
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


@register_test_suite(OP, make_args=make_args, sampled=False, resizable=("M",))
def choose_qparams_suite() -> Iterator[KernelCase]:
    for (m, k), dtype, storage, flags in itertools.product(SHAPES, ("fp32", "fp16"), ("buffer", "texture3d"),
                                                           ((), ("fpzp",))):
        yield KernelCase(op=OP, name="choose_qparams", shape=(("M", m), ("K", k)), dtype=dtype, storage=storage,
                         flags=flags)


PER_ROW = "etvk.choose_qparams_per_row.default"

PER_ROW_SHAPES = ((7, 64), (1, 64), (13, 256), (6, 4096), (9, 4), (7, 18))
"""(M rows, K): one row; 4096 (each of the 64 workers reads 16 texels); K = 4 (one texel); K % 4 != 0 (the
C++ takes any K: the shader reads ``K // 4`` texels per row, buffer rows at ``y * (K // 4)``)."""

PER_ROW_FLAGGED = {"fpzp": ((7, 64), (13, 256)), "q4": ((7, 64),), "qnone": ((13, 256),)}
"""Shapes each flag runs on: float zero points (``zpinherit``), the int4 range ``[-8, 7]`` as push constants,
``quant_min = quant_max = None`` (the C++ default int8 range)."""

ROW_EDGES = ("positive", "negative", "zero", "equal", "tiny", "big")
"""Rows written first, as many as fit: all of one sign (the range is extended to 0), all zero (scale 0 →
0.1), all equal and negative, a range below ``255 * 6.1e-5`` (the small-scale cut), ``|x|`` in [256, 6e4]."""


def _edge_row(edge: str, k: int, rng: np.random.Generator) -> np.ndarray:
    if edge == "positive":
        return rng.uniform(0.25, 3.0, k)
    if edge == "negative":
        return -rng.uniform(0.1, 5.0, k)
    if edge == "zero":
        return np.zeros(k)
    if edge == "equal":
        return np.full(k, -rng.uniform(0.5, 4.0))
    if edge == "tiny":
        return rng.uniform(-4e-3, 6e-3, k)
    return rng.choice([-1.0, 1.0], k) * np.exp(rng.uniform(np.log(256.0), np.log(6.0e4), k))


def per_row_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    m, k = case.size("M"), case.size("K")
    x = rng.standard_normal((m, k)) * rng.uniform(0.1, 4, (m, 1)) + rng.uniform(-1, 1, (m, 1))
    for row, edge in enumerate(ROW_EDGES[:m]):
        x[row] = _edge_row(edge, k, rng)
    if k % 4:
        x[-1, -1] = np.abs(x[-1]).max() + 1.0  # the row's maximum in the partial last texel
    qmin, qmax = (-8, 7) if case.has("q4") else (None, None) if case.has("qnone") else (-128, 127)
    zp_dtype = case.np_dtype if case.has("fpzp") else np.int8
    return {"input": x.astype(case.np_dtype), "quant_min": qmin, "quant_max": qmax,
            "input_scales": np.zeros(m, case.np_dtype), "input_zps": np.zeros(m, zp_dtype)}


@register_test_suite(PER_ROW, make_args=per_row_args, resizable=("M",))
def choose_qparams_per_row_suite() -> Iterator[KernelCase]:
    for (m, k), dtype, storage in itertools.product(PER_ROW_SHAPES, ("fp32", "fp16"), ("buffer", "texture3d")):
        for flags in [()] + [(f,) for f, shapes in PER_ROW_FLAGGED.items() if (m, k) in shapes]:
            yield KernelCase(op=PER_ROW, name="choose_qparams_per_row", shape=(("M", m), ("K", k)), dtype=dtype,
                             storage=storage, flags=flags)
