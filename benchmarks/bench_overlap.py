"""Does reference computation ever hold the device idle? Run kernel cases as ``vkdiff run`` does and split time.

For the selected kernel cases on one adapter (references prepared on a thread, ahead of
the device loop, as ``Runner.schedule`` does) it prints the wall time, the time the
preparation thread computed references, the time the device loop waited for a reference
that was not ready (the device idle because of references), and the median verdict time
(``Result.seconds``: one case on the device, its below-the-bound runs included).

    python3 benchmarks/bench_overlap.py --et-src TREE [--cases REGEX] [--device SLUG] [--sample N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from vkdiff.cases.kernels import all_cases
from vkdiff.cases.sampling import sampled
from vkdiff.device.transports.adapters import select
from vkdiff.device.shaders.trees import choose_tree
from vkdiff.executors import references
from vkdiff.harness.runner import Runner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--et-src", required=True)
    parser.add_argument("--cases", default=None)
    parser.add_argument("--device", default=None)
    parser.add_argument("--sample", type=int, default=0)
    args = parser.parse_args()
    cases = sampled(all_cases(args.cases), minimum=args.sample)
    adapters = select([args.device] if args.device else [])[:1]
    runner = Runner(tree=choose_tree(args.et_src), adapters=adapters, seed=0, repeat=1, et_src=args.et_src)
    slug = runner.slugs[0]
    runner.run(cases[0], slug)  # device and pipelines up before timing
    runner.schedule(cases)
    references.OVERLAP.__init__()
    start = time.perf_counter()
    seconds = [result.seconds for case in cases for result in runner.run(case, slug)]
    wall = time.perf_counter() - start
    runner.close()
    o = references.OVERLAP
    print(f"{len(cases)} kernel cases on {slug}: wall {wall:.1f} s; references computed {o.preparing:.1f} s on the "
          f"preparation thread ({o.prepared} data ids); device loop waited {o.waited:.2f} s for references "
          f"({100 * o.waited / wall:.1f}% of the wall time); median verdict {1000 * statistics.median(seconds):.1f} ms")


if __name__ == "__main__":
    main()
