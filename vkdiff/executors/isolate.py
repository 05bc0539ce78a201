"""Device work in a child process per device, so a hung dispatch or a lost device costs one result, not the run.

wgpu cannot interrupt a dispatch that never finishes: the thread waiting for it (a
read back) blocks inside native code for good. With ``--timeout S`` the runner sends
each case's device work, already prepared on the host (a kernel case's arguments and
reference, a model case's decoded delegate and inputs: numpy only), to a child process
that owns the device. The child marks every call that waits on the device
(``vkdiff.device.transports.watchdog``); when one such wait lasts longer than ``S`` seconds, the
parent kills the child, records ``ERROR`` with the flag ``hang`` naming the wait and
the dispatches before it, and the next case starts a fresh child with a fresh device.
A child that dies (a driver abort, a lost device) is recorded as ``ERROR`` with the flag
``device-lost``. Results already written are never touched.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import time
import traceback
from typing import Any, Callable

from vkdiff.datamodel import DEVICE_LOST_FLAG
from vkdiff.datamodel.settings import RunSettings

POLL_S = 0.05
"""How often the parent looks at the child's beacon while it waits for a result."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class WorkerSpec:
    """What a child needs to open the same device the parent would."""

    slug: str
    """Adapter slug (``vkdiff.device.transports.adapters.select``)."""
    tree: str | None
    """ExecuTorch tree whose shaders the child builds."""
    settings: RunSettings = RunSettings()
    """The run's settings (limits profile, transport, validation, local workgroup size)."""
    setup: Callable[[], None] | None = None
    """A module-level function the child calls first (tests register their own ops with it)."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class Outcome:
    """What one job came back as: its value, or the fault that ended it."""

    value: Any = None
    fault: str = ""
    """``hang`` or ``device-lost`` (with ``reason``), empty when the job returned."""
    reason: str = ""


def _open_context(spec: WorkerSpec):
    from pathlib import Path

    from vkdiff.device.transports.adapters import select
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.runtime.context import DeviceContext

    settings = spec.settings
    info, adapter = select([spec.slug], via=settings.transport, validate=settings.validate,
                           profile=settings.device_profile)[0]
    builder = ShaderBuilder(Path(spec.tree) if spec.tree else None, mediump=settings.mediump)
    return DeviceContext(info, adapter, builder, settings.limits_profile, settings=settings)


def _serve(conn, beacon, spec: WorkerSpec) -> None:
    """The child: open the device on first use, run jobs until told to stop; a lost device is reopened."""
    from vkdiff.device.transports import watchdog

    watchdog.BEACON = beacon
    if spec.setup is not None:
        spec.setup()
    ctx = None
    while True:
        job = conn.recv()
        if job is None:
            return
        fn, kwargs = job
        try:
            ctx = ctx or _open_context(spec)
            value = fn(ctx, **kwargs)
        except BaseException as exc:  # the parent turns this into an ERROR result of the case
            value = RuntimeError(f"device worker: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")
        if DEVICE_LOST_FLAG in getattr(value, "flags", ()):
            ctx = None
        conn.send(value)


class DeviceWorker:
    """One device's child process (started on first use, restarted after a fault)."""

    def __init__(self, spec: WorkerSpec, timeout: float):
        self.spec = spec
        self.timeout = float(timeout)
        self._mp = multiprocessing.get_context("spawn")
        self._process = None
        self._conn = None
        self._beacon = None

    def _start(self) -> None:
        from vkdiff.device.transports.watchdog import LABEL_BYTES

        self._beacon = (self._mp.Value("d", 0.0, lock=False), self._mp.Array("c", LABEL_BYTES, lock=False))
        self._conn, child = self._mp.Pipe()
        self._process = self._mp.Process(target=_serve, args=(child, self._beacon, self.spec), daemon=True,
                                         name=f"vkdiff-device-{self.spec.slug}")
        self._process.start()
        child.close()

    def call(self, fn: Callable[..., Any], **kwargs: Any) -> Outcome:
        """Run ``fn(ctx, **kwargs)`` in the child; a hang or the child's death is an ``Outcome`` with a fault."""
        if self._process is None or not self._process.is_alive():
            self._start()
        started = time.monotonic()
        try:
            self._conn.send((fn, kwargs))
        except OSError:
            return self._died(started)
        while not self._conn.poll(POLL_S):
            stamp, label = self._beacon
            waited = time.monotonic() - stamp.value if stamp.value else 0.0
            if waited > self.timeout:
                what = label.value.decode(errors="replace")
                self._kill()
                return Outcome(fault="hang", reason=f"hang: the device did not finish within --timeout "
                                                    f"{self.timeout:g} s while {what}; the device worker was killed "
                                                    f"and the run goes on with a fresh device")
            if not self._process.is_alive() and not self._conn.poll(0):
                return self._died(started)
        try:
            value = self._conn.recv()
        except (EOFError, OSError):
            return self._died(started)
        if isinstance(value, RuntimeError):
            return Outcome(fault="error", reason=str(value))
        return Outcome(value=value)

    def _died(self, started: float) -> Outcome:
        """The child ended without a result (a driver abort, a lost device that took the process)."""
        self._process.join(10)
        code = self._process.exitcode
        self._kill()
        return Outcome(fault="device-lost", reason=f"device lost: the device worker died (exit code {code}) after "
                                                   f"{time.monotonic() - started:.1f} s; the run goes on with a "
                                                   f"fresh device")

    def _kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.join(10)
        self._process = self._conn = None

    def close(self) -> None:
        """Ask the child to stop, then make sure it has."""
        if self._process is not None and self._process.is_alive():
            try:
                self._conn.send(None)
                self._process.join(5)
            except (BrokenPipeError, OSError):
                pass
            if self._process.is_alive():
                self._process.kill()
        self._process = self._conn = None
