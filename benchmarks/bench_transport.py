"""Raw Vulkan against wgpu: host overhead per dispatch, and whole-graph replays per second (issue #24).

For each model case (from an artifacts folder or prepared here), each adapter and each transport, one delegate is
built without probes (ET-VK's own command stream; on raw Vulkan with ET-VK's own barriers) and replayed:

* **dispatches**: per replay (staging copies included);
* **replay ms**: median wall time of one replay (inputs staged, every dispatch encoded and submitted, outputs read);
* **replays/s**: 1000 / replay ms;
* **host µs/dispatch**: the graph's own host time per replay (resize, pickers, encoding, submission; GPU work is
  awaited only at the end) over its dispatches: the transport's overhead, mostly.

    python3 benchmarks/bench_transport.py --et-src TREE --load DIR [--cases REGEX] [--replays 50]
    python3 benchmarks/bench_transport.py --et-src TREE --module benchmarks/programs.py:deep_stack --recipe 4w
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_models import model_cases, prepared_models  # noqa: E402


def replay(model, ctx, route, et_src: Path, replays: int) -> dict:
    """Build each delegate of the first call once (no probes, exact barriers) and replay the first step."""
    from vkdiff.device.graph.delegate import DelegateGraph

    graph = DelegateGraph(ctx, model.delegate, route=route, tree=et_src, probe=False, exact=True, alias=True)
    inputs = model.steps[0]
    graph.execute(inputs)
    walls, hosts = [], []
    for _ in range(replays):
        tick = time.perf_counter()
        run = graph.execute(inputs)
        walls.append(time.perf_counter() - tick)
        hosts.append(sum(graph.graph.node_seconds.values()))
    dispatches = sum(1 for d in graph.graph.dispatches if not d.prepack and not d.skipped)
    wall = statistics.median(walls)
    return {"nodes": len(run.nodes), "dispatches": dispatches, "replay_ms": round(1e3 * wall, 2),
            "replays_per_s": round(1 / wall, 1),
            "host_us_per_dispatch": round(1e6 * statistics.median(hosts) / max(dispatches, 1), 1)}


def main(argv: list[str] | None = None) -> int:
    from vkdiff.device.transports.adapters import select
    from vkdiff.device.boundary import DeviceError
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.runtime.context import DeviceContext
    from vkdiff.device.runtime.routing import route_for

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--et-src", type=Path, required=True)
    parser.add_argument("--load", type=Path, help="prepared models (vkdiff run --save-artifacts)")
    parser.add_argument("--cases", default=None)
    parser.add_argument("--module", default=None)
    parser.add_argument("--recipe", default="4w")
    parser.add_argument("--replays", type=int, default=50)
    parser.add_argument("--transports", default="wgpu,vulkan")
    args = parser.parse_args(argv)
    chosen = args.transports.split(",")
    if len(chosen) > 1:  # each transport in a process of its own: lavapipe can corrupt the heap of one that mixes them
        for transport in chosen:
            subprocess.run([sys.executable, __file__, *(argv if argv is not None else sys.argv[1:]), "--transports",
                            transport], check=False)
        return 0
    models = prepared_models(model_cases(args.cases, args.module, args.recipe), args.load, args.cases)
    for transport in args.transports.split(","):
        for info, adapter in select(via=transport):
            ctx = DeviceContext(info, adapter, ShaderBuilder(args.et_src))
            route = route_for("native", info)
            for model in models:
                try:
                    found = replay(model, ctx, route, args.et_src, args.replays)
                except DeviceError as exc:
                    print(f"{transport:6} {info.slug:12} {model.case_id:60} not run: {str(exc)[:120]}", flush=True)
                    continue
                print(f"{transport:6} {info.slug:12} {model.case_id:60} " + " ".join(f"{k}={v}" for k, v in found.items()),
                      flush=True)
            del ctx
            gc.collect()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
