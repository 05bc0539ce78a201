"""The Python API: check a program or a module from a notebook or a script, declare cases for the pytest plugin.

Example::

    import vkdiff

    report = vkdiff.check("encoder.pte", etrecord="encoder.etrecord", et_src="~/src/executorch")
    print(report.summary())
    bad = report.first_bad("llvmpipe")   # the first diverging node: delegate, index, op, source
    report.render("report/")             # the HTML pages

``module_case`` and ``program_cases`` build the cases a ``pytest_vkdiff_cases`` hook returns.
"""

from __future__ import annotations

import dataclasses
import datetime
from pathlib import Path
from typing import Any, Callable, Sequence

from vkdiff.datamodel import Result, Status, Tolerance
from vkdiff.cases.program_case import ProgramCase
from vkdiff.subjects.programs import CheckOptions, SubjectError


def _tolerance(atol: float | None, rtol: float | None) -> Tolerance | None:
    return None if atol is None and rtol is None else Tolerance(atol=atol or 0.0, rtol=rtol or 0.0)


def module_case(factory: str | Callable[[], Any], *, recipe: str, partitioner: str = "vulkan",
                name: str | None = None, atol: float | None = None, rtol: float | None = None):
    """A user's module as a model case (lowered through the full stack like the catalogue's).

    Args:
        factory (str | Callable): ``path.py:function`` or the function; it returns
            ``(module, example_inputs[, dynamic_shapes])``.
        recipe (str): ``fp32``, ``4w``, ``8da4w``, ``8da4w-fp32zp``, ``emb4w``, ``pt2e-...``.
        partitioner (str): ``vulkan`` (default), ``vulkan-fp16``...
        name (str | None): the case name (default ``<file stem>.<function>``).
        atol, rtol (float | None): the model-output tolerance against eager (default: vkdiff's policy).

    Raises:
        SubjectError: an unknown recipe or partitioner, or the factory failed (one line).
    """
    from vkdiff.subjects.programs import module_case as make

    return make(factory, recipe, partitioner, name=name, tolerance=_tolerance(atol, rtol))


def program_cases(path: str | Path, *, method: str | None = None,
                  inputs: str | Path | Sequence[str | Path] | None = None,
                  shapes: Sequence[Sequence[Sequence[int]]] = (), int_range: tuple[int, int] | None = None,
                  seed: int = 0, atol: float | None = None, rtol: float | None = None,
                  etrecord: str | Path | None = None) -> list[ProgramCase]:
    """One case per method of a ``.pte`` with a Vulkan delegate (or ``method``), with the options of
    ``vkdiff check``.

    Raises:
        SubjectError: the program, its inputs or its ETRecord cannot be used (one line).
    """
    from vkdiff.subjects.programs import pte_cases

    files = () if inputs is None else (inputs,) if isinstance(inputs, (str, Path)) else tuple(inputs)
    options = CheckOptions(method=method, inputs=tuple(Path(f) for f in files), shapes=shapes,
                           int_range=int_range, seed=seed, atol=atol, rtol=rtol,
                           etrecord=Path(etrecord) if etrecord else None)
    return pte_cases(Path(path), options, ("vkdiff", "check", str(path)))


@dataclasses.dataclass(kw_only=True)
class CheckReport:
    """What ``check`` found: every result, the first bad node per device, HTML pages on demand."""

    results: list[Result]
    results_path: Path

    @property
    def ok(self) -> bool:
        """Every result passed or is a known upstream bug, and at least one device result ran."""
        from vkdiff.verdicts.expectations import counts_as_failure

        ran = [r for r in self.results if r.rule == "device" and not Status[r.status].is_skip()]
        return bool(ran) and not any(counts_as_failure(r) for r in self.results)

    def by_device(self) -> dict[str, list[Result]]:
        out: dict[str, list[Result]] = {}
        for result in self.results:
            out.setdefault(result.device, []).append(result)
        return out

    def first_bad(self, device: str | None = None) -> dict[str, Any] | None:
        """The first diverging node of the first failing device result (on ``device`` when given): its
        ``delegate``, ``index``, ``op``, ``source`` and ``status``."""
        for result in self.results:
            if result.rule == "device" and (device is None or result.device == device) and result.node and \
                    result.verdict.is_failure():
                return {**result.node, "status": result.status, "device": result.device, "case": result.case}
        return None

    def summary(self) -> str:
        lines = []
        for device, results in self.by_device().items():
            counts: dict[str, int] = {}
            for result in results:
                counts[result.status] = counts.get(result.status, 0) + 1
            lines.append(f"{device}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        return "\n".join(lines)

    def render(self, folder: str | Path) -> Path:
        """Write the per-device HTML pages into ``folder``; the index page."""
        from vkdiff.reports import render_reports

        return render_reports([self.results_path], Path(folder)).index


def check(subject: str | Path | Callable[[], Any], *, recipe: str | None = None, partitioner: str = "vulkan",
          devices: Sequence[str] = (), et_src: str | None = None, route: str = "native",
          limits_profile: str | None = None, results: str | Path | None = None, repeat: int = 1,
          **options: Any) -> CheckReport:
    """Check a ``.pte`` (or a module factory with ``recipe``) on every selected Vulkan adapter, node by node.

    ``options`` are ``program_cases``' (``method``, ``inputs``, ``shapes``, ``int_range``, ``seed``,
    ``atol``, ``rtol``, ``etrecord``).

    Raises:
        SubjectError: the subject or an option cannot be used (one line).
    """
    from vkdiff.datamodel.settings import RunSettings
    from vkdiff.device.transports.adapters import select
    from vkdiff.device.shaders.trees import choose_tree
    from vkdiff.harness.loop import run_cases
    from vkdiff.harness.runner import Runner
    from vkdiff.store import ResultStore

    if recipe is not None or callable(subject):
        if recipe is None:
            raise SubjectError(f"{subject}: a module needs recipe= (fp32, 4w, 8da4w, ...)")
        from vkdiff.harness.models import check_case
        from vkdiff.subjects.programs import module_cases

        case = module_case(subject, recipe=recipe, partitioner=partitioner, atol=options.get("atol"),
                           rtol=options.get("rtol"))
        cases, _ = module_cases(case, CheckOptions(**{k: v for k, v in options.items() if k in ("shapes", "seed")}),
                                ("vkdiff", "check", str(subject)))
    else:
        from vkdiff.subjects.programs import read_schemas_from

        tree = choose_tree(et_src)
        if tree.path is not None:
            read_schemas_from(tree.path)
        case, cases = None, program_cases(subject, **options)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = Path(results or f"vkdiff-results/check-{stamp}.jsonl")
    settings = RunSettings.from_environment(seed=options.get("seed", 0), repeat=repeat, route=route,
                                            limits_profile=limits_profile)
    adapters = select(list(devices), via=settings.transport, validate=settings.validate,
                      profile=settings.device_profile)
    runner = Runner(tree=choose_tree(et_src), adapters=adapters, settings=settings, et_src=et_src)
    host = check_case(case, runner.shader_variants()) if case is not None else []
    found = run_cases(cases, host, runner, ResultStore(path))
    return CheckReport(results=found, results_path=path)
