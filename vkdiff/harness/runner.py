"""One runner for ``vkdiff run``, the pytest plugin and bisect: ``Runner.run(case, device) -> results``.

A kernel case runs on a Vulkan adapter (by slug) with the ET-VK shaders of the run's
ExecuTorch tree; a model case is lowered and checked on the host (``cpu``) and, when
its partitioner is Vulkan, its delegate runs node by node on every adapter under the
run's routing profile (``--route``). Every
result carries the command that reruns just that case, and known upstream bugs are
attached (``expectations``) before anyone sees it. Devices, shader builds and pipelines
are opened once per runner; references are prepared once per data id, ahead of the
device when the caller says which cases come next (``schedule``).
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from vkdiff.cases.kernels import KernelCase
from vkdiff.device.transports.adapters import DeviceInfo
from vkdiff.device.shaders.trees import TreeChoice
from vkdiff.cases.program_case import ProgramCase
from vkdiff.datamodel.settings import RunSettings
from vkdiff.datamodel import (DEVICE_LOST_FLAG, HANG_FLAG, HOST, REPAIRED_FLAG, REPAIRS, Repair, Result,
                                      Status, bucket_of)
from vkdiff.verdicts.expectations import annotate

if TYPE_CHECKING:
    from concurrent.futures import Future

    from vkdiff.cases.model_case import ModelCase
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.runtime.context import DeviceContext
    from vkdiff.executors.isolate import DeviceWorker
    from vkdiff.executors.references import Prepared

NO_DEVICE = "none"
"""Device slug of kernel results when no Vulkan adapter exists."""
NO_ADAPTER = "no Vulkan adapter found (install mesa-vulkan-drivers for lavapipe, or a GPU driver)"
REGEX_SPECIAL = re.compile(r"[][(){}.*+?^$|\\]")
"""Characters of a case id that ``--cases`` (a regex) must see escaped."""


def repro_command(case: KernelCase | ModelCase, device: str, et_src: str | None,
                  settings: RunSettings = RunSettings()) -> str:
    """The command that reruns exactly this case on this device (``--et-src`` as the user gave it)."""
    kernel = isinstance(case, KernelCase)
    pattern = "^" + REGEX_SPECIAL.sub(lambda m: "\\" + m.group(0), case.id) + "$"
    parts = ["vkdiff", "run", "--suite", "kernels" if kernel else "models", "--cases", pattern]
    if getattr(case, "command", ()):
        parts = list(case.command)
    elif getattr(case, "source", ""):
        parts += ["--from-artifacts", case.source]
    if device not in (NO_DEVICE, HOST):
        parts += ["--device", device]
    if settings.transport != RunSettings.transport:
        parts += ["--transport", settings.transport]
    if settings.device_profile:
        parts += ["--device-profile", settings.device_profile]
    if settings.route != "native":
        parts += ["--route", settings.route]
    if settings.limits_profile:
        parts += ["--limits-profile", settings.limits_profile]
    if settings.mediump:
        parts += ["--mediump"]
    if settings.timeout is not None:
        parts += ["--timeout", f"{settings.timeout:g}"]
    if settings.repeat > 1:
        parts += ["--repeat", str(settings.repeat)]
    if et_src is not None:
        parts += ["--et-src", et_src]
    return shlex.join(parts)


ALONE = frozenset({Status.ERROR.name, Status.BUILD_FAIL.name, Status.FAIL_DRIVER.name, Status.NONDETERMINISTIC.name,
                   Status.FAIL_OOB.name, Status.FAIL_SYNC.name})
"""Statuses an overlapped case (``Runner.run_window``) is run again alone for: what raised (a build, a lost device:
one case's fault ends every case waiting with it), what other work on the device could sway (repeats, hazards), and
what a driver bug's repro is made for."""


def needs_alone(result: Result, wide: bool = False) -> bool:
    """Whether an overlapped result is replaced by the case run alone; ``wide``: a case of the window wrote outside
    its tensor, which may have reached another case's memory, so every failure of the window runs again."""
    return (result.status in ALONE or HANG_FLAG in result.flags or DEVICE_LOST_FLAG in result.flags
            or (wide and Status[result.status].is_failure()))


def nothing_ran(results: Sequence[Result], tree: TreeChoice, adapters: Sequence[Any]) -> str | None:
    """A warning when a tree was given yet no kernel case ran on a device, else None.

    A run that ends all ``NOT_RUN``/``NOT_SUPPORTED`` verified nothing: it must not look green, whether every
    case was skipped on the adapters or there was no adapter to run them on.
    """
    kernel = [r for r in results if r.device != HOST]
    if tree.path is None or not kernel or not all(Status[r.status].is_skip() for r in kernel):
        return None
    if not adapters:
        return (f"no kernel case ran: no Vulkan adapter was found although an ExecuTorch tree was given "
                f"({len(kernel)} results NOT_RUN; {NO_ADAPTER})")
    first = kernel[0].reason.splitlines()[0] if kernel[0].reason else "?"
    return (f"no kernel case ran: all {len(kernel)} kernel results are NOT_RUN or NOT_SUPPORTED although an adapter "
            f"and an ExecuTorch tree were given (first reason: {first})")


class Runner:
    """Runs cases on devices; never raises for a case (every failure is a status).

    Args:
        tree (TreeChoice): the run's ExecuTorch tree, or why it has none.
        adapters (Sequence[tuple[DeviceInfo, Any]]): the selected Vulkan adapters.
        settings (RunSettings): seed, repeats, routing and limits profiles, timeout (with one, device work runs in
            a child process per device, ``vkdiff.executors.isolate``: a longer wait ends the case ``ERROR``, hang),
            transport, validation, replays and local workgroup size.
        et_src (str | None): ``--et-src`` as given, for repro commands.
        repairs_from (int | None): index in the process's repair log from which ``new_repairs`` reports
            (the log's length before the tree was chosen); None: from now on.
        setup (Callable | None): module-level function device workers call first (extra ops of a test).
        on_driver_bug (Callable | None): ``fn(ctx, case=...)`` called for a ``FAIL_DRIVER`` kernel case (in the
            device's worker when cases run isolated); what it returns goes into ``metrics["driver_repro"]``
            (``vkdiff.repro.driver.write_driver_repro``: the case's repro folder and Amber script). None: nothing.
        opened (Mapping | None): slug → future of a device already being created (``resolve_inputs``), which the
            first case on it takes instead of creating one.
    """

    def __init__(self, *, tree: TreeChoice, adapters: Sequence[tuple[DeviceInfo, Any]],
                 settings: RunSettings = RunSettings(), et_src: str | None = None, repairs_from: int | None = None,
                 setup: Callable[[], None] | None = None,
                 on_driver_bug: Callable[..., dict[str, Any]] | None = None,
                 opened: Mapping[str, Future] | None = None):
        self.tree = tree
        self.on_driver_bug = on_driver_bug
        self.settings = settings
        self.timeout, self.route, self.limits_profile = settings.timeout, settings.route, settings.limits_profile
        self.seed, self.repeat = settings.seed, settings.repeat
        self.setup = setup
        self._workers: dict[str, DeviceWorker] = {}
        self.adapters = {info.slug: (info, adapter) for info, adapter in adapters}
        self.et_src = et_src
        self._builder: ShaderBuilder | None = None
        self._contexts: dict[str, DeviceContext] = {}
        self._opened = dict(opened or {})
        self._scheduled: set[str] = set()
        self._stream: Iterator[tuple[KernelCase, Prepared | None]] | None = None
        self._last: tuple[str, Prepared | None] = ("", None)
        self._repairs_reported = len(REPAIRS) if repairs_from is None else repairs_from

    @property
    def slugs(self) -> list[str]:
        return list(self.adapters)

    def devices_for(self, case: KernelCase | ModelCase) -> list[str]:
        """Where a case runs: every adapter (or ``none``) for kernel cases; the host, plus every adapter for
        Vulkan-partitioned model cases."""
        if isinstance(case, KernelCase):
            return self.slugs or [NO_DEVICE]
        if isinstance(case, ProgramCase):
            return self.slugs or [NO_DEVICE]
        return [HOST, *(self.slugs if case.partitioner.startswith("vulkan") else [])]

    def schedule(self, cases: Sequence[KernelCase]) -> None:
        """Prepare these kernel cases' references on a thread, in this order, ahead of ``run``."""
        from vkdiff.executors.references import prepared_stream

        self.close()
        if self.tree.path is not None and self.adapters:
            self._scheduled = {c.data_id for c in cases}
            self._stream = prepared_stream(cases, self.seed)

    def run(self, case: KernelCase | ModelCase, device: str) -> list[Result]:
        """Every result of ``case`` on ``device`` (one for a kernel case, one per rule for a model case).

        Results produced while a corrupt cache entry was repaired (or with a repaired tree) carry
        the flag ``cache-repaired``.
        """
        repro = repro_command(case, device, self.et_src, self.settings)
        repairs = len(REPAIRS)
        if isinstance(case, KernelCase):
            results = [self._run_kernel(case, device, repro)]
        elif isinstance(case, ProgramCase):
            results = [self._run_program(case, device, repro)]
        elif device != HOST:
            results = [self._run_model_on_device(case, device, repro)]
        else:
            from vkdiff.harness.models import check_case

            results = check_case(case, self.shader_variants(), repro=repro)
        return self._finish(results, device, repairs)

    def run_window(self, cases: Sequence[KernelCase]) -> list[Result]:
        """Every result of these kernel cases on their devices, case by case as ``run`` gives them: on each device
        several at a time, their waits for the device shared (``vkdiff.device.runtime.overlap``), where the run
        allows it (``overlaps``). A case the overlap ended ``ALONE`` runs again by itself, and that is its result."""
        devices = self.devices_for(cases[0]) if cases else []
        per_device = [self._overlapped(cases, device) if self.overlaps(device, cases) else
                      [self.run(case, device) for case in cases] for device in devices]
        return [result for index in range(len(cases)) for results in per_device for result in results[index]]

    def overlaps(self, device: str, cases: Sequence[KernelCase]) -> bool:
        """Whether ``cases`` run overlapped on ``device``: not when each case runs in a child process
        (``--timeout``), under a validation layer (whose reports name the submission they come in), or without
        greenlet."""
        from vkdiff.device.runtime.overlap import available

        return (len(cases) > 1 and self.timeout is None and not self.settings.validate and device in self.adapters
                and self.tree.path is not None and available())

    def _overlapped(self, cases: Sequence[KernelCase], device: str) -> list[list[Result]]:
        """Each case's results from one ``Overlap`` (its own seconds: host time and a share of each wait; a cache
        repair during the window flags every case that ran meanwhile), or from a run alone (``needs_alone``)."""
        from vkdiff.device.runtime.overlap import Overlap

        def task(case: KernelCase) -> list[Result]:
            repro = repro_command(case, device, self.et_src, self.settings)
            return self._finish([self._run_kernel(case, device, repro, driver_repro=False)], device, len(REPAIRS))

        outcomes = Overlap(self._context(device).device).run([lambda case=case: task(case) for case in cases])
        shared = [done.value[0] for done in outcomes if done.value]
        wide = any(r.status == Status.FAIL_OOB.name for r in shared)
        results = []
        for case, done in zip(cases, outcomes):
            result = done.value[0] if done.value else None
            if result is None or needs_alone(result, wide):
                results.append(self.run(case, device))
                continue
            result.seconds = round(done.seconds, 4)
            results.append([result])
        return results

    def _finish(self, results: list[Result], device: str, repairs: int) -> list[Result]:
        """Flags, bucket and known upstream bugs of a case's results (``repairs``: the repair log's length before)."""
        repaired = len(REPAIRS) > repairs or (device != HOST and self.tree.repaired and self.tree.path is not None)
        for result in results:
            if repaired:
                result.flags = [*result.flags, REPAIRED_FLAG]
            if DEVICE_LOST_FLAG in result.flags:
                self._contexts.pop(device, None)
            if result.verdict.is_failure():
                result.bucket = bucket_of(result)
            annotate(result)
        return results

    def new_repairs(self) -> list[Repair]:
        """Cache repairs of this process not yet returned by this method (one line each for the user)."""
        fresh = REPAIRS[self._repairs_reported:]
        self._repairs_reported = len(REPAIRS)
        return fresh

    def shader_variants(self) -> frozenset[str] | None:
        """Variant names of the run's tree (None without one)."""
        return self.builder.variants() if self.tree.path is not None else None

    @property
    def builder(self) -> ShaderBuilder:
        if self._builder is None:
            from vkdiff.device.shaders.build import ShaderBuilder

            self._builder = ShaderBuilder(self.tree.path, mediump=self.settings.mediump)
        return self._builder

    def close(self) -> None:
        """Stop preparing ahead (the preparation thread finishes its current case) and stop device workers."""
        if self._stream is not None:
            self._stream.close()
        self._stream, self._scheduled = None, set()
        for worker in self._workers.values():
            worker.close()
        self._workers.clear()

    def _isolated(self, device: str, fault_result: Callable[..., Result], fn: Callable[..., Result],
                  **kwargs: Any) -> Result:
        """``fn(ctx, **kwargs)`` in the device's worker; a hang or a dead worker becomes ``fault_result``."""
        from vkdiff.executors.isolate import DeviceWorker, WorkerSpec

        if device not in self._workers:
            spec = WorkerSpec(slug=device, tree=str(self.tree.path), settings=self.settings, setup=self.setup)
            self._workers[device] = DeviceWorker(spec, self.timeout)
        outcome = self._workers[device].call(fn, **kwargs)
        if not outcome.fault:
            return outcome.value
        flags = {"hang": [HANG_FLAG], "device-lost": [DEVICE_LOST_FLAG]}.get(outcome.fault, [])
        info = self.adapters[device][0]
        return fault_result(Status.ERROR, reason=outcome.reason, flags=flags, device_info=info.to_dict())

    def _run_kernel(self, case: KernelCase, device: str, repro: str, driver_repro: bool = True) -> Result:
        from vkdiff.harness.kernels import base_result, run_case

        if device not in self.adapters:
            return base_result(case, device, Status.NOT_RUN, reason=NO_ADAPTER, repro=repro)
        if self.tree.path is None:
            return base_result(case, device, Status.NOT_RUN, reason=self.tree.note, repro=repro)
        if self.timeout is not None:
            result = self._isolated(device, lambda status, **f: base_result(case, device, status, repro=repro,
                                                                             seed=case.seed(self.seed), **f),
                                    run_case, case=case, session_seed=self.seed, repeat=self.repeat,
                                    prepared=self._prepared(case), repro=repro)
        else:
            result = run_case(self._context(device), case, session_seed=self.seed, repeat=self.repeat,
                              prepared=self._prepared(case), repro=repro)
        result.knobs = {**result.knobs, **self._build_knobs()}
        if result.status == Status.FAIL_DRIVER.name and self.on_driver_bug is not None and driver_repro:
            result.metrics["driver_repro"] = self._driver_repro(case, device)
        return result

    def _driver_repro(self, case: KernelCase, device: str) -> dict[str, Any]:
        """``on_driver_bug`` for the case, in the device's worker when cases run isolated."""
        if self.timeout is not None:
            return self._isolated(device, lambda status, **f: {"error": f.get("reason", status.name)},
                                  self.on_driver_bug, case=case)
        return self.on_driver_bug(self._context(device), case=case)

    def _run_model_on_device(self, case: ModelCase, device: str, repro: str) -> Result:
        from vkdiff.harness.device_models import check_on_device

        reason = NO_ADAPTER if device not in self.adapters else self.tree.note if self.tree.path is None else ""
        if reason:
            return Result(case=case.id, op=case.name, device=device, status=Status.NOT_RUN.name, variant=case.variant,
                          rule="device", knobs=self._knobs(case), reason=reason, repro=repro)
        if self.timeout is None:
            return check_on_device(case, self._context(device), route_name=self.route, tree=self.tree.path,
                                   repro=repro, repeat=self.repeat, replays=self.settings.replays)
        from vkdiff.harness.device_models import identity, prepare_or_status, run_prepared

        ident = identity(case, repro)
        return self._isolated(device, lambda status, **f: Result(device=device, status=status.name,
                                                                 **{**ident, "knobs": self._knobs(case)}, **f),
                              run_prepared, model=prepare_or_status(case), ident=ident, route_name=self.route,
                              tree=self.tree.path, repeat=self.repeat, replays=self.settings.replays)

    def _run_program(self, case: ProgramCase, device: str, repro: str) -> Result:
        """A prepared program on a device (``vkdiff check``, ``--from-artifacts``): no lowering here."""
        from vkdiff.harness.device_models import run_prepared

        ident = {**case.ident, "repro": repro}
        reason = NO_ADAPTER if device not in self.adapters else self.tree.note if self.tree.path is None else ""
        if reason:
            return Result(device=device, status=Status.NOT_RUN.name, reason=reason, **ident)
        if self.timeout is not None:
            return self._isolated(device, lambda status, **f: Result(device=device, status=status.name, **ident, **f),
                                  run_prepared, model=case.model, ident=ident, route_name=self.route,
                                  tree=self.tree.path, repeat=self.repeat, replays=self.settings.replays)
        return run_prepared(self._context(device), model=case.model, ident=ident, route_name=self.route,
                            tree=self.tree.path, repeat=self.repeat, replays=self.settings.replays)

    def _knobs(self, case: ModelCase) -> dict:
        return {**case.knobs, "route": self.route, **self._build_knobs()}

    def _build_knobs(self) -> dict:
        """The run's limits profile and shader build knob, where set (results of other builds are other rows)."""
        return {**({"limits": self.limits_profile} if self.limits_profile else {}),
                **({"mediump": True} if self.settings.mediump else {})}

    def _context(self, slug: str) -> DeviceContext:
        if slug not in self._contexts:
            from vkdiff.device.runtime.context import DeviceContext

            opening = self._opened.pop(slug, None)
            self._contexts[slug] = DeviceContext(*self.adapters[slug], self.builder, self.limits_profile,
                                                 settings=self.settings,
                                                 device=None if opening is None else opening.result())
        return self._contexts[slug]

    def _prepared(self, case: KernelCase) -> Prepared | None:
        """Arguments and reference of ``case``'s data id: the last one, the scheduled stream's, or prepared now."""
        from vkdiff.executors.references import prepare_or_none

        if self._last[0] == case.data_id:
            return self._last[1]
        if self._stream is not None and case.data_id in self._scheduled:
            for streamed, prepared in self._stream:
                self._scheduled.discard(streamed.data_id)
                if streamed.data_id == case.data_id:
                    self._last = (case.data_id, prepared)
                    return prepared
        self._last = (case.data_id, prepare_or_none(case, self.seed))
        return self._last[1]
