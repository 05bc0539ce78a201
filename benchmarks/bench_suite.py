"""Time the kernel suite as ``vkdiff run`` runs it, per transport: wall, per-case median and p90, each phase's share.

Each transport runs in a process of its own (raw Vulkan after wgpu work in one process
can corrupt the heap on lavapipe), through the real ``Runner`` with its references
scheduled ahead on a thread, as ``vkdiff run --suite kernels`` does: several cases in flight,
their waits for the device shared (``Runner.run_window``). With ``--alone`` the cases run one
at a time, as before that, and time on the main thread is split exclusively (a phase inside
another counts once, for the inner one):

* **build**: ``ShaderBuilder.build`` (codegen, glslc, or the disk cache);
* **pipelines**: ``PipelineCache.get`` (transforms, shader modules, pipelines);
* **stage**: tensor and uniform allocation and uploads (``resources``);
* **dispatch**: ``ComputeGraph.execute`` (encode, submit, wait);
* **readback**: ``resources.read*``;
* **reference**: references computed on the main thread (a case the thread had not reached);
* **judge**: ``judge_kernel`` (comparison, envelopes, the result record);
* **other**: everything else on the main thread (vkdiff's own bookkeeping).

The reference thread's own time is reported beside (it overlaps the device work).

    python3 benchmarks/bench_suite.py --et-src TREE [--cases REGEX] [--device SLUG] [--transports wgpu,vulkan]
                                      [--statuses PREFIX] [--jobs N] [--alone]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Iterator

PHASES = ("build", "pipelines", "stage", "dispatch", "readback", "reference", "judge")


class Phases:
    """Exclusive seconds per phase on the main thread; the reference thread's time apart."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.reference_thread = 0.0
        self._stack: list[list[Any]] = []
        self._main = threading.main_thread()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if threading.current_thread() is not self._main:
            start = time.perf_counter()
            try:
                yield
            finally:
                if name == "reference":
                    self.reference_thread += time.perf_counter() - start
            return
        now = time.perf_counter()
        if self._stack:
            outer = self._stack[-1]
            self.seconds[outer[0]] += now - outer[1]
        self._stack.append([name, now])
        try:
            yield
        finally:
            done = time.perf_counter()
            inner = self._stack.pop()
            self.seconds[inner[0]] += done - inner[1]
            if self._stack:
                self._stack[-1][1] = done

    def wrap(self, name: str, fn: Callable) -> Callable:
        def timed(*args, **kwargs):
            with self.phase(name):
                return fn(*args, **kwargs)
        return timed


def instrument(phases: Phases) -> None:
    """Wrap each phase's entry points where their callers look them up (module attributes, methods)."""
    from vkdiff.device.graph import compute
    from vkdiff.device.runtime import resources
    from vkdiff.device.shaders import build, dispatch
    from vkdiff.executors import kernel, references
    from vkdiff.harness import kernels

    targets = [(build.ShaderBuilder, "build", "build"), (dispatch.PipelineCache, "get", "pipelines"),
               (compute.ComputeGraph, "execute", "dispatch"), (kernels, "judge_kernel", "judge"),
               (references, "prepare_case", "reference"), (kernel, "prepare_case", "reference")]
    targets += [(resources, name, "stage") for name in ("tensor", "buffer_tensor", "uniform", "poisoned", "allocate")]
    targets += [(resources, name, "readback") for name in ("read", "read_raw", "read_buffers", "read_guards")]
    for owner, name, phase in targets:
        setattr(owner, name, phases.wrap(phase, getattr(owner, name)))


def _timed_cases(runner: Any, cases: list, slug: str, jobs: int, alone: bool) -> Iterator[tuple[Any, list, float]]:
    """(case, results, seconds) of each case: timed here (``alone``), or as each result timed itself (overlapped, as
    ``vkdiff run`` runs them, or with ``jobs`` workers)."""
    by_case = {c.id: c for c in cases}
    if jobs > 1:
        from vkdiff.harness.parallel import run_parallel

        for result in run_parallel(cases, runner, jobs):
            yield by_case[result.case], [result], result.seconds or 0.0
        return
    runner.schedule(cases)
    if not alone:
        from vkdiff.device.runtime.overlap import windows

        for window in windows(cases):
            for result in runner.run_window(window):
                yield by_case[result.case], [result], result.seconds or 0.0
        return
    for case in cases:
        tick = time.perf_counter()
        results = runner.run(case, slug)
        yield case, results, time.perf_counter() - tick


def one_transport(args: argparse.Namespace) -> dict[str, Any]:
    """Run the cases through ``Runner`` on one transport; the measurements as a JSON-able dict."""
    from vkdiff.cases.kernels import all_cases
    from vkdiff.datamodel.settings import RunSettings
    from vkdiff.device.shaders.trees import choose_tree
    from vkdiff.device.transports.adapters import select
    from vkdiff.harness.runner import Runner

    phases = Phases()
    if args.alone:
        instrument(phases)
    cases = all_cases(args.cases)
    adapters = select([args.device] if args.device else [], via=args.one)[:1]
    runner = Runner(tree=choose_tree(args.et_src), adapters=adapters, settings=RunSettings(transport=args.one))
    slug = adapters[0][0].slug
    start = time.perf_counter()
    per_case, statuses, each, timed = [], {}, {}, {}
    for case, results, seconds in _timed_cases(runner, cases, slug, args.jobs, args.alone):
        for result in results:
            statuses[result.status] = statuses.get(result.status, 0) + 1
            each[case.id] = result.status
        per_case.append(seconds)
        timed[case.id] = seconds
    wall = time.perf_counter() - start
    runner.close()
    other = wall - sum(phases.seconds.values())
    if args.statuses:
        with open(f"{args.statuses}.{args.one}.json", "w") as out:
            json.dump(each, out, indent=0, sort_keys=True)
        with open(f"{args.statuses}.{args.one}.seconds.json", "w") as out:
            json.dump(timed, out, indent=0)
    from vkdiff.harness.parallel import chunk_size

    size = chunk_size(len(per_case), args.jobs)
    chunks = [sum(per_case[i:i + size]) for i in range(0, len(per_case), size)]
    return {"transport": args.one, "device": slug, "driver": adapters[0][0].driver, "cases": len(cases),
            "wall_s": wall, "median_ms": 1e3 * statistics.median(per_case),
            "p90_ms": 1e3 * statistics.quantiles(per_case, n=10)[-1] if len(per_case) > 1 else 1e3 * per_case[0],
            "phases_s": {**phases.seconds, "other": other}, "reference_thread_s": phases.reference_thread,
            "statuses": statuses, "case_seconds": sum(per_case), "heaviest_chunks": sorted(chunks)[-3:][::-1]}


def main() -> None:
    from vkdiff.harness.parallel import chunk_size

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--et-src", required=True, help="ExecuTorch tree: checkout, REPO@REV or tarball")
    parser.add_argument("--cases", default=None, help="Kernel case regex (default: every kernel case)")
    parser.add_argument("--device", default=None, help="Adapter slug (default: the first)")
    parser.add_argument("--transports", default="wgpu,vulkan")
    parser.add_argument("--statuses", default=None, metavar="PREFIX",
                        help="Write each case's status to PREFIX.TRANSPORT.json (to compare two runs' verdicts) and "
                             "its seconds to PREFIX.TRANSPORT.seconds.json")
    parser.add_argument("--jobs", type=int, default=1,
                        help="Worker processes, as vkdiff run --jobs (phases are then not split: workers are not "
                             "instrumented)")
    parser.add_argument("--alone", action="store_true",
                        help="One case at a time, each timed here, with the phases split (default: overlapped as "
                             "vkdiff run runs them, each case's own seconds, phases not split)")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_transport(args)))
        return
    for transport in args.transports.split(","):
        argv = [sys.executable, __file__, "--et-src", args.et_src, "--one", transport]
        argv += [f"--cases={args.cases}"] if args.cases else []
        argv += ["--device", args.device] if args.device else []
        argv += ["--statuses", args.statuses] if args.statuses else []
        argv += ["--jobs", str(args.jobs)] + (["--alone"] if args.alone else [])
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"{transport}: failed: {done.stderr.strip().splitlines()[-1:]}")
            continue
        row = json.loads(done.stdout.strip().splitlines()[-1])
        shares = ", ".join(f"{k} {100 * v / row['wall_s']:.0f}%" for k, v in row["phases_s"].items())
        print(f"{row['transport']} on {row['device']} ({row['driver']}): {row['cases']} cases, wall "
              f"{row['wall_s']:.1f} s, median {row['median_ms']:.1f} ms, p90 {row['p90_ms']:.1f} ms per case")
        if args.jobs > 1:
            print(f"  {args.jobs} worker processes (per case: each result's own seconds; phases not split); "
                  f"case seconds {row['case_seconds']:.1f} ({100 * row['case_seconds'] / args.jobs / row['wall_s']:.0f}% "
                  f"of the workers' wall), heaviest chunks of {chunk_size(row['cases'], args.jobs)} " + ", ".join(
                      f"{c:.2f}" for c in row['heaviest_chunks']) + " s")
        elif args.alone:
            print(f"  main thread: {shares}; reference thread {row['reference_thread_s']:.1f} s")
        else:
            print(f"  overlapped (per case: each result's own seconds; phases not split, see --alone)")
        print(f"  statuses: {row['statuses']}")


if __name__ == "__main__":
    main()
