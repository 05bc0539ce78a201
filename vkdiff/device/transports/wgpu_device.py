"""The wgpu transport: a wgpu device with what the runtime asks of every transport (``vkdiff.device.transports.transport``),
and the boundary where wgpu's errors become vkdiff's own exceptions.

wgpu inserts its own barriers, gives every resource its own memory and loads SPIR-V
through naga, so a module is first transformed until naga takes it (spec constants and
workgroup size baked in, samplers and integer ``OpSMod`` rewritten, infinite literals
clamped: ``dispatch.prepare_module``). Everything else is wgpu's own API, passed through.

wgpu-py raises ``GPUValidationError`` (and friends) from the call that produced the error,
and logs what it cannot attribute. ``gpu_call`` turns both into a ``DeviceError`` subclass
named after the condition (a load failure naming a capability naga or the device lacks is
``ShaderUnsupportedError``), so callers map each to a status.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Callable, Mapping, Sequence, TypeVar

from vkdiff.device.shaders import spirv
from vkdiff.device.transports import watchdog
from vkdiff.device.boundary import (DEVICE_LOST, DeviceError, DeviceLimitError, DeviceLostError, ShaderLoadError,
                                    ShaderUnsupportedError)
from vkdiff.device.shaders.dispatch import Pipeline, layout_entry, prepare_module
from vkdiff.device.runtime.resources import Tensor

T = TypeVar("T")

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


class WgpuAdapter:
    """A wgpu adapter whose devices come behind the transport interface; its ``info``, ``features`` and ``limits``
    are wgpu's."""

    transport = "wgpu"
    profile = ""
    """wgpu loads modules as naga translates them: no device profile."""

    def __init__(self, adapter: Any):
        self.inner = adapter

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def request_device_sync(self, **kwargs: Any) -> "WgpuDevice":
        return WgpuDevice(self.inner.request_device_sync(**kwargs))


class WgpuDevice:
    """A wgpu ``GPUDevice`` seen through the transport interface; wgpu's own calls pass through unchanged."""

    transport = "wgpu"
    own_barriers = False
    """wgpu inserts the barriers it sees fit: ET-VK's own (or missing) ones cannot show through it."""
    aliases = False
    """wgpu cannot bind two resources to one allocation: each tensor keeps its own memory."""
    specialises = False
    """Spec constants are baked into the module (naga has none at pipeline creation)."""
    overlap: Any = None
    """The ``Overlap`` running tasks on the device, if any (its tasks never park here: ``wait_parked``)."""

    def __init__(self, device: Any):
        self.inner = device
        self.limits: dict[str, int] = device.limits
        self.queue: Any = device.queue

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def create_buffer(self, **kwargs: Any) -> Any:
        """The interface's members are the wrapper's own (``isinstance(x, Transport)`` reads them statically since
        Python 3.12); the rest of wgpu's API passes through ``__getattr__``."""
        return self.inner.create_buffer(**kwargs)

    def create_buffer_with_data(self, **kwargs: Any) -> Any:
        return self.inner.create_buffer_with_data(**kwargs)

    def create_texture(self, **kwargs: Any) -> Any:
        return self.inner.create_texture(**kwargs)

    def create_command_encoder(self, **kwargs: Any) -> Any:
        return self.inner.create_command_encoder(**kwargs)

    def create_bind_group(self, **kwargs: Any) -> Any:
        return self.inner.create_bind_group(**kwargs)

    @staticmethod
    def call(error_type: type[DeviceError], what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """wgpu's error boundary (``gpu_call``): its raised and logged errors as ``error_type``."""
        return gpu_call(error_type, what, fn, *args, **kwargs)

    def create_pipeline(self, spv: bytes, spec_constants: Mapping[int, int | float | bool],
                        local_size: tuple[int, int, int], label: str) -> Pipeline:
        """The module transformed for naga, its bind-group layout from reflection, its pipeline.

        Raises:
            ShaderLoadError: the module cannot be transformed or wgpu rejects it.
            ShaderUnsupportedError: naga cannot represent a capability the module declares.
            DeviceLimitError: it needs more immediates than the device has.
        """
        try:
            module_bytes, clamped = prepare_module(spv, spec_constants, local_size)
            reflection = spirv.reflect(module_bytes)
        except spirv.SpirvError as exc:
            raise ShaderLoadError(f"{label}: vkdiff cannot prepare the module for naga: {exc}") from None
        if reflection.immediate_size > self.limits.get("max-immediate-size", 0):
            raise DeviceLimitError(f"{label}: needs {reflection.immediate_size} bytes of immediates, "
                                   f"device has {self.limits.get('max-immediate-size', 0)}")
        entries = [layout_entry(b) for b in reflection.bindings if b.group == 0]
        device = self.inner
        layout = gpu_call(ShaderLoadError, f"{label}: bind group layout", device.create_bind_group_layout,
                          entries=entries, label=label)
        playout = gpu_call(ShaderLoadError, f"{label}: pipeline layout", device.create_pipeline_layout,
                           bind_group_layouts=[layout], immediate_size=reflection.immediate_size)
        try:
            module = gpu_call(ShaderLoadError, f"{label}: shader module", device.create_shader_module,
                              code=module_bytes, label=label)
        except ShaderUnsupportedError:
            raise
        except ShaderLoadError as exc:
            lacking = naga_missing_capability(str(exc), spirv.capabilities(module_bytes))
            if lacking is None:
                raise
            raise ShaderUnsupportedError(f"{label}: shader module: needs {lacking}, which naga cannot represent: "
                                         f"{str(exc).split(': ', 2)[-1]}") from None
        with watchdog.waiting(f"creating the pipeline of {label}"):
            handle = gpu_call(ShaderLoadError, f"{label}: compute pipeline", device.create_compute_pipeline,
                              layout=playout, compute={"module": module, "entry_point": "main"}, label=label)
        return Pipeline(handle=handle, layout=layout, reflection=reflection, local_size=tuple(local_size),
                        infinities_clamped=clamped, module=module_bytes)

    @staticmethod
    def read_copied(buffer: Any) -> bytes:
        """Mapped without the empty submission wgpu-py makes before every map for reading: that one makes pending
        ``queue.write_buffer`` data land first, and nothing but submitted copies wrote this buffer (wgpu-py's own
        ``read_buffer`` maps its copy's target the same way, ``READ_NOSYNC``). It was 3 of a kernel case's 8.5
        submissions, 0.5 ms each on lavapipe."""
        buffer.map_sync("READ_NOSYNC")
        try:
            return bytes(buffer.read_mapped())
        finally:
            buffer.unmap()

    @staticmethod
    def wait_parked(tokens: Sequence[Any]) -> None:
        """Never called: no wgpu submission parks its task. It returns at once, and its wait is the read's map.
        Parking tasks before their reads was tried and measured no gain: the kernel suite in one process took 75.6 s
        so against 74.1 and 74.4 s on an H200, and 1,223 cases on lavapipe 32.8 s against 31.7 s (raw Vulkan's
        parked submissions: 37.1–37.8 s against 38.7–39.0 s there)."""
        raise NotImplementedError("wgpu tasks never park")

    @staticmethod
    def defer(record: Callable[[Any], None]) -> bool:
        """Never: a wgpu submission returns at once (its wait is the next map's), so one alone costs no round trip."""
        return False

    def allocate_shared(self, tensors: Any, label: str) -> None:
        """Never called (``aliases`` is False): wgpu cannot bind two resources to one allocation."""
        raise DeviceLimitError(f"{label}: wgpu cannot bind two resources to one allocation")

    def blit(self, src: Tensor, dst: Tensor, label: str) -> None:
        """ET-VK's ``vkCmdBlitImage`` where wgpu can issue it: a copy of one image onto another of its format and
        extents.

        Raises:
            DeviceLimitError: the blit converts formats or scales, which wgpu has no command for.
        """
        if src.spec.dtype != dst.spec.dtype or src.allocated.extents != dst.allocated.extents:
            raise DeviceLimitError(f"{label}: wgpu has no vkCmdBlitImage; a blit that converts formats or scales "
                                   f"({src.spec.dtype} {src.allocated.extents} → {dst.spec.dtype} "
                                   f"{dst.allocated.extents}) cannot be issued through this transport")
        encoder = self.inner.create_command_encoder(label=label)
        encoder.copy_texture_to_texture({"texture": src.handle}, {"texture": dst.handle}, src.allocated.extents)
        self.inner.queue.submit([encoder.finish()])
