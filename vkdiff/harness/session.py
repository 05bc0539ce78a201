"""State of one pytest session of the vkdiff plugin: items, devices, result files, merging."""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import pytest

from vkdiff.cases.kernels import KernelCase, all_cases
from vkdiff.harness.expectations import annotate, counts_as_failure
from vkdiff.harness.status import Status
from vkdiff.harness.store import HOST, Result, ResultStore, load

if TYPE_CHECKING:
    from vkdiff.cases.models import ModelCase

NO_DEVICE = "none"


class VkdiffFailure(AssertionError):
    """A non-passing verdict, shown as its compact message instead of a traceback."""


class VkdiffItem(pytest.Item):
    """One case on one device (model cases: on the host)."""

    def __init__(self, *, case: KernelCase | ModelCase, device: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.case = case
        self.device = device
        self.add_marker("vkdiff_kernel" if isinstance(case, KernelCase) else "vkdiff_model")
        self.add_marker(f"device_{device.replace('-', '_')}")

    def runtest(self) -> None:
        from vkdiff.harness.plugin import SESSION_KEY

        session = self.config.stash[SESSION_KEY]
        results = self.config.hook.pytest_vkdiff_run_item(item=self, session=session)
        results = results if isinstance(results, list) else [results]
        session.record(results)
        apply_outcome(results)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, VkdiffFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, self.name


def failure_text(result: Result) -> str:
    """Compact failure message: verdict, where, numbers, tolerance, repro."""
    lines = [f"{result.status} {result.case}@{result.device} {result.variant}"]
    if result.shader:
        lines.append(f"shader: {result.shader}  dispatch: {result.dispatch}")
    if result.reason:
        lines.extend(result.reason.splitlines()[:6])
    m = result.metrics
    if m.get("max_abs") is not None:
        lines.append(f"max abs {m['max_abs']:.4g}  max rel {m['max_rel']:.4g}  SQNR {m['sqnr_db']} dB  "
                     f"worst index {m.get('worst_index')}  mismatches {m.get('mismatches')}/{m.get('total')}")
    if result.tolerance:
        lines.append("tolerance: " + ", ".join(f"{k}={v:g}" for k, v in result.tolerance.items()))
    if (result.expectation or {}).get("outcome") == "unexpected-pass":
        lines.append(f"UNEXPECTED PASS: expectation {result.expectation['id']} may be fixed upstream; update "
                     f"vkdiff/cases/expectations.yaml")
    if result.repro:
        lines.append(f"repro: {result.repro}")
    return "\n".join(lines)


def apply_outcome(results: Sequence[Result]) -> None:
    """Map statuses to pytest outcomes: failures fail, known bugs xfail, NOT_RUN/NOT_SUPPORTED skip."""
    __tracebackhide__ = True
    failing = [r for r in results if counts_as_failure(r)]
    if failing:
        raise VkdiffFailure("\n\n".join(failure_text(r) for r in failing))
    known = [r for r in results if (r.expectation or {}).get("outcome") == "known"]
    if known:
        pytest.xfail("; ".join(f"known {r.expectation['id']}: {r.status} {r.variant}" for r in known))
    if results and all(Status[r.status].is_skip() for r in results):
        pytest.skip(f"{results[0].status}: {results[0].reason}")


@dataclasses.dataclass
class Merged:
    path: Path
    count: int
    pages: list[Path]


class VkdiffSession:
    """Options, devices and result files of one process (controller or xdist worker)."""

    def __init__(self, config, *, results_dir: Path, is_worker: bool):
        opt = config.option
        self.config = config
        self.cases_pattern: str | None = opt.vkdiff_cases
        self.selectors: list[str] = list(opt.vkdiff_device)
        self.repeat: int = opt.vkdiff_repeat
        self.seed: int = opt.vkdiff_seed
        self.suite: str = opt.vkdiff_suite
        self.report_dir = Path(opt.vkdiff_report) if opt.vkdiff_report else None
        self.results_dir = results_dir
        self.is_worker = is_worker
        self.et_src = _resolve_et_src(opt.et_src)
        self.store = ResultStore(results_dir / f"results-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.jsonl")
        self._contexts: dict[str, Any] = {}
        self.merged: Merged | None = None
        self._last_prepared: tuple[str, Any] = ("", None)

    @classmethod
    def from_config(cls, config) -> "VkdiffSession":
        worker_input = getattr(config, "workerinput", None)
        if worker_input is not None and "vkdiff_results_dir" in worker_input:
            return cls(config, results_dir=Path(worker_input["vkdiff_results_dir"]), is_worker=True)
        opt = config.option
        base = Path(opt.vkdiff_report) / "results" if opt.vkdiff_report else Path(config.rootpath) / "vkdiff-results" / "pytest"
        if base.exists():
            shutil.rmtree(base)
        base.mkdir(parents=True, exist_ok=True)
        return cls(config, results_dir=base, is_worker=False)

    @functools.cached_property
    def adapters(self) -> list[tuple[Any, Any]]:
        from vkdiff.device.adapters import UnknownDeviceError, select

        try:
            return select(self.selectors)
        except UnknownDeviceError as exc:
            raise pytest.UsageError(str(exc)) from None

    def device_slugs(self) -> list[str]:
        return [info.slug for info, _ in self.adapters]

    def make_items(self, parent) -> list[VkdiffItem]:
        items = []
        if self.suite in ("all", "kernels"):
            slugs = self.device_slugs() or [NO_DEVICE]
            for case in all_cases(self.cases_pattern):
                items += [VkdiffItem.from_parent(parent, name=f"{case.id}@{slug}", nodeid=f"{case.id}@{slug}",
                                                 case=case, device=slug) for slug in slugs]
        if self.suite in ("all", "models"):
            from vkdiff.cases.models import all_model_cases

            items += [VkdiffItem.from_parent(parent, name=f"{case.id}@{HOST}", nodeid=f"{case.id}@{HOST}",
                                             case=case, device=HOST) for case in all_model_cases(self.cases_pattern)]
        return items

    def run(self, item: VkdiffItem) -> Result | list[Result]:
        """Default ``pytest_vkdiff_run_item``: kernel case on its device, or model case on the host."""
        if not isinstance(item.case, KernelCase):
            from vkdiff.harness.models import check_case

            return check_case(item.case, self._variants())
        from vkdiff.harness.kernels import not_run, run_case
        from vkdiff.harness.run import NO_ADAPTER, NO_TREE, repro_command

        if item.device == NO_DEVICE:
            return not_run(item.case, NO_DEVICE, NO_ADAPTER)
        if self.et_src is None:
            return not_run(item.case, item.device, NO_TREE, repro_command(item.case, item.device, None))
        return run_case(self._context(item.device), item.case, session_seed=self.seed, repeat=self.repeat,
                        prepared=self._prepared(item.case),
                        repro=repro_command(item.case, item.device, self.et_src))

    def _variants(self) -> frozenset[str] | None:
        if self.et_src is None:
            return None
        return self._shader_builder.variants()

    @functools.cached_property
    def _shader_builder(self):
        from vkdiff.device.build import ShaderBuilder

        return ShaderBuilder(self.et_src)

    def _context(self, slug: str):
        if slug not in self._contexts:
            from vkdiff.device.context import DeviceContext

            info, adapter = next((i, a) for i, a in self.adapters if i.slug == slug)
            self._contexts[slug] = DeviceContext(info, adapter, self._shader_builder)
        return self._contexts[slug]

    def _prepared(self, case: KernelCase):
        """Inputs and reference of the last data id, shared by its storage variants and devices in this process."""
        from vkdiff.harness.kernels import prepare_or_none

        if self._last_prepared[0] != case.data_id:
            self._last_prepared = (case.data_id, prepare_or_none(case, self.seed))
        return self._last_prepared[1]

    def record(self, results: Sequence[Result]) -> None:
        for result in results:
            annotate(result)
            self.store.append(result)

    def record_crash(self, nodeid: str, text: str) -> None:
        """The controller's record of an item whose worker crashed (the worker wrote nothing for it)."""
        from vkdiff.cases.models import all_model_cases

        name = nodeid.split("::")[-1]
        case_id, _, device = name.rpartition("@")
        known = {c.id: c for c in all_cases()} | {c.id: c for c in all_model_cases()}
        variant = getattr(known.get(case_id), "variant", "unknown")
        crash = Result(case=case_id, op=case_id.split("[")[0], variant=variant, device=device, flags=["crash"],
                       status=Status.ERROR.name, reason=text[:400] + (" … " + text[-400:] if len(text) > 800 else ""))
        ResultStore(self.results_dir / "results-controller.jsonl").append(crash)

    def merge(self) -> Merged | None:
        """All per-process files → ``results.jsonl`` (latest per (case, variant, device)), plus HTML reports."""
        files = sorted(self.results_dir.glob("results-*.jsonl"))
        latest: dict[tuple[str, str, str], Result] = {}
        for result in load(files):
            latest[(result.case, result.variant, result.device)] = result
        crashed = {(r.case, r.device) for r in latest.values() if "crash" in r.flags}
        merged = [r for r in latest.values() if "crash" in r.flags or (r.case, r.device) not in crashed]
        path = self.results_dir / "results.jsonl"
        with open(path, "w", encoding="utf-8") as handle:
            for result in merged:
                handle.write(result.to_json() + "\n")
        pages: list[Path] = []
        if self.report_dir is not None and merged:
            from vkdiff.reports import render_reports

            index = render_reports([path], self.report_dir)
            pages = list(getattr(index, "pages", []) or getattr(index, "files", []))
        return Merged(path=path, count=len(merged), pages=pages)


def _resolve_et_src(path: str | None) -> Path | None:
    from vkdiff.device.build import EtSourceError, resolve_et_src

    try:
        return resolve_et_src(path)
    except EtSourceError as exc:
        raise pytest.UsageError(str(exc)) from None


