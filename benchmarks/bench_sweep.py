"""Time the kernel sweep on one adapter: what caching controls, vkdiff's own overhead, time to first verdict.

Reports, for the selected kernel cases (default: the 400-case ``linear_q4gsw`` sweep):

* **build + pipelines**: time inside ``DeviceContext.kernel`` (codegen, glslc, SPIR-V
  transforms, pipeline creation), cold (empty SPIR-V cache, new device), warm (same
  device: goal ≈ 0) and warm-disk (new device, SPIR-V from the disk cache: wgpu-py
  has no pipeline cache, so pipelines are rebuilt);
* **host overhead per verdict**: ``run_case`` wall time minus device work (uploads,
  dispatches, readbacks, builds) with references prepared beforehand, i.e. what
  vkdiff itself adds per verdict: comparison, metrics, the result record (goal < 2 ms);
* **preparation**: wall and CPU time of the references with the BLAS cap vkdiff
  applies (``PREPARE_BLAS_THREADS``) and without it;
* **time to first verdict**: ``vkdiff run`` of one kernel case in a fresh process with
  warm caches (median of 3), start to exit.

    python3 benchmarks/bench_sweep.py --et-src TREE [--cases REGEX] [--device llvmpipe] [--spirv-cache DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Iterator

from vkdiff.cases.kernels import KernelCase, all_cases
from vkdiff.device.runtime import resources
from vkdiff.device.graph import compute
from vkdiff.device.transports.adapters import select
from vkdiff.device.shaders.build import ShaderBuilder
from vkdiff.device.runtime.context import DeviceContext
from vkdiff.device.shaders.trees import resolve_et_src
from vkdiff.executors import references
from vkdiff.harness import kernels
from vkdiff.datamodel import CACHE_ENV

FIRST_VERDICT_CASE = r"^linear_q4gsw\[M13-K256-N40-g32-fp32-buffer\]$"


class Clock:
    """Seconds spent inside instrumented functions (outermost calls only, so nesting is not counted twice)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._depth = 0

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        self._depth += 1
        start = time.perf_counter()
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self.seconds += time.perf_counter() - start

    def wrap(self, fn: Callable) -> Callable:
        def timed(*args, **kwargs):
            with self.timing():
                return fn(*args, **kwargs)
        return timed


@contextlib.contextmanager
def instrumented() -> Iterator[tuple[Clock, Clock]]:
    """(device work, build + pipelines): clocks around every device-layer entry point a launcher uses."""
    device, build = Clock(), Clock()
    targets = [(resources, "tensor"), (resources, "buffer_tensor"), (resources, "uniform"), (resources, "poisoned"),
               (resources, "allocate"), (resources, "read"), (compute, "dispatch_pipeline")]
    saved = [(owner, name, getattr(owner, name)) for owner, name in targets]
    kernel = DeviceContext.kernel
    for owner, name, fn in saved:
        setattr(owner, name, device.wrap(fn))
    DeviceContext.kernel = device.wrap(build.wrap(kernel))
    try:
        yield device, build
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)
        DeviceContext.kernel = kernel


def prepared_all(cases: list[KernelCase]) -> tuple[dict[str, references.Prepared], float, float]:
    """References of every data id, with (wall, CPU) seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    out: dict[str, references.Prepared] = {}
    for case in cases:
        if case.data_id not in out:
            out[case.data_id] = references.prepare_case(case)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def device_pass(ctx: DeviceContext, cases: list[KernelCase], prepared: dict[str, references.Prepared]):
    """(wall, device work, build + pipelines, statuses) of running every case with references given."""
    statuses: dict[str, int] = {}
    with instrumented() as (device, build):
        start = time.perf_counter()
        for case in cases:
            status = kernels.run_case(ctx, case, prepared=prepared[case.data_id]).status
            statuses[status] = statuses.get(status, 0) + 1
        wall = time.perf_counter() - start
    return wall, device.seconds, build.seconds, statuses


def first_verdict(et_src: str, device: str) -> list[float]:
    """Wall seconds of three fresh ``vkdiff run`` processes of one case (caches warm after the first)."""
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(4):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "vkdiff.entry.cli", "run", "--suite", "kernels", "--cases",
                            FIRST_VERDICT_CASE, "--device", device, "--et-src", et_src, "--results",
                            os.path.join(tmp, f"r{i}.jsonl")], check=True, capture_output=True)
            times.append(time.perf_counter() - start)
    return times[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--et-src", required=True, help="ExecuTorch tree: checkout, REPO@REV or tarball")
    parser.add_argument("--cases", default=r"^linear_q4gsw\[")
    parser.add_argument("--device", default="llvmpipe")
    parser.add_argument("--spirv-cache", metavar="DIR", default=None,
                        help="Reuse the SPIR-V cache in DIR (machines without glslc): cold then builds pipelines only")
    args = parser.parse_args()
    os.environ[CACHE_ENV] = args.spirv_cache or tempfile.mkdtemp(prefix="vkdiff-bench-cache-")
    tree = resolve_et_src(args.et_src)
    cases = all_cases(args.cases)
    info, adapter = select([args.device])[0]
    print(f"{len(cases)} cases on {info.slug} ({info.driver}); cache {os.environ[CACHE_ENV]}")

    prepared, wall, cpu = prepared_all(cases)
    references.PREPARE_BLAS_THREADS = None
    _, wall_free, cpu_free = prepared_all(cases)
    references.PREPARE_BLAS_THREADS = 1
    print(f"prepare ({len(prepared)} data ids): BLAS capped to 1 thread {wall:6.2f} s wall, {cpu:6.2f} s CPU; "
          f"uncapped {wall_free:6.2f} s wall, {cpu_free:6.2f} s CPU")

    ctx = DeviceContext(info, adapter, ShaderBuilder(tree))
    passes = {"cold": device_pass(ctx, cases, prepared), "warm": device_pass(ctx, cases, prepared),
              "warm-disk": device_pass(DeviceContext(info, adapter, ShaderBuilder(tree)), cases, prepared)}
    for name, (total, device, build, statuses) in passes.items():
        overhead_ms = 1000 * (total - device) / len(cases)
        print(f"{name:<9} {total:7.2f} s: build+pipelines {build:6.2f} s, other device work {device - build:6.2f} s, "
              f"host overhead {overhead_ms:5.2f} ms/verdict  {statuses}")
    times = first_verdict(args.et_src, info.slug)
    print(f"time to first verdict, fresh process, warm caches: median {statistics.median(times):.2f} s "
          f"({', '.join(f'{t:.2f}' for t in times)})")


if __name__ == "__main__":
    main()
