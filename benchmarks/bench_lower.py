"""Time lowering a small model case: first (cold process), warm (same process, patterns memoised), cached (disk).

    python3 benchmarks/bench_lower.py [--cases REGEX]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from vkdiff.cases.catalog import all_model_cases
from vkdiff.capture import quiet_libraries
from vkdiff.lowering.lower import lower


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=r"^(llama_proj\[4w-vulkan\]|embedding\[emb4w-vulkan\]|tied_embed_first|"
                                           r"linear_asym)")
    args = parser.parse_args()
    os.environ["VKDIFF_CACHE_DIR"] = tempfile.mkdtemp(prefix="vkdiff-bench-lower-")
    for case in all_model_cases(args.cases):
        timings = {}
        with quiet_libraries():
            for label, use_cache in (("first", False), ("warm", False), ("cache-write", True), ("cached", True)):
                start = time.perf_counter()
                lowered = lower(case, use_cache=use_cache)
                timings[label] = time.perf_counter() - start
        print(f"{case.id:40s} first {timings['first']:6.2f} s  warm {timings['warm']:6.2f} s  "
              f"cached {timings['cached']:6.3f} s  (.pte {lowered.pte_size} B, cached={lowered.cached})")


if __name__ == "__main__":
    main()
