"""Time the linear_q4gsw sweep on one adapter: cold (empty SPIR-V cache, no pipelines) vs warm.

warm: the same process again, SPIR-V on disk and pipelines in memory; warm-disk: a new
device context that reuses only the on-disk SPIR-V cache. Each pass is split into
``prepare`` (seeded inputs and the float64 reference, once per data id as ``vkdiff run``
does) and ``device`` (build, pipelines, upload, dispatch, readback, comparison). The
warm ``device`` time is the floor no cache can remove: the kernels themselves.

    python3 benchmarks/bench_sweep.py --et-src ~/src/executorch [--cases REGEX] [--device llvmpipe]
                                      [--spirv-cache DIR]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import tempfile
import time

from vkdiff.cases.kernels import KernelCase, all_cases
from vkdiff.device.adapters import select
from vkdiff.device.build import CACHE_ENV, ShaderBuilder, resolve_et_src
from vkdiff.device.context import DeviceContext
from vkdiff.harness.kernels import prepare_case, prepared_stream, run_case


@dataclasses.dataclass
class Pass:
    prepare: float = 0.0
    device: float = 0.0
    counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    @property
    def total(self) -> float:
        return self.prepare + self.device

    def line(self, name: str, cold: "Pass | None" = None) -> str:
        share = f"  {100 * self.total / cold.total:5.1f}% of cold" if cold else ""
        return (f"{name:<9} {self.total:7.2f} s  (prepare {self.prepare:6.2f} s, device {self.device:6.2f} s)"
                f"{share}  {dict(self.counts)}")


def timed_pass(ctx: DeviceContext, cases: list[KernelCase]) -> Pass:
    timing, last = Pass(), ("", None)
    for case in cases:
        start = time.perf_counter()
        if last[0] != case.data_id:
            last = (case.data_id, prepare_case(case))
        middle = time.perf_counter()
        timing.counts[run_case(ctx, case, prepared=last[1]).status] += 1
        timing.prepare += middle - start
        timing.device += time.perf_counter() - middle
    return timing


def overlapped_pass(ctx: DeviceContext, cases: list[KernelCase]) -> float:
    """What ``vkdiff run`` does: the next references are prepared on a thread while the device runs."""
    start = time.perf_counter()
    for case, prepared in prepared_stream(cases):
        run_case(ctx, case, prepared=prepared)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--et-src", default=None)
    parser.add_argument("--cases", default=r"^linear_q4gsw\[")
    parser.add_argument("--device", default="llvmpipe")
    parser.add_argument("--spirv-cache", metavar="DIR", default=None,
                        help="Reuse the SPIR-V cache in DIR (machines without glslc); cold then builds pipelines only")
    args = parser.parse_args()
    os.environ[CACHE_ENV] = args.spirv_cache or tempfile.mkdtemp(prefix="vkdiff-bench-cache-")
    et_src = resolve_et_src(args.et_src)
    if et_src is None:
        raise SystemExit("bench_sweep: pass --et-src or set VKDIFF_ET_SRC")
    cases = all_cases(args.cases)
    info, adapter = select([args.device])[0]
    print(f"{len(cases)} cases on {info.slug} ({info.driver}); cache {os.environ[CACHE_ENV]}")
    ctx = DeviceContext(info, adapter, ShaderBuilder(et_src))
    cold = timed_pass(ctx, cases)
    print(cold.line("cold"))
    warm = timed_pass(ctx, cases)
    print(warm.line("warm", cold))
    disk = timed_pass(DeviceContext(info, adapter, ShaderBuilder(et_src)), cases)
    print(disk.line("warm-disk", cold) + "  (SPIR-V cached, pipelines rebuilt)")
    overlapped = overlapped_pass(ctx, cases)
    print(f"warm, references prepared ahead (as vkdiff run): {overlapped:6.2f} s "
          f"= {100 * overlapped / cold.total:.1f}% of cold")
    print(f"build+pipelines (cold device - warm device): {cold.device - warm.device:6.2f} s "
          f"= {100 * (cold.device - warm.device) / cold.total:.1f}% of cold")
    print(f"floor (warm device: kernels, transfers, comparison): {warm.device:6.2f} s "
          f"= {100 * warm.device / cold.total:.1f}% of cold")


if __name__ == "__main__":
    main()
