"""The transport interface: what vkdiff's runtime asks of a device, whichever way it reaches the driver.

Two transports implement it: wgpu (``vkdiff.device.transports.wgpu_device``: portable, naga re-translates
every module, wgpu inserts barriers) and raw Vulkan (``vkdiff.device.transports.vk_device``: the SPIR-V as
built, ET-VK's own barriers, shared allocations). The runtime calls only what ``Transport``
declares; where the two differ, the difference lives behind one of its members, never in an
``if`` on the transport's name elsewhere. Buffers, textures, command encoders and the queue
keep wgpu's shape on both (the raw transport offers the subset of wgpu's API the runtime uses),
so launchers and the graph runtime are written once.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Mapping, Protocol, Sequence, runtime_checkable

TransportName = Literal["wgpu", "vulkan"]


@runtime_checkable
class Transport(Protocol):
    """A device as the runtime uses it."""

    transport: TransportName
    """Which transport this is: recorded with every result and repro folder, never branched on."""
    own_barriers: bool
    """Only the barriers the runtime records run between commands (ET-VK's own, so a missing one can show); False
    where the transport inserts its own."""
    aliases: bool
    """Several resources can be bound to one allocation (ET-VK's shared objects)."""
    specialises: bool
    """Spec constants are given at pipeline creation (a repro records them per dispatch); False where they are baked
    into the module."""
    limits: dict[str, int]
    """Limits under wgpu's names (``max-buffer-size``, ``max-compute-workgroups-per-dimension``...)."""
    queue: Any
    """``write_buffer``, ``write_texture``, ``read_buffer``, ``read_texture``, ``submit``."""
    overlap: Any
    """The ``vkdiff.device.runtime.overlap.Overlap`` running tasks on the device, or None: where one of its tasks
    would wait for a submission, a transport may park it instead (``wait_parked``)."""

    def call(self, error_type: type, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` inside this transport's error boundary: what the driver (or wgpu) refuses is raised
        as ``error_type`` naming ``what`` (a lost device as ``DeviceLostError``), whatever transport it came from."""

    def create_buffer(self, *, size: int, usage: int = 0, label: str = "") -> Any: ...

    def create_buffer_with_data(self, *, data: Any, usage: int = 0, label: str = "") -> Any: ...

    def create_texture(self, *, size: Sequence[int], dimension: str = "2d", format: str, usage: int = 0,
                       label: str = "") -> Any: ...

    def create_command_encoder(self, label: str = "") -> Any: ...

    def create_bind_group(self, *, layout: Any, entries: Sequence[dict]) -> Any: ...

    def create_pipeline(self, spv: bytes, spec_constants: Mapping[int, int | float | bool],
                        local_size: tuple[int, int, int], label: str) -> Any:
        """A ``dispatch.Pipeline`` for glslc's module with these spec constants and workgroup size.

        Raises:
            ShaderLoadError: the module cannot be loaded.
            ShaderUnsupportedError: the device (or naga) lacks a named capability the module needs.
            DeviceLimitError: it needs more than the device's limits.
        """

    def allocate_shared(self, tensors: Sequence[Any], label: str) -> None:
        """Storage for the users of one ``SharedObject``, bound to one allocation (called where ``aliases``).

        Raises:
            DeviceLimitError: a user is over the device's limits, or the transport cannot alias.
        """

    def read_copied(self, buffer: Any) -> bytes:
        """The bytes of a mappable buffer (``MAP_READ``) that only commands already submitted wrote: mapped, read and
        unmapped, with no submission of its own."""

    def wait_parked(self, tokens: Sequence[Any]) -> None:
        """One wait for the submissions of every parked task (``tokens``: what each ``park`` was given).

        Raises:
            DispatchError: the device failed them (``DeviceLostError`` when it was lost).
        """

    def defer(self, record: Callable[[Any], None]) -> bool:
        """Whether ``record`` (commands for an encoder) was queued to run first in the next submission instead of
        submitting alone (every later submission and read runs it first, as raw Vulkan runs deferred uploads);
        False where the transport does not (the caller submits it)."""

    def blit(self, src: Any, dst: Any, label: str) -> None:
        """ET-VK's ``BlitNode``: image ``src`` onto image ``dst`` (both ``resources.Tensor``).

        Raises:
            DeviceLimitError: this transport cannot issue that blit (named).
        """
