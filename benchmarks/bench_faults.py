"""Fault-detection power: the share of planted faults each quantized kernel family's verdict catches.

For every family and dtype, up to ``--cases`` suite cases whose clean run passes are
taken (seeded shuffle); ``--trials`` faults of each kind (``vkdiff.tools.planted``)
are planted round-robin over them, and each launch is judged twice: by the tolerance
policy alone (vkdiff before arithmetic models) and with the variant's declared
arithmetic (vkdiff now). Clean runs that fail under either policy are listed: on a
correct kernel they would be false failures.

    python3 benchmarks/bench_faults.py --et-src TREE [--device llvmpipe] [--trials 40] [--cases 12]
        [--families REGEX] [--json OUT]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import re
import time

import numpy as np

from vkdiff.cases.kernels import all_cases
from vkdiff.device.transports.adapters import select
from vkdiff.device.shaders.build import ShaderBuilder
from vkdiff.device.runtime.context import DeviceContext
from vkdiff.device.shaders.trees import resolve_et_src
from vkdiff.tools import planted

FAMILIES = ("linear_q4gsw", "linear_q4gsw_tiled", "linear_dq8ca_q4gsw", "embedding_q4gsw")
"""Case names of the quantized kernel families (``linear_q4gsw_tiled``: ``QuantizedLinear.cpp``'s path)."""
DTYPES = ("fp32", "fp16")


def candidates(family: str, dtype: str) -> list:
    """The family's suite cases of ``dtype``, in a seeded order (the same on every machine)."""
    cases = [c for c in all_cases(rf"^{family}\[") if c.name == family and c.dtype == dtype]
    order = np.random.default_rng(len(family) * 7919 + len(dtype)).permutation(len(cases))
    return [cases[i] for i in order]


def measure(ctx: DeviceContext, family: str, dtype: str, want: int, count: int) -> dict:
    """Clean statuses and trials of one family and dtype."""
    runs = list(planted.clean_runs(ctx, candidates(family, dtype), want))
    passing = [(case, prepared) for case, prepared, clean in runs
               if all(clean.statuses[p] == "PASS" for p in planted.POLICIES)]
    trials = [planted.run_trial(ctx, case, prepared, kind, trial)
              for kind in planted.KINDS for trial in range(count if passing else 0)
              for case, prepared in [passing[trial % len(passing)]]]
    trials = [t for t in trials if t is not None]
    return {"family": family, "dtype": dtype, "cases": [case.id for case, _ in passing],
            "clean": [dataclasses.asdict(clean) for _, _, clean in runs],
            "trials": [dataclasses.asdict(t) for t in trials]}


def table(rows: list[dict]) -> str:
    """Markdown: catch rate per family, dtype, kind and policy, with clean failures."""
    lines = ["| family | dtype | cases | " + " | ".join(f"{k} (tol → arith)" for k in planted.KINDS)
             + " | clean fails (tol / arith) | unmodelled |", "|---" * (5 + len(planted.KINDS)) + "|"]
    for row in rows:
        per = collections.defaultdict(lambda: collections.Counter())
        for t in row["trials"]:
            for policy in planted.POLICIES:
                per[t["kind"]][policy] += t["statuses"][policy] != "PASS"
            per[t["kind"]]["n"] += 1
        cells = []
        for kind in planted.KINDS:
            n = per[kind]["n"]
            cells.append(f"{per[kind]['tolerance']}/{n} → {per[kind]['arithmetic']}/{n}" if n else "–")
        ran = [c for c in row["clean"] if c["statuses"]["tolerance"] in ("PASS", "FAIL_NUMERIC", "FAIL_NAN",
                                                                           "FAIL_CHECK")]
        fails = [sum(c["statuses"][p] != "PASS" for c in ran) for p in planted.POLICIES]
        unmodelled = sum("unmodelled" in c["statuses"] for c in ran)
        lines.append(f"| {row['family']} | {row['dtype']} | {len(row['cases'])} | " + " | ".join(cells)
                     + f" | {fails[0]} / {fails[1]} of {len(ran)} | {unmodelled} of {len(ran)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--et-src", required=True, help="ExecuTorch tree: checkout, REPO@REV or tarball")
    parser.add_argument("--device", default="llvmpipe")
    parser.add_argument("--trials", type=int, default=40, help="Faults of each kind per family and dtype")
    parser.add_argument("--cases", type=int, default=12, help="Passing cases per family and dtype")
    parser.add_argument("--families", default=".", help="Regex over family names")
    parser.add_argument("--json", default=None, help="Write every clean run and trial here")
    args = parser.parse_args()
    info, adapter = select([args.device])[0]
    ctx = DeviceContext(info, adapter, ShaderBuilder(resolve_et_src(args.et_src)))
    print(f"{info.slug} ({info.driver}): {args.trials} trials per kind, up to {args.cases} passing cases", flush=True)
    rows = []
    for family in (f for f in FAMILIES if re.search(args.families, f)):
        for dtype in DTYPES:
            start = time.perf_counter()
            rows.append(measure(ctx, family, dtype, args.cases, args.trials))
            print(f"{family} {dtype}: {time.perf_counter() - start:.1f} s", flush=True)
    print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": info.slug, "driver": info.driver, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
