"""Time model cases on devices: the graph runtime's host overhead per node and one whole verdict, cold and warm.

For each default Vulkan model case (the tiny Llama generation cases included) and each adapter, reports:

* **cold verdict**: the first ``judge`` on a fresh device context (shader builds from the
  disk cache, pipeline creation, prepack, every node, probes, readback, comparison);
* **warm verdict**: the median of ``--repeat`` further verdicts on the same context
  (pipelines cached; prepack runs again, as a new graph is built per verdict);
* **host ms / node**: wall time spent adding each node's dispatches (tensor metadata,
  UBOs, bind groups, submits; GPU work is not awaited there), median over warm runs;
* **device run**: the delegate from staging in to readback out, without the comparison (the
  last call's, for generation cases);
* for generation cases (prefill + decode steps, a whole generation per verdict), **decode ms**:
  the median wall time of one decode step (resize, encode, submit, logits read back) on a graph
  built once without probes, as an app would run it, and **decode host ms/node**: the host
  time of that step per node (resize functions, pickers, encoding, submits).

``--module FILE.py:factory --recipe R`` adds a user's module (``benchmarks/programs.py:deep_stack``, 4-bit
weights: 201 nodes) to the catalogue's cases.

The full stack (torch, executorch) is needed only to prepare: ``--save DIR`` writes the
cases as artifacts (``.pte``, JSON and ``.npz``, as ``vkdiff run --save-artifacts`` does);
``--load DIR`` judges them on a machine with only numpy and wgpu, and ``--results FILE``
appends the verdicts as result records (the NVIDIA run of the closing note was made so).

    python3 benchmarks/bench_models.py --et-src TREE [--cases REGEX] [--module F.py:fn --recipe R]
                                       [--save DIR | --load DIR] [--route mali] [--limits-profile adreno-7xx]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path


def model_cases(pattern: str | None, module: str | None, recipe: str) -> list:
    """The catalogue's Vulkan model cases matching ``pattern`` (none when only ``module`` is asked), and ``module``."""
    from vkdiff.cases.catalog import all_model_cases
    from vkdiff.subjects.programs import module_case

    cases = [] if module and pattern is None else [c for c in all_model_cases(pattern)
                                                   if c.partitioner.startswith("vulkan")]
    return cases + ([module_case(module, recipe)] if module else [])


def prepared_models(cases: list, load: Path | None, pattern: str | None) -> list:
    """``PreparedProgram`` of each case from an artifacts folder, or prepared here (needs torch and executorch)."""
    if load is not None:
        from vkdiff.subjects.artifacts import load as load_artifacts

        return [a.model for a in load_artifacts(load, pattern) if not isinstance(a.model, tuple)]
    from vkdiff.harness.device_models import prepare_model

    prepared = [prepare_model(case) for case in cases]
    return [p for p in prepared if not isinstance(p, tuple)]


def decode_step(model, ctx, route, et_src: Path, repeat: int) -> tuple[float, float]:
    """Median (wall ms, host ms per node) of the decode steps of ``repeat`` generations on one probe-less graph."""
    from vkdiff.device.graph.delegate import DelegateGraph

    graph = DelegateGraph(ctx, model.delegate, route=route, tree=et_src, probe=False)
    walls, hosts = [], []
    for _ in range(repeat):
        for step, inputs in enumerate(model.steps):
            tick = time.perf_counter()
            run = graph.execute(inputs)
            if step:
                walls.append(1e3 * (time.perf_counter() - tick))
                hosts.append(1e3 * sum(n.host_seconds for n in run.nodes) / len(run.nodes))
    return statistics.median(walls), statistics.median(hosts)


def bench(models: list, et_src: Path, route: str, repeat: int, results: Path | None,
          limits_profile: str | None = None) -> None:
    from vkdiff.device.transports.adapters import select
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.runtime.context import DeviceContext
    from vkdiff.device.runtime.routing import route_for
    from vkdiff.datamodel import Result, versions
    from vkdiff.executors.program_runs import run_program
    from vkdiff.verdicts.program_runs import judge_program
    from vkdiff.verdicts.statuses import status_of_exception
    from vkdiff.store import ResultStore

    store = ResultStore(results) if results else None
    print(f"{'case':44s} {'device':14s} {'status':14s} {'nodes':>5s} {'cold s':>7s} {'warm ms':>8s} "
          f"{'run ms':>7s} {'host ms/node':>12s} {'decode ms':>9s} {'decode host ms/node':>19s}")
    for info, adapter in select([]):
        for model in models:
            ctx = DeviceContext(info, adapter, ShaderBuilder(et_src), limits_profile)
            chosen = route_for(route, ctx.info)
            start = time.perf_counter()
            ran = run_program(model, ctx, chosen, tree=et_src)
            if ran.error is not None:
                status, reason = status_of_exception(ran.error)
                print(f"{model.case_id:44s} {info.slug:14s} {status.name:14s} {reason[:80]}")
                continue
            status, fields = judge_program(model, ran)
            cold = time.perf_counter() - start
            warm, runs, host = [], [], []
            for _ in range(repeat):
                tick = time.perf_counter()
                _, again = judge_program(model, run_program(model, ctx, chosen, tree=et_src))
                warm.append(time.perf_counter() - tick)
                runs.append(again["metrics"]["seconds_device_run"])
                host.append(again["metrics"]["host_ms_per_node"])
            nodes = len(fields["metrics"]["nodes"])
            decode = "" if not model.generation else "{:9.1f} {:19.3f}".format(
                *decode_step(model, ctx, chosen, et_src, repeat))
            print(f"{model.case_id:44s} {info.slug:14s} {status.name:14s} {nodes:5d} {cold:7.2f} "
                  f"{1e3 * statistics.median(warm):8.1f} {1e3 * statistics.median(runs):7.1f} "
                  f"{statistics.median(host):12.3f} {decode}")
            if store is not None:
                store.append(Result(case=model.case_id, op=model.case_id.split("[")[0], device=info.slug,
                                    status=status.name, rule="device",
                                    knobs={"route": route, **({"limits": limits_profile} if limits_profile else {})},
                                    versions=versions(), device_info=ctx.info_dict, seconds=round(cold, 3),
                                    **fields))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--et-src", type=Path, help="extracted ExecuTorch tree (needed unless --save)")
    parser.add_argument("--cases", default=None, help="regex over case ids")
    parser.add_argument("--route", default="native")
    parser.add_argument("--limits-profile", default=None,
                        help="mobile limits profile (vkdiff/device/transports/limits.toml)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--module", default=None, help="also a module factory, FILE.py:function")
    parser.add_argument("--recipe", default="4w", help="recipe of --module")
    parser.add_argument("--save", type=Path, help="write prepared models here and stop")
    parser.add_argument("--load", type=Path, help="read prepared models from here (no torch needed)")
    parser.add_argument("--results", type=Path, help="append verdicts to this results file")
    args = parser.parse_args(argv)
    if args.save:
        from vkdiff.subjects.artifacts import save

        cases = model_cases(args.cases, args.module, args.recipe)
        for case in cases:
            save(case, args.save)
        print(f"saved {len(cases)} prepared models to {args.save}")
        return 0
    cases = [] if args.load else model_cases(args.cases, args.module, args.recipe)
    models = prepared_models(cases, args.load, args.cases)
    if args.et_src is None:
        parser.error("--et-src is needed to run (an extracted tree)")
    bench(models, args.et_src, args.route, args.repeat, args.results, args.limits_profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
