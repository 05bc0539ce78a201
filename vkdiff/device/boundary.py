"""The one boundary where wgpu errors become vkdiff's own exceptions.

wgpu-py raises ``GPUValidationError`` (and friends) from the call that produced the
error, and logs what it cannot attribute. ``gpu_call`` turns both into a
``DeviceError`` subclass named after the condition, so callers map each to a status.
"""

from __future__ import annotations

import logging
import re
from typing import Callable, TypeVar

T = TypeVar("T")


class DeviceError(RuntimeError):
    """Something the Vulkan device or wgpu refused."""


class ShaderLoadError(DeviceError):
    """naga or the driver could not load a valid module for a reason that is not a missing capability (→ ``BUILD_FAIL``)."""


class ShaderUnsupportedError(ShaderLoadError):
    """The module needs a capability or feature naga or the device does not offer (→ ``NOT_SUPPORTED``)."""


UNSUPPORTED_PATTERNS = (
    re.compile(r"unsupported capability (\S+)"),
    re.compile(r"requires the `naga::valid::Capabilities::(\w+)` flag"),
    re.compile(r"Features? (.+?) (?:are|is) required but not enabled"),
    re.compile(r"Downlevel flags (.+?) are required but not supported"),
)
"""How naga and wgpu name a missing capability or feature: the only load failures that are ``NOT_SUPPORTED``."""


NAGA_MISSING_CAPABILITIES = {"Int16": "16-bit integers", "Int8": "8-bit integers"}
"""SPIR-V capabilities naga's IR cannot represent: a module declaring one fails with ``invalid type width``."""


def naga_missing_capability(message: str, capabilities: set[str]) -> str | None:
    """The capability a module declares that naga lacks, when naga's failure is about it, else None.

    naga's IR has no NaN float literal (``0.0/0.0`` folded by glslc): such a module cannot be
    loaded through wgpu at all, whatever the device.

    naga reports only ``invalid type width %N`` for a 16- or 8-bit integer type; the
    module's own ``OpCapability`` says which capability that is.
    """
    if "Float literal is NaN" in message:
        return "NaN float literals (naga: Float literal is NaN)"
    if "invalid type width" not in message:
        return None
    for name, what in NAGA_MISSING_CAPABILITIES.items():
        if name in capabilities:
            return f"{name} ({what}; naga: invalid type width)"
    return None


def missing_capability(message: str) -> str | None:
    """The capability or feature a load failure names as missing, or None.

    Example::

        >>> missing_capability("... unsupported capability StorageBuffer8BitAccess")
        'StorageBuffer8BitAccess'
        >>> missing_capability("... Float literal is infinite") is None
        True
    """
    for pattern in UNSUPPORTED_PATTERNS:
        found = pattern.search(message)
        if found:
            return found.group(1)
    return None


class DeviceLimitError(DeviceError):
    """A dispatch does not fit the device's features or limits (→ ``NOT_SUPPORTED``)."""


class EtVkRefusal(ValueError):
    """ET-VK's own host code refuses the arguments (a ``VK_CHECK_COND`` or throw of the ported C++): its graph
    build would fail, so a delegate holding this node does not load (→ ``FAIL_CHECK``, naming the check)."""


class DtypeMismatchError(DeviceError):
    """A binding's reflected type differs from the tensor bound to it (→ ``DTYPE_MISMATCH`` on every device)."""


class DispatchError(DeviceError):
    """Validation failed while binding or dispatching (→ ``ERROR``: a launcher bug)."""


class BindingKindError(DispatchError):
    """A buffer bound where the shader declares an image, or the reverse: a launcher bug, unless the tree's own C++
    binds it so (``OpGraph`` then reports ET-VK's invalid usage as ``FAIL_CHECK``)."""


class OutOfBoundsError(DeviceError):
    """A dispatch wrote outside its tensor: a canary guard band changed, or the validation layer reported an
    out-of-bounds access (→ ``FAIL_OOB``, naming the tensor and the dispatches that bind it)."""


class InstrumentationError(DeviceError):
    """The validation layer's GPU-assisted instrumentation failed where the uninstrumented work does not fail
    (``NOT_RUN``: nothing of ET-VK's was judged)."""


class SyncHazardError(DeviceError):
    """Two dispatches touch one memory and no barrier orders them (→ ``FAIL_SYNC``, naming both, and the memory)."""


class DeviceLostError(DeviceError):
    """The device was lost (driver reset, ``destroy``, a fault): ``ERROR (device lost)``; the next case gets a
    fresh device."""


DEVICE_LOST = re.compile(r"device is lost|device lost|DeviceLost|VK_ERROR_DEVICE_LOST", re.IGNORECASE)
"""How wgpu-native and Vulkan word a lost device (``Parent device is lost``)."""


def is_device_lost(exc: BaseException) -> bool:
    """Whether ``exc`` (typed or a raw wgpu error) says the device was lost."""
    return isinstance(exc, DeviceLostError) or bool(DEVICE_LOST.search(str(exc)))


class _LogCatcher(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def gpu_call(error_type: type[DeviceError], what: str, fn: Callable[..., T], *args, **kwargs) -> T:
    """Call ``fn`` and turn any wgpu error (raised or only logged) into ``error_type``.

    A ``ShaderLoadError`` whose message names a missing capability becomes ``ShaderUnsupportedError``.
    """
    import wgpu

    catcher = _LogCatcher()
    logger = logging.getLogger("wgpu")
    logger.addHandler(catcher)
    propagate, logger.propagate = logger.propagate, False
    try:
        result = fn(*args, **kwargs)
    except wgpu.GPUError as exc:
        raise _typed(error_type, what, str(exc)) from None
    finally:
        logger.removeHandler(catcher)
        logger.propagate = propagate
    if catcher.messages:
        raise _typed(error_type, what, catcher.messages[0])
    return result


def _typed(error_type: type[DeviceError], what: str, message: str) -> DeviceError:
    text = _first_lines(message)
    if DEVICE_LOST.search(message):
        return DeviceLostError(f"{what}: device lost: {text}")
    if issubclass(error_type, ShaderLoadError):
        capability = missing_capability(message)
        if capability is not None:
            return ShaderUnsupportedError(f"{what}: needs {capability}, which naga or the device does not offer: "
                                          f"{text}")
    return error_type(f"{what}: {text}")


def _first_lines(message: str, limit: int = 600) -> str:
    """Keep wgpu's multi-line reports readable in one result field."""
    text = " | ".join(line.strip() for line in message.strip().splitlines() if line.strip())
    return text if len(text) <= limit else text[: limit // 2] + " … " + text[-limit // 2 :]
