"""Which status an exception of a pipeline stage stands for: the one table that maps failures to statuses."""

from __future__ import annotations

import traceback

from vkdiff.datamodel import Status
from vkdiff.device.boundary import (DeviceLimitError, DispatchError, DtypeMismatchError, EtVkRefusal, InstrumentationError,
                                    OutOfBoundsError, ShaderLoadError, ShaderUnsupportedError, SyncHazardError,
                                    is_device_lost)
from vkdiff.device.shaders.build import BuildError
from vkdiff.device.runtime.context import VariantMissingError
from vkdiff.device.graph.delegate import MissingLaunchersError
from vkdiff.device.shaders.spirv import SpirvOptMissingError
from vkdiff.executors.host_ops import HostOpError
from vkdiff.reference import UnsupportedOpError

_EXCEPTION_STATUS: tuple[tuple[type[BaseException], Status], ...] = (
    (VariantMissingError, Status.NOT_RUN),
    (MissingLaunchersError, Status.NOT_RUN),
    (UnsupportedOpError, Status.NOT_RUN),
    (HostOpError, Status.NOT_RUN),
    (SpirvOptMissingError, Status.NOT_RUN),
    (InstrumentationError, Status.NOT_RUN),
    (BuildError, Status.BUILD_FAIL),
    (ShaderUnsupportedError, Status.NOT_SUPPORTED),
    (ShaderLoadError, Status.BUILD_FAIL),
    (DeviceLimitError, Status.NOT_SUPPORTED),
    (DtypeMismatchError, Status.DTYPE_MISMATCH),
    (EtVkRefusal, Status.FAIL_CHECK),
    (OutOfBoundsError, Status.FAIL_OOB),
    (SyncHazardError, Status.FAIL_SYNC),
    (DispatchError, Status.ERROR),
)
"""First match wins: ``NOT_SUPPORTED`` only where the device (or naga) names what it lacks."""


def status_of_exception(exc: BaseException) -> tuple[Status, str]:
    """Map a pipeline stage's exception to its status and a one-line reason (a skipped delegate by its cause)."""
    from vkdiff.executors.program import DelegateSkipped

    if isinstance(exc, DelegateSkipped):
        return status_of_exception(exc.cause)[0], str(exc)
    for kind, status in _EXCEPTION_STATUS:
        if isinstance(exc, kind):
            return status, str(exc)
    if is_device_lost(exc):
        return Status.ERROR, f"device lost: {exc}"
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    at = f" (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})" if where else ""
    return Status.ERROR, f"{type(exc).__name__}: {exc}{at}"


