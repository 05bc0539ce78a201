"""Times the numpy reference ``linear_q4gsw`` (M=32, K=N=4096, group_size=32).

Usage: ``python benchmarks/bench_reference.py [--repeats R]``. Prints the best
wall-clock seconds of R runs (packing/quantization are done once, untimed).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vkdiff.reference import (  # noqa: E402
    linear_q4gsw,
    pack_int4_linear,
    quantize_int4_group_symmetric,
    transpose_scales,
)

M, K, N, GROUP_SIZE = 32, 4096, 4096, 32


def main() -> None:
    """Builds random inputs, runs the reference ``repeats`` times, prints seconds."""
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

    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        out = linear_q4gsw(x, packed, scales_t, GROUP_SIZE, bias)
        times.append(time.perf_counter() - t0)
    assert out.shape == (M, N) and out.dtype == np.float64
    print(
        f"linear_q4gsw reference M={M} K={K} N={N} gs={GROUP_SIZE}: "
        f"best {min(times):.4f} s, median {float(np.median(times)):.4f} s "
        f"over {args.repeats} runs"
    )


if __name__ == "__main__":
    main()
