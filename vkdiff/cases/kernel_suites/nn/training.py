"""ET-VK's training ops: ``adamw_step``, ``linear_dW``, ``fused_ce`` and ``linear_q4gsw_backward``.

Each C++ has one route (buffer, float32), so the cases sweep shapes and values. Edges:

* ``adamw_step``: the first step (bias corrections 0.1 and 0.001, ``fresh``: zero moments) and a late one
  (``step1000000``: both 1), weight decay 0 (``wd0``) and a large rate (``lrbig``: lr 0.5, decay 0.1),
  ``tiny`` gradients (about eps, where eps outside the square root matters, and some whose ``g·g`` is below
  float32's range) and ``huge`` ones (``g·g`` past float32's range while ``(1 - beta2)·g·g`` is not);
* ``linear_dW``: K and N not multiples of 4, one row (M = 1), rows over two leading dims (``B``);
* ``fused_ce``: in every case of 3 or more rows, row 0 has all logits above 88 (``exp`` overflows float32
  without the max shift), row 1 all negative, row 2 ignored (label -100) and the last row's label is the last
  class; V not a multiple of 4, below the 64 workers of a row and 32000 wide; ``allignored``: every row ignored;
* ``linear_q4gsw_backward``: one row, N % 8 == 4 (the padded ``N8`` column of the ``W_4X8`` blocks), groups of
  20 and 4 (sizes that are not powers of two), K % 8 == 4 (whole ``K4`` tiles that are half a packed word per
  row), N = 4096, rows over two leading dims.

The lowering of the pinned tree puts ``linear_dW`` and ``fused_ce`` on width-packed textures whenever the
tensors fit the texture limits, and admits float16: those cases (``texture3d``, ``fp16``) run the C++'s
refusals. ``adamw_step`` cannot be exported (its schema returns aliases of its inputs) and
``linear_q4gsw_backward`` is never partitioned (its uint8 weight is outside the op's dtype set): their
cases stay on the one route the C++ runs.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

ADAMW = "et_vk.adamw_step.default"
LINEAR_DW = "et_vk.linear_dW.default"
FUSED_CE = "et_vk.fused_ce.default"
Q4GSW_BACKWARD = "et_vk.linear_q4gsw_backward.default"

BETAS = (0.9, 0.999)
EPS = 1e-8
DEFAULT_STEP = 10
IGNORE_INDEX = -100
V_MAX = 1e37
"""Largest second moment drawn: ``v / bias_correction2`` stays finite in float32 (the float64 reference has no
such limit, so a state past it would judge float32 itself, not the kernel)."""
N_VALID = 2.5
"""``fused_ce``'s divisor: a float the graph fixes at build (a mean-reduced loss passes its count of labelled
rows), so it stays when the rows shrink below the bound; not a whole number, so a truncation to int shows."""
HUGE_LOGIT = 88.0
"""``exp(88.73)`` is float32's largest finite value."""


def _shape(case: KernelCase, names: str) -> tuple[int, ...]:
    return tuple(case.size(n) for n in names if n in case.sizes)


def _rows_scaled(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Normal data with a different magnitude per row (never constant)."""
    return rng.standard_normal(shape) * rng.uniform(0.25, 4.0, (*shape[:-1], 1))


# -- adamw_step ---------------------------------------------------------------------------------------------------

def adamw_hyperparameters(case: KernelCase) -> dict[str, float]:
    """lr, betas, eps, decay and the bias corrections ``1 - beta^t`` of the case's step ``t``."""
    step = next((int(f.removeprefix("step")) for f in case.flags if f.startswith("step")), DEFAULT_STEP)
    lr, decay = (0.5, 0.1) if case.has("lrbig") else (1e-3, 0.0 if case.has("wd0") else 0.01)
    beta1, beta2 = BETAS
    return {"lr": lr, "beta1": beta1, "beta2": beta2, "eps": EPS, "weight_decay": decay,
            "bias_correction1": 1.0 - beta1 ** step, "bias_correction2": 1.0 - beta2 ** step}


def _gradients(case: KernelCase, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    signs = rng.choice([-1.0, 1.0], shape)
    if case.has("tiny"):
        exponents = np.where(rng.random(shape) < 0.25, rng.uniform(-30, -25, shape), rng.uniform(-10, -7, shape))
        return signs * 10.0 ** exponents
    if case.has("huge"):
        return signs * 10.0 ** rng.uniform(19.3, 20.0, shape)
    return _rows_scaled(rng, shape)


def adamw_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """Normal parameters; moments of the gradients' scale (zero with ``fresh``, the state before step 1)."""
    shape = _shape(case, "HW")
    grad = _gradients(case, rng, shape)
    scale = np.abs(grad)
    m = np.zeros(shape) if case.has("fresh") else rng.standard_normal(shape) * scale
    v = np.zeros(shape) if case.has("fresh") else rng.uniform(0.1, 1.0, shape) * np.minimum(scale ** 2, V_MAX)
    arrays = {"param": rng.standard_normal(shape), "m": m, "v": v, "grad": grad}
    return {**{k: a.astype(case.np_dtype) for k, a in arrays.items()}, **adamw_hyperparameters(case)}


def adamw_case(h: int, w: int, *flags: str) -> KernelCase:
    return KernelCase(op=ADAMW, name="adamw_step", shape=(("H", h), ("W", w)), dtype="fp32", storage="buffer",
                      flags=flags)


ADAMW_SHAPES = ((4, 8), (3, 35), (1, 1), (1, 1000), (13, 67))
ADAMW_EDGES = (("step1", "fresh"), ("step1",), ("step1000000",), ("wd0",), ("lrbig",), ("step1", "tiny"),
               ("step1", "wd0", "tiny"), ("step1000", "huge"))
"""Flag sets run at ``[13, 67]`` (871 elements: not a whole number of 64-thread workgroups)."""


@register_test_suite(ADAMW, make_args=adamw_args, resizable=("H", "W"))
def adamw_step_suite() -> Iterator[KernelCase]:
    for h, w in ADAMW_SHAPES:
        yield adamw_case(h, w)
    for flags in ADAMW_EDGES:
        yield adamw_case(13, 67, *flags)


# -- linear_dW ----------------------------------------------------------------------------------------------------

def linear_dw_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """``d_out [(B,) M, N]`` with per-row magnitudes and ``x [(B,) M, K]``."""
    rows = _shape(case, "BM")
    d_out = _rows_scaled(rng, (*rows, case.size("N")))
    x = rng.standard_normal((*rows, case.size("K"))) + rng.uniform(-1, 1, case.size("K"))
    return {"d_out": d_out.astype(case.np_dtype), "x": x.astype(case.np_dtype)}


def linear_dw_case(m: int, n: int, k: int, dtype: str = "fp32", storage: str = "buffer", b: int = 0) -> KernelCase:
    shape = ((("B", b),) if b else ()) + (("M", m), ("N", n), ("K", k))
    return KernelCase(op=LINEAR_DW, name="linear_dW", shape=shape, dtype=dtype, storage=storage)


LINEAR_DW_SHAPES = ((1, 12, 8), (1, 13, 7), (5, 13, 7), (7, 1, 1), (64, 3, 5), (13, 64, 40), (200, 33, 17),
                    (300, 40, 12))
"""(M, N, K): one row, N and K odd or below 4, a long contraction."""


@register_test_suite(LINEAR_DW, make_args=linear_dw_args, resizable=("B", "M"))
def linear_dw_suite() -> Iterator[KernelCase]:
    for m, n, k in LINEAR_DW_SHAPES:
        yield linear_dw_case(m, n, k)
    yield linear_dw_case(9, 13, 6, b=2)
    yield linear_dw_case(5, 12, 8, storage="texture3d")
    yield linear_dw_case(1, 13, 7, storage="texture3d")
    yield linear_dw_case(5, 12, 8, dtype="fp16")


# -- fused_ce -----------------------------------------------------------------------------------------------------

def fused_ce_logits(case: KernelCase, rng: np.random.Generator) -> np.ndarray:
    """Normal logits; with 3 or more rows, row 0 all above 88 and row 1 all negative."""
    r, v = case.size("R"), case.size("V")
    logits = rng.standard_normal((r, v)) * rng.uniform(1.0, 6.0, (r, 1))
    if r >= 3:
        logits[0] = rng.uniform(HUGE_LOGIT, HUGE_LOGIT + 32, v)
        logits[1] = -rng.uniform(1.0, 60.0, v)
    return logits


def fused_ce_labels(case: KernelCase, rng: np.random.Generator) -> np.ndarray:
    """Random classes; with 3 or more rows row 2 ignored and the last row on the last class."""
    r, v = case.size("R"), case.size("V")
    labels = rng.integers(0, v, r)
    if r >= 3:
        labels[2], labels[-1] = IGNORE_INDEX, v - 1
    if case.has("allignored"):
        labels[:] = IGNORE_INDEX
    return labels.astype(np.int32)


def fused_ce_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """Logits, labels and ``N_VALID``."""
    logits, labels = fused_ce_logits(case, rng), fused_ce_labels(case, rng)
    return {"logits": logits.astype(case.np_dtype), "labels": labels, "n_valid": N_VALID}


def fused_ce_case(r: int, v: int, dtype: str = "fp32", storage: str = "buffer", *flags: str) -> KernelCase:
    return KernelCase(op=FUSED_CE, name="fused_ce", shape=(("R", r), ("V", v)), dtype=dtype, storage=storage,
                      flags=flags)


FUSED_CE_SHAPES = ((1, 10), (3, 10), (5, 1), (4, 3), (5, 64), (13, 67), (7, 100), (2, 1001), (3, 32000), (64, 130))
"""(R, V): one row, one class, V below 4 and below the 64 workers, V % 4 != 0, an LLM vocabulary."""


@register_test_suite(FUSED_CE, make_args=fused_ce_args, resizable=("R",))
def fused_ce_suite() -> Iterator[KernelCase]:
    for r, v in FUSED_CE_SHAPES:
        yield fused_ce_case(r, v)
    yield fused_ce_case(4, 7, "fp32", "buffer", "allignored")
    yield fused_ce_case(4, 10, "fp32", "texture3d")
    yield fused_ce_case(4, 10, "fp16", "buffer")


# -- linear_q4gsw_backward ----------------------------------------------------------------------------------------

def q4gsw_backward_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """``d_out`` with per-row magnitudes, uniformly random packed bytes (every code in both nibbles) and positive
    scales ``[K/gs, N]`` in ET-VK's transposed layout."""
    k, n, g = case.size("K"), case.size("N"), case.size("g")
    d_out = _rows_scaled(rng, (*_shape(case, "BM"), n))
    weights = rng.integers(0, 256, (n, k // 2), dtype=np.uint8)
    scales = rng.uniform(0.5, 1.5, (k // g, n)) / (8 * np.sqrt(n))
    return {"d_out": d_out.astype(case.np_dtype), "weights": weights,
            "weight_scales": scales.astype(case.np_dtype), "group_size": g}


def q4gsw_backward_case(m: int, k: int, n: int, g: int, b: int = 0) -> KernelCase:
    shape = ((("B", b),) if b else ()) + (("M", m), ("K", k), ("N", n), ("g", g))
    return KernelCase(op=Q4GSW_BACKWARD, name="linear_q4gsw_backward", shape=shape, dtype="fp32", storage="buffer")


Q4GSW_BACKWARD_SHAPES = ((1, 64, 40, 32), (1, 64, 44, 32), (13, 128, 44, 32), (4, 96, 36, 32), (5, 160, 12, 20),
                         (7, 32, 4, 4), (33, 160, 48, 32), (64, 256, 40, 64), (2, 64, 4096, 32), (5, 100, 12, 20),
                         (1, 36, 4, 4))
"""(M, K, N, g): one row, N % 8 == 4, groups of 20 and 4, N = 4, odd M, N = 4096; K % 8 == 4 (the C++ admits any
K % 4 == 0, with groups of 20 and 4)."""


@register_test_suite(Q4GSW_BACKWARD, make_args=q4gsw_backward_args, resizable=("B", "M"))
def q4gsw_backward_suite() -> Iterator[KernelCase]:
    for m, k, n, g in Q4GSW_BACKWARD_SHAPES:
        yield q4gsw_backward_case(m, k, n, g)
    yield q4gsw_backward_case(3, 64, 40, 32, b=2)
