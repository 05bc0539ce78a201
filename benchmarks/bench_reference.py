"""Times the numpy reference linears at M=32, K=N=4096, group_size=32.

Ops: ``linear_q4gsw`` (weight-only int4) and ``linear_dq8ca_q4gsw`` (int8
dynamic activations, given per-row qparams; qparam choice is untimed).

Usage: ``python benchmarks/bench_reference.py [--repeats R]``. Prints the best
and median wall-clock seconds of R runs per op (packing/quantization of the
weight is done once, untimed).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vkdiff.reference import (  # noqa: E402
    choose_qparams_per_token_asymmetric,
    linear_dq8ca_q4gsw,
    linear_q4gsw,
    pack_int4_linear,
    quantize_int4_group_symmetric,
    transpose_scales,
    weight_sums,
)

M, K, N, GROUP_SIZE = 32, 4096, 4096, 32


def _time(fn: Callable[[], np.ndarray], repeats: int) -> tuple[list[float], np.ndarray]:
    """Runs ``fn`` ``repeats`` times; returns the wall-clock seconds and the last result."""
    times = []
    out = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def main() -> None:
    """Builds random inputs, runs each reference ``repeats`` times, prints seconds."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    rng = np.random.default_rng(20240601)
    w = rng.standard_normal((N, K)).astype(np.float32)
    x = rng.standard_normal((M, K)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    codes, scales = quantize_int4_group_symmetric(w, GROUP_SIZE)
    packed = pack_int4_linear(codes)
    scales_t = transpose_scales(scales)
    sums = weight_sums(codes, GROUP_SIZE)
    in_scale, in_zp = choose_qparams_per_token_asymmetric(x)

    ops = {
        "linear_q4gsw": lambda: linear_q4gsw(x, packed, scales_t, GROUP_SIZE, bias),
        "linear_dq8ca_q4gsw": lambda: linear_dq8ca_q4gsw(
            x, in_scale, in_zp, packed, sums, scales_t, GROUP_SIZE, bias
        ),
    }
    for name, fn in ops.items():
        times, out = _time(fn, args.repeats)
        assert out.shape == (M, N) and out.dtype == np.float64
        print(
            f"{name} reference M={M} K={K} N={N} gs={GROUP_SIZE}: "
            f"best {min(times):.4f} s, median {float(np.median(times)):.4f} s "
            f"over {args.repeats} runs"
        )


if __name__ == "__main__":
    main()
