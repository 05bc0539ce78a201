"""Time the linear_q4gsw sweep on one adapter: cold (empty SPIR-V cache, no pipelines) vs warm.

warm: the same process again, SPIR-V on disk and pipelines in memory; warm-disk: a new
device context that reuses only the on-disk SPIR-V cache.

    python3 benchmarks/bench_sweep.py --et-src ~/src/executorch [--cases REGEX] [--device llvmpipe]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from vkdiff.cases.kernels import all_cases
from vkdiff.device.adapters import select
from vkdiff.device.build import CACHE_ENV, ShaderBuilder, resolve_et_src
from vkdiff.device.context import DeviceContext
from vkdiff.harness.kernels import run_case


def timed_pass(ctx: DeviceContext, cases) -> tuple[float, dict[str, int]]:
    counts: dict[str, int] = {}
    start = time.perf_counter()
    for case in cases:
        status = run_case(ctx, case).status
        counts[status] = counts.get(status, 0) + 1
    return time.perf_counter() - start, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--et-src", default=None)
    parser.add_argument("--cases", default=r"^linear_q4gsw\[")
    parser.add_argument("--device", default="llvmpipe")
    args = parser.parse_args()
    os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="vkdiff-bench-cache-")
    et_src = resolve_et_src(args.et_src)
    if et_src is None:
        raise SystemExit("bench_sweep: pass --et-src or set VKDIFF_ET_SRC")
    cases = all_cases(args.cases)
    info, adapter = select([args.device])[0]
    print(f"{len(cases)} cases on {info.slug} ({info.driver}); cache {os.environ[CACHE_ENV]}")
    ctx = DeviceContext(info, adapter, ShaderBuilder(et_src))
    cold, counts = timed_pass(ctx, cases)
    print(f"cold      {cold:8.2f} s  {counts}")
    warm, counts = timed_pass(ctx, cases)
    print(f"warm      {warm:8.2f} s  {counts}  ({100 * warm / cold:.1f}% of cold)")
    fresh = DeviceContext(info, adapter, ShaderBuilder(et_src))
    disk, counts = timed_pass(fresh, cases)
    print(f"warm-disk {disk:8.2f} s  {counts}  ({100 * disk / cold:.1f}% of cold; SPIR-V cached, pipelines rebuilt)")


if __name__ == "__main__":
    main()
