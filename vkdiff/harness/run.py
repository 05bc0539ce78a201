"""A run: every selected case on every selected device, results appended as they happen."""

from __future__ import annotations

import shlex
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from vkdiff.cases.kernels import KernelCase
from vkdiff.device.adapters import DeviceInfo
from vkdiff.device.build import ShaderBuilder
from vkdiff.device.context import DeviceContext
from vkdiff.harness.expectations import annotate
from vkdiff.harness.kernels import not_run, prepared_stream, run_case
from vkdiff.harness.store import Result, ResultStore

if TYPE_CHECKING:
    from vkdiff.cases.models import ModelCase

NO_TREE = "no ExecuTorch tree: pass --et-src PATH or set VKDIFF_ET_SRC to run ET-VK kernels"
NO_ADAPTER = "no Vulkan adapter found (install mesa-vulkan-drivers for lavapipe, or a GPU driver)"


def repro_command(case: KernelCase, device: str, et_src: Path | None) -> str:
    """The command that reruns exactly this case on this device."""
    parts = ["vkdiff", "run", "--cases", f"^{_escape(case.id)}$", "--device", device]
    if et_src is not None:
        parts += ["--et-src", str(et_src)]
    return shlex.join(parts)


def _escape(case_id: str) -> str:
    return case_id.replace("[", r"\[").replace("]", r"\]")


def run_cases(cases: Sequence[KernelCase], devices: Sequence[tuple[DeviceInfo, Any]], et_src: Path | None,
              store: ResultStore, *, seed: int = 0, repeat: int = 1,
              on_result: Callable[[Result], None] = lambda r: None) -> list[Result]:
    """Run ``cases`` on ``devices``; every result is appended to ``store`` before the next case starts."""
    results: list[Result] = []

    def emit(result: Result) -> None:
        annotate(result)
        store.append(result)
        results.append(result)
        on_result(result)

    if not devices:
        for case in cases:
            emit(not_run(case, "none", NO_ADAPTER))
        return results
    if et_src is None:
        for info, _ in devices:
            for case in cases:
                emit(not_run(case, info.slug, NO_TREE, repro_command(case, info.slug, None)))
        return results
    builder = ShaderBuilder(et_src)
    contexts = [DeviceContext(info, adapter, builder) for info, adapter in devices]
    for case, prepared in prepared_stream(cases, seed):
        for ctx in contexts:
            emit(run_case(ctx, case, session_seed=seed, repeat=repeat, prepared=prepared,
                          repro=repro_command(case, ctx.info.slug, et_src)))
    return results


def run_models(cases: Sequence[ModelCase], et_src: Path | None, store: ResultStore,
               on_result: Callable[[Result], None] = lambda r: None) -> list[Result]:
    """Lower each model case and check its rules on the host; results appended as they come."""
    from vkdiff.harness.models import check_case

    variants = ShaderBuilder(et_src).variants() if et_src is not None else None
    results = []
    for case in cases:
        for result in check_case(case, variants):
            annotate(result)
            store.append(result)
            results.append(result)
            on_result(result)
    return results


def summarize(results: Sequence[Result]) -> dict[str, Counter]:
    """Counts per status, per device; known bugs and unexpected passes counted apart."""
    table: dict[str, Counter] = {}
    for result in results:
        outcome = (result.expectation or {}).get("outcome")
        column = {"known": "KNOWN", "unexpected-pass": "UNEXPECTED_PASS"}.get(outcome, result.status)
        table.setdefault(result.device, Counter())[column] += 1
    return table
