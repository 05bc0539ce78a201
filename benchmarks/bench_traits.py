"""Device-trait probe cost per adapter and transport: cold and warm.

Three timings per adapter and transport, each in a process of its own (what one run pays; raw Vulkan after wgpu
work can corrupt a lavapipe process's heap, too), against a temporary cache:

- ``cold``: nothing cached (glslc builds the probes; through wgpu the modules are transformed for naga too);
- ``cold, built``: the probes' SPIR-V cached, the trait record not (what a new driver version costs);
- ``warm``: the record cached (what every later run costs: one verified read, no dispatch).

    python3 benchmarks/bench_traits.py [--transports wgpu,vulkan] [--device SELECTOR]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import os
import shutil
import tempfile
import time


STEPS = ("cold", "cold, built", "warm")


def timings(transport: str, selectors: list[str], cache: str, step: str) -> list[tuple[str, float, str]]:
    """(adapter, seconds of ``device_traits``, what it found) per adapter of ``transport``, after clearing what
    ``step`` says is not cached."""
    os.environ["VKDIFF_CACHE_DIR"] = cache
    from vkdiff.device.runtime import traits
    from vkdiff.device.transports.adapters import create_device, select

    rows = []
    for info, adapter in select(selectors, via=transport):
        device = create_device(info, adapter)
        if step == "cold":
            shutil.rmtree(traits.cache_dir(), ignore_errors=True)
        elif step == "cold, built":
            traits.record_path(info).unlink(missing_ok=True)
        started = time.perf_counter()
        record = traits.device_traits(device, info)
        seconds = time.perf_counter() - started
        failed = traits.failed(record)
        rows.append((f"{info.slug} ({transport})", seconds,
                     f"f32_denorm={record['f32_denorm']} subgroup_size={record['subgroup_size']}"
                     + (f" FAILED {failed}" if failed else "")))
    return rows


def in_own_process(*args: object) -> list[tuple[str, float, str]]:
    """``timings(*args)`` in a fresh (spawned) process."""
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(timings, *args).result()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transports", default="wgpu,vulkan", help="Transports to time, comma-separated")
    parser.add_argument("--device", action="append", default=[], help="Adapter selector (slug or name substring)")
    args = parser.parse_args()
    print(f"{'adapter':28} {'cold':>8} {'cold, built':>12} {'warm':>9}")
    for transport in args.transports.split(","):
        with tempfile.TemporaryDirectory(prefix="vkdiff-bench-traits-") as cache:
            try:
                runs = [in_own_process(transport, args.device, cache, step) for step in STEPS]
            except Exception as exc:  # a transport that cannot open here is a line, not the end of the benchmark
                print(f"{transport:28} not run: {type(exc).__name__}: {exc}")
                continue
        for (slug, cold, found), (_, built, _), (_, warm, _) in zip(*runs):
            print(f"{slug:28} {cold:7.3f}s {built:11.3f}s {warm * 1e3:7.2f}ms  {found}")


if __name__ == "__main__":
    main()
