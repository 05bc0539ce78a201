"""State of one pytest session of the vkdiff plugin: items, the runner, result files, merging.

Configuring a session only reads options and computes paths. What touches the disk or
the network happens at session start (``start``: choose the ExecuTorch tree, clear the
results folder), and never under ``--collect-only``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import pytest

from vkdiff.cases.kernels import KernelCase, all_cases
from vkdiff.cases.sampling import sampled, sampled_models
from vkdiff.entry.options import parse_sample
from vkdiff.device.shaders.trees import TreeChoice
from vkdiff import store
from vkdiff.datamodel import CRASH_FLAG, REPAIRED_FLAG, Result, Status, merge
from vkdiff.verdicts.expectations import counts_as_failure
from vkdiff.harness.runner import NO_DEVICE, Runner, nothing_ran

if TYPE_CHECKING:
    from vkdiff.cases.model_case import ModelCase

SESSION_KEY = pytest.StashKey["VkdiffSession"]()
"""Where the session object lives on ``config.stash``."""


class VkdiffFailure(AssertionError):
    """A non-passing verdict, shown as its compact message instead of a traceback."""


class VkdiffItem(pytest.Item):
    """One case on one device (model cases: host checks on ``cpu``, the delegate on each adapter)."""

    def __init__(self, *, case: KernelCase | ModelCase, device: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.case = case
        self.device = device
        self.add_marker("vkdiff_kernel" if isinstance(case, KernelCase) else "vkdiff_model")
        self.add_marker(f"device_{device.replace('-', '_')}")

    def runtest(self) -> None:
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
    lines = [f"{result.status} {result.case}@{result.device}" + (f" {result.rule}" if result.rule else "")]
    if result.shader:
        lines.append(f"shader: {result.shader}  dispatch: {result.dispatch}")
    if result.reason:
        lines.extend(result.reason.splitlines()[:6])
    m = result.metrics
    if m.get("max_abs") is not None:
        rel = f"{m['max_rel']:.4g}" if m.get("max_rel") is not None else "?"
        lines.append(f"max abs {m['max_abs']:.4g}  max rel {rel}  SQNR {m.get('sqnr_db')} dB  "
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
    """Map statuses to pytest outcomes: failures fail, known bugs xfail, NOT_RUN/NOT_SUPPORTED skip; an item whose
    checks partly did not run skips naming them (a pass never hides a check that did not run)."""
    __tracebackhide__ = True
    failing = [r for r in results if counts_as_failure(r)]
    if failing:
        raise VkdiffFailure("\n\n".join(failure_text(r) for r in failing))
    known = [r for r in results if (r.expectation or {}).get("outcome") == "known"]
    if known:
        pytest.xfail("; ".join(f"known {r.expectation['id']}: {r.status} {r.rule or r.variant}" for r in known))
    skipped = [r for r in results if Status[r.status].is_skip()]
    if results and len(skipped) == len(results):
        pytest.skip(f"{results[0].status}: {results[0].reason}")
    if skipped:
        named = "; ".join(f"{r.rule or r.variant} {r.status}: {r.reason.splitlines()[0] if r.reason else ''}"
                          for r in skipped)
        pytest.skip(f"{len(skipped)} of {len(results)} checks did not run ({named}); the other "
                    f"{len(results) - len(skipped)} passed")


@dataclasses.dataclass(kw_only=True)
class MergeSummary:
    """What the controller wrote at the end of the session."""

    path: Path
    """The merged results file."""
    count: int
    """Results in it (one per key)."""
    pages: list[Path]
    """HTML pages rendered, when ``--vkdiff-report`` was given."""
    unreadable: str = ""
    """What could not be read from the per-process files (``LoadReport.summary``), empty when all was."""
    nothing_ran: str | None = None
    """The warning when, with an adapter and a tree, no kernel case ran."""
    repaired: int = 0
    """Results that used a cache entry repaired during the session."""


def _ini_sample(config) -> int:
    try:
        return parse_sample(config.getini("vkdiff_sample"))
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option vkdiff_sample: {exc}") from None


def settings_or_usage_error(options: dict[str, Any]):
    """The session's run settings from pytest's options (``--vkdiff-*``) over the environment; one line when a
    variable holds no setting."""
    from vkdiff.datamodel.settings import SettingsError
    from vkdiff.entry.options import run_settings

    try:
        return run_settings(options, prefix="vkdiff_")
    except SettingsError as exc:
        raise pytest.UsageError(str(exc)) from None


class VkdiffSession:
    """Options, devices and result files of one process (controller or xdist worker)."""

    def __init__(self, config, *, results_dir: Path, is_worker: bool, tree: TreeChoice | None = None):
        opt = config.option
        self.config = config
        self.cases_pattern: str | None = opt.vkdiff_cases
        self.selectors: list[str] = list(opt.vkdiff_device)
        self.settings = settings_or_usage_error(vars(opt))
        self.seed: int = self.settings.seed
        self.sample: int = opt.vkdiff_sample if opt.vkdiff_sample is not None else _ini_sample(config)
        self.suite: str = opt.vkdiff_suite
        self.et_src: str | None = opt.et_src
        self.allow_empty: bool = opt.vkdiff_allow_empty
        self.report_dir = Path(opt.vkdiff_report) if opt.vkdiff_report else None
        self.results_dir = results_dir
        self.is_worker = is_worker
        self.tree = tree
        self.merged: MergeSummary | None = None

    @classmethod
    def from_config(cls, config) -> "VkdiffSession":
        """The session of this process; workers take the results folder and the tree from their controller."""
        worker_input = getattr(config, "workerinput", None)
        if worker_input is not None and "vkdiff_results_dir" in worker_input:
            tree = TreeChoice(path=Path(worker_input["vkdiff_tree"]) if worker_input["vkdiff_tree"] else None,
                              note=worker_input["vkdiff_tree_note"])
            return cls(config, results_dir=Path(worker_input["vkdiff_results_dir"]), is_worker=True, tree=tree)
        opt = config.option
        base = (Path(opt.vkdiff_report) / "results" if opt.vkdiff_report
                else Path(config.rootpath) / "vkdiff-results" / "pytest")
        return cls(config, results_dir=base, is_worker=False)

    def start(self) -> None:
        """Controller, at session start: check the outputs, choose the tree once for every worker, then drop the
        previous session's result files (only those: other files in the folder are left alone).

        Raises:
            pytest.UsageError: ``--et-src`` names no usable tree.
        """
        from vkdiff.device.shaders.trees import EtSourceError, choose_tree
        from vkdiff.datamodel import CacheUnwritableError, ensure_cache_writable
        from vkdiff.entry.options import output_problem, route_transport_problem

        problem = output_problem(self.results_dir, "--vkdiff-report" if self.report_dir else "results folder",
                                 folder=True) or route_transport_problem(self.settings)
        if problem:
            raise pytest.UsageError(problem)
        try:
            ensure_cache_writable()
            self.tree = choose_tree(self.et_src)
        except (CacheUnwritableError, EtSourceError) as exc:
            raise pytest.UsageError(str(exc)) from None
        self.results_dir.mkdir(parents=True, exist_ok=True)
        for earlier in self.results_dir.glob("results*.jsonl"):
            earlier.unlink()

    def worker_input(self) -> dict[str, str]:
        """What an xdist worker needs from its controller."""
        tree = self.tree or TreeChoice(path=None, note="the controller chose no tree")
        return {"vkdiff_results_dir": str(self.results_dir), "vkdiff_tree": str(tree.path or ""),
                "vkdiff_tree_note": tree.note}

    @functools.cached_property
    def store(self) -> store.ResultStore:
        return store.ResultStore(self.results_dir / f"results-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.jsonl")

    @functools.cached_property
    def adapters(self) -> list[tuple[Any, Any]]:
        from vkdiff.device.transports.adapters import NoAdapterError, UnknownDeviceError, select

        try:
            return select(self.selectors, via=self.settings.transport, validate=self.settings.validate,
                          profile=self.settings.device_profile)
        except (NoAdapterError, UnknownDeviceError) as exc:
            raise pytest.UsageError(str(exc)) from None

    @functools.cached_property
    def runner(self) -> Runner:
        tree = self.tree or TreeChoice(path=None, note="no ExecuTorch tree was chosen for this session")
        return Runner(tree=tree, adapters=self.adapters, settings=self.settings, et_src=self.et_src)

    def device_slugs(self) -> list[str]:
        return [info.slug for info, _ in self.adapters]

    def user_cases(self) -> list:
        """The cases every ``pytest_vkdiff_cases`` hook returns, in hook order (matching ``--vkdiff-cases``)."""
        import re

        from vkdiff.subjects.programs import SubjectError

        try:
            found = [case for answer in self.config.hook.pytest_vkdiff_cases(config=self.config) or []
                     for case in (answer or [])]
        except SubjectError as exc:
            raise pytest.UsageError(f"pytest_vkdiff_cases: {exc}") from None
        return [c for c in found if not self.cases_pattern or re.search(self.cases_pattern, c.id)]

    def _item(self, parent, case, device: str) -> VkdiffItem:
        return VkdiffItem.from_parent(parent, name=f"{case.id}@{device}", nodeid=f"{case.id}@{device}", case=case,
                                      device=device)

    def make_items(self, parent) -> list[VkdiffItem]:
        items = [self._item(parent, case, device) for case in self.user_cases()
                 for device in self.runner.devices_for(case)] if self.suite in ("all", "user") else []
        if self.suite in ("all", "kernels"):
            slugs = self.device_slugs() or [NO_DEVICE]
            for case in sampled(all_cases(self.cases_pattern), minimum=self.sample, seed=self.seed):
                items += [VkdiffItem.from_parent(parent, name=f"{case.id}@{slug}", nodeid=f"{case.id}@{slug}",
                                                 case=case, device=slug) for slug in slugs]
        if self.suite in ("all", "models"):
            from vkdiff.cases.catalog import all_model_cases

            for case in sampled_models(all_model_cases(self.cases_pattern), minimum=self.sample, seed=self.seed):
                items += [VkdiffItem.from_parent(parent, name=f"{case.id}@{device}", nodeid=f"{case.id}@{device}",
                                                 case=case, device=device) for device in self.runner.devices_for(case)]
        return items

    def run(self, item: VkdiffItem) -> list[Result]:
        """Default ``pytest_vkdiff_run_item``: the runner on the item's case and device."""
        return self.runner.run(item.case, item.device)

    def record(self, results: Sequence[Result]) -> None:
        for result in results:
            self.store.append(result)

    def record_crash(self, nodeid: str, text: str) -> None:
        """The controller's record of an item whose worker crashed (the worker wrote nothing for it)."""
        case_id, _, device = nodeid.split("::")[-1].rpartition("@")
        crash = Result(case=case_id, op=case_id.split("[")[0], device=device, flags=[CRASH_FLAG],
                       status=Status.ERROR.name, reason=text)
        store.ResultStore(self.results_dir / "results-controller.jsonl").append(crash)

    def merge(self) -> MergeSummary:
        """All per-process files → ``results.jsonl`` (one verdict per key, ``merge``), plus HTML reports."""
        files = sorted(self.results_dir.glob("results-*.jsonl"))
        report = store.read(files)
        merged = [group[-1] for group in merge(report.results)]
        path = self.results_dir / "results.jsonl"
        store.write(path, merged)
        pages: list[Path] = []
        if self.report_dir is not None and merged:
            from vkdiff.entry.terminal import coverage_document
            from vkdiff.reports import render_reports

            tree = self.tree.path if self.tree is not None else None
            pages = render_reports([path], self.report_dir,
                                   coverage_document(tree, [path]) if tree is not None else None).files
        return MergeSummary(path=path, count=len(merged), pages=pages, unreadable=report.summary(),
                            nothing_ran=nothing_ran(merged, self.tree or TreeChoice(path=None, note=""), self.adapters),
                            repaired=sum(REPAIRED_FLAG in r.flags for r in merged))
