"""Float matmuls of ``Matmul.cpp`` and ``Linear.cpp``: ``mm``, ``bmm``, ``addmm``, ``linear``, on every route.

Routes (the case id names the kernel base it expects after ``via-``; the launcher checks it):
a tensor second operand runs ``matmul*``, a constant one is prepacked and runs ``linear*``
(option ``mat2const`` / ``mat2tensor``); a buffer output with K or N not a multiple of 4 takes
the scalar shader, else ``*_vec``; 4, 2 or 1 output rows per thread by occupancy
(``N4 * ceil(M/tile) * B ≥ 4096``: M256-N256 takes 4 rows, M128-N256 two, smaller shapes one);
a packed weight past ``max-texture-dimension-2d`` rows (K > 131072 here) is a buffer (``wbuffer``).

Edges: K, N, M ≡ 1, 2, 3 (mod 4); M = 1; bmm batches 1 and > 1 with size-1 dims; linear on 2-D
and 3-D input, with and without bias; addmm with a ``[N]``, ``[M, N]`` and ``[M, 1]`` bias and
non-default ``alpha``/``beta``. ``big`` cases put ``|x| ≥ 256`` in the operands; in float16 one
output exceeds the half range (ATen rounds the float sum to inf) and one row's products do
(``300 * 250``) while their sum cancels to a finite value.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

import numpy as np

from vkdiff.cases.kernels import KernelCase, register_test_suite

STORAGES = ("buffer", "texture3d")
MAT2_KINDS = ("const", "tensor")
SMALL = ((13, 7, 6), (5, 8, 12), (1, 9, 3))
"""(M, K, N): M, K, N ≡ 1, 3, 2 (mod 4); all aligned but M; one row."""
OCCUPANCY = ((130, 6, 256), (256, 5, 256))
"""(M, K, N) whose thread count picks 2 and 4 output rows per thread (M = 130 ≡ 2 mod 4)."""
WIDE_K = (1, 131076, 3)
"""K4 = 32769 packed rows: past the 2-D texture limit of lavapipe (16384) and of NVIDIA's driver (32768) → buffer
weight (at K = 65540 the H100 keeps a texture, so the case's declared route differs per device)."""
BMM = ((1, 13, 7, 6), (3, 5, 8, 12), (2, 1, 5, 1), (3, 7, 1, 6), (4, 64, 4, 256))
"""(B, M, K, N): batch 1; aligned K, N; M = N = 1; K = 1; 4 rows per thread through the batch."""
ADDMM_BIAS = ("bias_n", "bias_mn", "bias_m1")
"""addmm ``self``: ``[N]``, ``[M, N]``, ``[M, 1]``."""
ALPHA, BETA = 0.75, -1.5


def tile_suffix(m: int, n: int, b: int = 1) -> str:
    """``pick_matmul_tile_m`` restated: the declared route's tile-row suffix."""
    for tile, suffix in ((4, ""), (2, "_tile_row_2")):
        if -(-n // 4) * -(-m // tile) * b >= 4096:
            return suffix
    return "_tile_row_1"


def expected_route(stem: str, m: int, k: int, n: int, storage: str, bias: bool = False, b: int = 1) -> str:
    """The kernel base the case declares (``pick_matmul_tiled_shader`` / ``pick_linear_shader``)."""
    scalar = storage == "buffer" and (k % 4 or n % 4)
    return f"{stem}{'' if scalar else '_vec'}{'_bias' if bias else ''}{tile_suffix(m, n, b)}"


def _case(op: str, shape: tuple[tuple[str, int], ...], dtype: str, storage: str, route: str,
          mat2: str | None = None, flags: tuple[str, ...] = (), wbuffer: bool = False) -> KernelCase:
    options = ((("mat2", mat2),) if mat2 else ()) + (("route", route),) + ((("weight_storage", "buffer"),)
                                                                          if wbuffer else ())
    return KernelCase(op=f"aten.{op}.default", name=op, shape=shape, dtype=dtype, storage=storage,
                      options=options, flags=flags)


def _operands(case: KernelCase, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``a [.., M, K]`` and ``b [.., K, N]`` in float64, with the ``big`` edges written in."""
    sizes = case.sizes
    batch = (sizes["B"],) if "B" in sizes else ((sizes["Bx"],) if "Bx" in sizes else ())
    m, k, n = sizes["M"], sizes["K"], sizes["N"]
    a = rng.standard_normal(batch + (m, k))
    b = rng.uniform(-1, 1, (batch[:1] if "B" in sizes else ()) + (k, n))
    if case.has("big"):
        a[..., 0, :] *= 512.0
        if case.dtype == "fp16":
            a[..., 0, 0], b[..., 0, 0] = 60000.0, 2.0
            lanes = min(4, k - k % 2)
            a[..., -1, :lanes] = np.resize([300.0, -300.0], lanes)
            b[..., :lanes, -1] = 250.0
    return a, b


def make_args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    """The op's arguments by schema name in the case dtype (see the module docstring for the edges)."""
    a, b = _operands(case, rng)
    dtype = case.np_dtype
    if case.name == "linear":
        bias = rng.standard_normal(b.shape[-1]).astype(dtype) if case.has("bias") else None
        return {"input": a.astype(dtype), "weight": np.ascontiguousarray(b.T).astype(dtype), "bias": bias}
    if case.name == "addmm":
        m, n = a.shape[-2], b.shape[-1]
        shape = {"bias_n": (n,), "bias_mn": (m, n), "bias_m1": (m, 1)}[case.flags[0]]
        return {"self": rng.standard_normal(shape).astype(dtype), "mat1": a.astype(dtype), "mat2": b.astype(dtype),
                "beta": BETA, "alpha": ALPHA}
    return {"self": a.astype(dtype), "mat2": b.astype(dtype)}


def _mnk(m: int, k: int, n: int) -> tuple[tuple[str, int], ...]:
    return (("M", m), ("K", k), ("N", n))


@register_test_suite("aten.mm.default", make_args=make_args, resizable=("M",))
def mm_suite() -> Iterator[KernelCase]:
    for (m, k, n), storage, kind in itertools.product(SMALL + OCCUPANCY, STORAGES, MAT2_KINDS):
        stem = "linear" if kind == "const" else "matmul"
        yield _case("mm", _mnk(m, k, n), "fp32", storage, expected_route(stem, m, k, n, storage), kind)
    for (m, k, n), storage, kind in itertools.product(SMALL[:2], STORAGES, MAT2_KINDS):
        stem = "linear" if kind == "const" else "matmul"
        yield _case("mm", _mnk(m, k, n), "fp16", storage, expected_route(stem, m, k, n, storage), kind)
        yield _case("mm", _mnk(m, k, n), "fp16", storage, expected_route(stem, m, k, n, storage), kind,
                    flags=("big",))
    for dtype in ("fp32", "fp16"):
        yield _case("mm", _mnk(*WIDE_K), dtype, "buffer", expected_route("linear", *WIDE_K, "buffer"), "const",
                    wbuffer=True)


@register_test_suite("aten.bmm.default", make_args=make_args, resizable=("M",))  # B also sizes mat2, a constant
def bmm_suite() -> Iterator[KernelCase]:
    for (b, m, k, n), storage, kind in itertools.product(BMM, STORAGES, MAT2_KINDS):
        stem = "linear" if kind == "const" else "matmul"
        route = expected_route(stem, m, k, n, storage, b=b)
        yield _case("bmm", (("B", b), *_mnk(m, k, n)), "fp32", storage, route, kind)
    for (b, m, k, n), storage in itertools.product(BMM[1:3], STORAGES):
        yield _case("bmm", (("B", b), *_mnk(m, k, n)), "fp16", storage,
                    expected_route("matmul", m, k, n, storage, b=b), "tensor")


def addmm_resizable(case: KernelCase) -> tuple[str, ...]:
    """M with a ``[N]`` bias; none with ``[M, N]`` or ``[M, 1]``: the bias ``self`` is a constant sized by M."""
    return ("M",) if case.has("bias_n") else ()


@register_test_suite("aten.addmm.default", make_args=make_args, resizable=addmm_resizable)
def addmm_suite() -> Iterator[KernelCase]:
    for (m, k, n), storage, kind, bias in itertools.product(SMALL[:2], STORAGES, MAT2_KINDS, ADDMM_BIAS):
        stem = "linear" if kind == "const" else "matmul"
        yield _case("addmm", _mnk(m, k, n), "fp32", storage, expected_route(stem, m, k, n, storage, True), kind,
                    flags=(bias,))
    for (m, k, n), storage, kind in itertools.product((SMALL[2], OCCUPANCY[0]), STORAGES, MAT2_KINDS):
        stem = "linear" if kind == "const" else "matmul"
        yield _case("addmm", _mnk(m, k, n), "fp32", storage, expected_route(stem, m, k, n, storage, True), kind,
                    flags=("bias_n",))
    for storage, kind in itertools.product(STORAGES, MAT2_KINDS):
        stem = "linear" if kind == "const" else "matmul"
        yield _case("addmm", _mnk(*SMALL[1]), "fp16", storage, expected_route(stem, *SMALL[1], storage, True),
                    kind, flags=("bias_mn",))


@register_test_suite("aten.linear.default", make_args=make_args, resizable=("Bx", "M"))
def linear_suite() -> Iterator[KernelCase]:
    for (m, k, n), storage, bias in itertools.product(SMALL + OCCUPANCY, STORAGES, (False, True)):
        flags = ("bias",) if bias else ()
        yield _case("linear", _mnk(m, k, n), "fp32", storage, expected_route("linear", m, k, n, storage, bias),
                    flags=flags)
    for storage, bias in itertools.product(STORAGES, (False, True)):
        flags = ("bias",) if bias else ()
        shape = (("Bx", 2), *_mnk(5, 7, 6))
        yield _case("linear", shape, "fp32", storage, expected_route("linear", 5, 7, 6, storage, bias, b=2),
                    flags=flags)
        yield _case("linear", _mnk(*SMALL[0]), "fp16", storage,
                    expected_route("linear", *SMALL[0], storage, bias), flags=flags)
        yield _case("linear", _mnk(*SMALL[1]), "fp16", storage,
                    expected_route("linear", *SMALL[1], storage, bias), flags=("big", *flags))
    for dtype in ("fp32", "fp16"):
        yield _case("linear", _mnk(*WIDE_K), dtype, "buffer", expected_route("linear", *WIDE_K, "buffer", True),
                    flags=("bias",), wbuffer=True)
