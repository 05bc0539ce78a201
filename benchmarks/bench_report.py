"""Time HTML report rendering for synthetic results (default: 1,000 results on 2 devices).

The results mix every status, carry ``error_hist`` on every numeric result and
``error_map`` on numeric failures, include duplicates from a rerun and a few
known upstream bugs (``expectation``), so every page section is exercised.

    python3 benchmarks/bench_report.py [--results 1000] [--devices 2] [--out DIR] [--repeats 1]

The results are written to one JSON-lines file per device (as CI runners do) and
``render_reports`` loads, merges and renders them. Prints the seconds of each
render, loading included (importing jinja2/matplotlib included in the first).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vkdiff.store import Result  # noqa: E402

HIST_EDGES = [float(e) for e in range(-8, 5)]
VARIANTS = ("fp32-buffer", "fp32-texture3d", "fp16-buffer", "fp16-texture3d")
OPS = ("linear_q4gsw", "linear_dq8ca_q4gsw", "embedding_q4gsw")
DEVICES = {
    "adreno-740": {"name": "Adreno (TM) 740", "vendor": "Qualcomm", "vendor_id": 0x5143,
                   "driver": "Qualcomm 512.744.6", "adapter_type": "IntegratedGPU"},
    "mali-g715": {"name": "Mali-G715", "vendor": "ARM", "vendor_id": 0x13B5, "driver": "r44p0",
                  "adapter_type": "IntegratedGPU"},
    "llvmpipe": {"name": "llvmpipe (LLVM 15.0.6, 256 bits)", "vendor": "llvmpipe", "vendor_id": 0x10005,
                 "driver": "Mesa 22.3.6 (LLVM 15.0.6)", "adapter_type": "CPU"},
    "nvidia-h200": {"name": "NVIDIA H200", "vendor": "NVIDIA", "vendor_id": 0x10DE, "driver": "580.159.04",
                    "adapter_type": "DiscreteGPU"},
}
# (status, weight); numeric failures get metrics, error_hist and error_map
STATUS_MIX = (("PASS", 0.70), ("FAIL_NUMERIC", 0.09), ("FAIL_NAN", 0.03), ("NONDETERMINISTIC", 0.02),
              ("FAIL_CHECK", 0.01), ("DTYPE_MISMATCH", 0.01), ("BUILD_FAIL", 0.02), ("ERROR", 0.01),
              ("NOT_SUPPORTED", 0.08), ("NOT_RUN", 0.03))
REASONS = {
    "NOT_SUPPORTED": "naga: Shader validation error: 8-bit storage buffers are not supported (int8 staging)",
    "NOT_RUN": "no ExecuTorch source tree: pass --et-src or set VKDIFF_ET_SRC",
    "BUILD_FAIL": "glslc: error: 'dotPacked4x8AccSatEXT' : no matching overloaded function found " + "x" * 500
                  + " (compilation terminated)",
    "ERROR": "Traceback (most recent call last):\n  File \"vkdiff/harness/kernels.py\", line 212\n"
             "KeyError: 'weight_sums'",
    "FAIL_CHECK": "Unwritten elements: 40 / 520",
    "DTYPE_MISMATCH": "binding 2: shader expects rgba16f, tensor allocated as float32",
    "NONDETERMINISTIC": "2 of 3 repeat runs differ bitwise (max |Δ| 3.1e-05)",
}


def _case_ids(n_cases: int, rng: np.random.Generator) -> list[tuple[str, str, str, dict[str, int]]]:
    """(case id, op, variant, sizes), deterministic shapes in ET-VK style."""
    out, seen = [], set()
    while len(out) < n_cases:
        op = OPS[int(rng.integers(len(OPS)))]
        m, k = int(rng.choice([1, 4, 13, 64])), int(rng.choice([64, 256, 4096]))
        n, g = int(rng.choice([40, 64, 4096])), int(rng.choice([32, 64, 128]))
        for variant in VARIANTS:
            case = f"{op}[M{m}-K{k}-N{n}-g{g}-{variant}]"
            if case not in seen and len(out) < n_cases:
                seen.add(case)
                out.append((case, op, variant, {"M": m, "K": k, "N": n, "g": g}))
    return out


def _error_map(rng: np.random.Generator, pattern: int, rows: int, cols: int) -> list[list[float]]:
    grid = rng.uniform(0.01, 0.4, size=(rows, cols))
    if pattern == 0:  # last tile garbage
        grid[:, -max(1, cols // 8):] = rng.uniform(10, 3000, size=(rows, max(1, cols // 8)))
    elif pattern == 1:  # every 4th column
        grid[:, ::4] = rng.uniform(1.5, 40, size=grid[:, ::4].shape)
    elif pattern == 2:  # a row band
        grid[rows // 2: rows // 2 + max(1, rows // 6), :] = 200.0
    else:  # sparse single elements, some non-finite
        for _ in range(4):
            grid[int(rng.integers(rows)), int(rng.integers(cols))] = float(rng.choice([3.0, 1e30]))
    return [[float(v) for v in row] for row in grid]


def _hist(rng: np.random.Generator, total: int, failing: bool) -> dict:
    weights = np.exp(-0.5 * ((np.arange(12) - 5.5) / 1.3) ** 2)
    if failing:
        weights[8:] += rng.uniform(0.05, 0.6)
    else:
        weights[8:] = 0
    counts = rng.multinomial(int(total * 0.9), weights / weights.sum())
    return {"edges": HIST_EDGES, "counts": [int(c) for c in counts], "exact": int(total - counts.sum())}


def synthesise(n_results: int = 1000, n_devices: int = 2, seed: int = 0, *,
               devices: list[str] | None = None, cases: list[tuple[str, str, str, dict]] | None = None,
               duplicates: int = 10, known: int = 4) -> list[Result]:
    """Synthetic results: ``n_results`` spread over devices (plus ``duplicates`` earlier reruns)."""
    rng = np.random.default_rng(seed)
    devices = devices or list(DEVICES)[:n_devices]
    cases = cases or _case_ids(n_results // len(devices), rng)
    names, weights = zip(*STATUS_MIX)
    probs = np.array(weights) / sum(weights)
    base = datetime.datetime(2026, 11, 26, 2, 0, tzinfo=datetime.timezone.utc)
    results: list[Result] = []
    for i, (case, op, variant, sizes) in enumerate(cases):
        common = names[int(rng.choice(len(names), p=probs))]
        for d, device in enumerate(devices):
            # mostly the same verdict everywhere; sometimes one device differs (the driver-specific bug)
            status = common if rng.random() > 0.12 or d == 0 else str(rng.choice(["FAIL_NUMERIC", "FAIL_NAN", "PASS"]))
            total = int(rng.choice([40, 520, 2560, 16384]))
            metrics: dict = {"total": total, "mismatches": 0, "nan_count": 0, "inf_count": 0, "unwritten": 0,
                             "worst_index": None, "first_mismatches": [], "shape_mismatch": ""}
            fp16 = variant.startswith("fp16")
            if status in ("PASS", "FAIL_NUMERIC", "FAIL_NAN", "NONDETERMINISTIC", "FAIL_CHECK"):
                sqnr = float(rng.normal(62 if fp16 else 130, 6))
                failing = status != "PASS"
                if failing:
                    sqnr = float(rng.uniform(-5, 35))
                    metrics["mismatches"] = int(rng.integers(1, total))
                    metrics["worst_index"] = [int(rng.integers(13)), int(rng.integers(40))]
                    metrics["first_mismatches"] = [[0, int(j)] for j in range(min(5, metrics["mismatches"]))]
                    metrics["error_map"] = _error_map(rng, i % 4, int(rng.choice([1, 13, 32])), 32)
                if status == "FAIL_NAN":
                    metrics["nan_count"] = int(rng.integers(1, 50))
                if status == "FAIL_CHECK":
                    metrics["unwritten"] = 40
                metrics.update(max_abs=float(10 ** rng.uniform(-7, 1)), max_rel=float(10 ** rng.uniform(-6, 2)),
                               sqnr_db="inf" if (not failing and not fp16 and rng.random() < 0.05) else sqnr,
                               error_hist=_hist(rng, total, failing))
            else:
                metrics = {}
            info = {"slug": device, "backend": "Vulkan", "features": ["immediates", "shader-f16", "subgroup"],
                    "limits": {"max-buffer-size": 2147483647, "max-compute-invocations-per-workgroup": 1024},
                    **DEVICES.get(device, {"name": device})}
            result = Result(
                case=case, op=op, variant=variant, shape=sizes, knobs=dict(zip(("dtype", "storage"), variant.split("-"))),
                device=device, status=status,
                reason=REASONS.get(status, "") if status not in ("PASS", "FAIL_NUMERIC", "FAIL_NAN") else
                ("" if status == "PASS" else f"Mismatched elements: {metrics['mismatches']} / {total}"),
                shader=f"{op}_tiled_{variant.split('-')[1]}_texture2d_{'half' if fp16 else 'float'}",
                shaders=["pack_q4_linear_weight_texture2d", f"{op}_tiled_{variant.split('-')[1]}_texture2d"],
                metrics=metrics,
                tolerance={"atol": 1e-3 if fp16 else 1e-6, "rtol": 2 ** -10 if fp16 else 1e-5, "acc": 4.0,
                           "eps": 0.0009765625 if fp16 else 1.1920928955078125e-07},
                flags=["polyfilled"] if op == "linear_dq8ca_q4gsw" else [],
                dispatch={"global": [5, 1, 1], "local": [1, 1, 64], "spec": {"3": 0, "4": 8}},
                seed=int(rng.integers(2**32)),
                repro=f"vkdiff run --suite kernels --cases '^{case.replace('[', chr(92) + '[').replace(']', chr(92) + ']')}$' "
                      f"--device {device} --et-src ~/src/executorch",
                versions={"vkdiff": "0.1.0", "executorch": "1.5.1", "wgpu": "0.32.0"},
                device_info=info, seconds=float(rng.uniform(0.05, 3)),
                time=(base + datetime.timedelta(seconds=10 * i + d)).isoformat(timespec="seconds"))
            if known and status in ("FAIL_NUMERIC", "FAIL_NAN") and rng.random() < 0.3:
                known -= 1
                result.expectation = {"id": f"ETVK-{1000 + i}", "link": "https://github.com/pytorch/executorch/issues/1",
                                      "reason": "fp16 accumulation overflow in tiled linear (upstream)"}
            results.append(result)
    # earlier runs of some cases (a CI rerun): superseded by the later result above
    for r in list(results[:: max(1, len(results) // max(duplicates, 1))])[:duplicates]:
        earlier = Result.from_dict({**r.__dict__, "status": "FAIL_NUMERIC" if r.status == "PASS" else r.status,
                                    "time": (base - datetime.timedelta(hours=1)).isoformat(timespec="seconds")})
        results.append(earlier)
    return results


def write_runner_files(results: list[Result], folder: Path) -> list[Path]:
    """One JSON-lines file per device, as the runners of a CI matrix write them."""
    folder.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for r in results:
        path = paths.setdefault(r.device, folder / f"{r.device}.jsonl")
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(r.to_json() + "\n")
    return list(paths.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=1000, help="Results to synthesise (before duplicates)")
    parser.add_argument("--devices", type=int, default=2, help="Devices (at most 4)")
    parser.add_argument("--out", default=None, help="Keep the pages in this folder")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vkdiff-bench-report-"))
    paths = write_runner_files(synthesise(args.results, args.devices), work / "results")
    out = Path(args.out) if args.out else work / "report"
    for i in range(args.repeats):
        start = time.perf_counter()
        from vkdiff.reports import render_reports

        index = render_reports(paths, out)
        seconds = time.perf_counter() - start
        print(f"render {index.results + index.duplicates} results from {len(paths)} files ({index.results} kept, "
              f"{index.duplicates} duplicates, {len(index.devices)} devices) in {seconds:.2f} s"
              f"{' (incl. imports)' if i == 0 else ''} -> {out}")


if __name__ == "__main__":
    main()
