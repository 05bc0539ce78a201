"""vkdiff's device exceptions, one per condition, so every failure maps to one status.

Each transport has its own error boundary that raises these (``Transport.call``: wgpu's
``wgpu_device.gpu_call`` turns its raised and logged errors into them, raw Vulkan's
``vk_memory.vk_call`` its ``VkError`` results).
"""

from __future__ import annotations

import re


class DeviceError(RuntimeError):
    """Something the Vulkan device or wgpu refused."""


class ShaderLoadError(DeviceError):
    """naga or the driver could not load a valid module for a reason that is not a missing capability (→ ``BUILD_FAIL``)."""


class ShaderUnsupportedError(ShaderLoadError):
    """The module needs a capability or feature naga or the device does not offer (→ ``NOT_SUPPORTED``)."""


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
    binds it so (the one-op graph then reports ET-VK's invalid usage as ``FAIL_CHECK``)."""


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
