"""The raw Vulkan transport's buffers and images, their memory a range of the device's ``Arena``, given back when
unreferenced.

Buffers live where the device has direct (device-local, host-visible) memory when it has enough of it, mapped for
their whole life; else in device-local memory, written and read through staging copies. Images are optimal-tiling
and stay in ``VK_IMAGE_LAYOUT_GENERAL`` (a storage image, a sampled image and a copy source or destination alike).
"""

from __future__ import annotations

import functools
import weakref
from typing import Any, Sequence

from vkdiff.device.boundary import DeviceLimitError, DeviceLostError, DispatchError
from vkdiff.device.transports.vk_arena import Arena, Range
from vkdiff.device.transports.raw_vulkan import binding

VK_FORMATS = {"rgba32float": "VK_FORMAT_R32G32B32A32_SFLOAT", "rgba16float": "VK_FORMAT_R16G16B16A16_SFLOAT",
              "rgba32sint": "VK_FORMAT_R32G32B32A32_SINT", "rgba32uint": "VK_FORMAT_R32G32B32A32_UINT",
              "rgba16sint": "VK_FORMAT_R16G16B16A16_SINT", "rgba16uint": "VK_FORMAT_R16G16B16A16_UINT",
              "rgba8sint": "VK_FORMAT_R8G8B8A8_SINT", "rgba8uint": "VK_FORMAT_R8G8B8A8_UINT"}
"""wgpu texture formats (as ``layouts.TEXEL_FORMATS`` names them) → the Vulkan formats ET-VK's ``to_vkformat`` gives."""

TEXEL_BYTES = {"rgba32float": 16, "rgba16float": 8, "rgba32sint": 16, "rgba32uint": 16, "rgba16sint": 8,
               "rgba16uint": 8, "rgba8sint": 4, "rgba8uint": 4}

WHOLE_SIZE = (1 << 64) - 1
"""``VK_WHOLE_SIZE`` (the binding defines it as -1, which cffi refuses for a uint64 field)."""

WAIT_NS = 2_000_000_000
"""One fence wait; a hang is the watchdog's to report, so waits repeat."""


def vk_call(error_type: type, what: str, fn: Any, *args: Any) -> Any:
    """Call the binding; a ``VkError`` becomes ``error_type`` (a lost device: ``DeviceLostError``) naming ``what``."""
    vk = binding()
    try:
        return fn(*args)
    except vk.VkErrorDeviceLost:
        raise DeviceLostError(f"{what}: device lost: VK_ERROR_DEVICE_LOST") from None
    except (vk.VkError, vk.VkException) as exc:
        raise error_type(f"{what}: {type(exc).__name__}") from None


def vk_result(result: int, error_type: type, what: str) -> None:
    """``vk_call`` for a call made on the binding's ``lib`` directly (hot paths: the wrappers convert every argument
    in Python): a result other than ``VK_SUCCESS`` raises as ``vk_call`` would."""
    if result == 0:
        return
    vk = binding()
    exc = vk.exception_codes.get(result)
    if exc is vk.VkErrorDeviceLost:
        raise DeviceLostError(f"{what}: device lost: VK_ERROR_DEVICE_LOST")
    raise error_type(f"{what}: {exc.__name__ if exc is not None else f'VkResult {result}'}")


def owned_by(device: Any, finalizer: weakref.finalize) -> None:
    """Register a resource's finalizer with its device, which runs every live one before it destroys itself (a
    garbage collection that frees a device and its resources together runs their finalizers in any order)."""
    owned = device.finalizers
    if len(owned) > 4096:
        owned[:] = [f for f in owned if f.alive]
    owned.append(finalizer)


class Buffer:
    """A ``VkBuffer`` with memory from the device's arena (mapped where the device has direct memory; ``host``: always),
    or bound to a ``SharedMemory`` (``shared``; then created unbound, as ET-VK creates a ``SharedObject``'s users)."""

    def __init__(self, device: VkDevice, size: int, label: str = "", host: bool = False, shared: bool = False):
        vk = binding()
        self.device, self.size, self.label = device, size, label
        usage = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT
                 | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
        dev = device.handle
        out = vk.ffi.new("VkBuffer *")
        vk_result(vk.lib.vkCreateBuffer(dev, vk.ffi.new("VkBufferCreateInfo *", {
            "sType": vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "size": max(size, 4), "usage": usage,
            "sharingMode": vk.VK_SHARING_MODE_EXCLUSIVE}), vk.ffi.NULL, out), DispatchError, f"create buffer {label}")
        self.handle = out[0]
        self.requirements = vk.ffi.new("VkMemoryRequirements *")
        vk.lib.vkGetBufferMemoryRequirements(dev, self.handle, self.requirements)
        self.shared: SharedMemory | None = None
        self.mapped: Any = None
        """The whole buffer as a writable byte view, or None (then reads and writes are staged)."""
        if shared:
            owned_by(device, weakref.finalize(self, _free, dev, [(vk.lib.vkDestroyBuffer, self.handle)], None, None))
            return
        need = self.requirements
        if host:
            kind = device.host_memory_type(need.memoryTypeBits)
        elif device._direct is not None and need.memoryTypeBits & (1 << device._direct):
            kind = device._direct
        else:
            kind = device.memory_type(need.memoryTypeBits, vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
        where = device.arena.allocate(kind, True, need.size, need.alignment, f"{size} bytes for {label or 'a buffer'}")
        vk_result(vk.lib.vkBindBufferMemory(dev, self.handle, where.memory, where.offset), DispatchError,
                  f"bind memory of {label or 'a buffer'}")
        self.mapped = None if where.mapped is None else where.mapped[:max(size, 4)]
        owned_by(device, weakref.finalize(self, _free, dev, [(vk.lib.vkDestroyBuffer, self.handle)], device.arena,
                                          where))

    def bind(self, shared: "SharedMemory") -> None:
        """Bind to ``shared`` at offset 0 (``VulkanBuffer::bind_allocation``)."""
        binding().vkBindBufferMemory(self.device.handle, self.handle, shared.memory, 0)
        self.shared, self.mapped = shared, shared.mapped

    def map_sync(self, mode: int = 1) -> None:
        """wgpu's map: the queue's deferred dispatches run first (``Queue.settle``), as a wgpu map waits for the
        submissions before it."""
        if self.mapped is None:
            raise DispatchError(f"{self.label or 'a buffer'} is not host-visible: create it with MAP_READ usage")
        self.device.queue.settle()

    def read_mapped(self) -> memoryview:
        return memoryview(bytes(self.mapped[0:self.size]))

    def unmap(self) -> None:
        """Stays mapped for its life (coherent memory)."""

    def destroy(self) -> None:
        """Freed when unreferenced (every submission has completed by then)."""


class Image:
    """A ``VkImage`` (3-D or 2-D, optimal tiling) kept in ``VK_IMAGE_LAYOUT_GENERAL``, with its view; with its own
    memory, or bound later to a ``SharedMemory`` (``shared``)."""

    def __init__(self, device: VkDevice, extent: tuple[int, int, int], dimension: str, format: str, label: str,
                 shared: bool = False):
        vk = binding()
        if format not in VK_FORMATS:
            raise DeviceLimitError(f"{label}: no Vulkan format for texture format {format}")
        self.device, self.extent, self.dimension, self.format, self.label = device, extent, dimension, format, label
        self.vk_format = getattr(vk, VK_FORMATS[format])
        features = device.format_features.get(self.vk_format)
        if features is None:
            features = device.format_features[self.vk_format] = int(vk.vkGetPhysicalDeviceFormatProperties(
                device.adapter.physical, self.vk_format).optimalTilingFeatures)
        for bit, what in ((vk.VK_FORMAT_FEATURE_STORAGE_IMAGE_BIT, "storage image"),
                          (vk.VK_FORMAT_FEATURE_SAMPLED_IMAGE_BIT, "sampled image")):
            if not features & bit:
                raise DeviceLimitError(f"{label}: the device does not support {VK_FORMATS[format]} as a {what}")
        dev = device.handle
        width, height, depth = extent
        kind = vk.VK_IMAGE_TYPE_3D if dimension == "3d" else vk.VK_IMAGE_TYPE_2D
        usage = (vk.VK_IMAGE_USAGE_STORAGE_BIT | vk.VK_IMAGE_USAGE_SAMPLED_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT
                 | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT)
        self.handle = vk_call(DeviceLimitError, f"create image {label} {extent}", vk.vkCreateImage, dev,
                              vk.VkImageCreateInfo(imageType=kind, format=self.vk_format,
                                                   extent=vk.VkExtent3D(width=width, height=height, depth=depth),
                                                   mipLevels=1, arrayLayers=1, samples=vk.VK_SAMPLE_COUNT_1_BIT,
                                                   tiling=vk.VK_IMAGE_TILING_OPTIMAL, usage=usage,
                                                   sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE,
                                                   initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED), None)
        self.requirements = vk.vkGetImageMemoryRequirements(dev, self.handle)
        self.shared: SharedMemory | None = None
        self.view: Any = None
        if shared:
            self._unbound = weakref.finalize(self, _free, dev, [(vk.vkDestroyImage, self.handle)], None, None)
            owned_by(device, self._unbound)
            return
        need = self.requirements
        kind = device.memory_type(need.memoryTypeBits, vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
        where = device.arena.allocate(kind, False, need.size, need.alignment, f"image {label}")
        vk.vkBindImageMemory(dev, self.handle, where.memory, where.offset)
        self._finish(vk, where)

    def bind(self, shared: "SharedMemory") -> None:
        """Bind to ``shared`` at offset 0 (``VulkanImage::bind_allocation``), then make the view."""
        vk = binding()
        vk.vkBindImageMemory(self.device.handle, self.handle, shared.memory, 0)
        self._unbound.detach()
        self.shared = shared
        self._finish(vk, None)

    def _finish(self, vk: Any, where: Range | None) -> None:
        dev = self.device.handle
        self.view = vk.vkCreateImageView(dev, vk.VkImageViewCreateInfo(
            image=self.handle, viewType=vk.VK_IMAGE_VIEW_TYPE_3D if self.dimension == "3d" else vk.VK_IMAGE_VIEW_TYPE_2D,
            format=self.vk_format, subresourceRange=subresource_range(vk)), None)
        destroy = [(vk.vkDestroyImageView, self.view), (vk.vkDestroyImage, self.handle)]
        owned_by(self.device, weakref.finalize(self, _free, dev, destroy, self.device.arena, where))
        self.device.queue.to_general(self)

    def create_view(self) -> "Image":
        return self

    def destroy(self) -> None:
        """Freed when unreferenced."""


class SharedMemory:
    """One allocation several buffers and images are bound to, at offset 0 (ET-VK's ``SharedObject``: its size and
    alignment are the largest of its users')."""

    def __init__(self, device: VkDevice, users: Sequence[Buffer | Image], label: str = ""):
        vk = binding()
        dev = device.handle
        self.device, self.label = device, label
        self.size = max(int(u.requirements.size) for u in users)
        bits = functools.reduce(lambda a, b: a & b, (int(u.requirements.memoryTypeBits) for u in users))
        if not bits:
            raise DeviceLimitError(f"{label}: no memory type suits every user of the shared object")
        if device._direct is not None and bits & (1 << device._direct):
            kind = device._direct
        else:
            kind = device.memory_type(bits, vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
        where = device.arena.dedicated(kind, self.size, f"{self.size} bytes for {label}")
        self.memory, self.mapped = where.memory, where.mapped
        owned_by(device, weakref.finalize(self, _free, dev, [], device.arena, where))
        for user in users:
            user.bind(self)


def subresource_range(vk: Any) -> Any:
    return vk.VkImageSubresourceRange(aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, baseMipLevel=0, levelCount=1,
                                      baseArrayLayer=0, layerCount=1)


def device_arena(device: Any, properties: Any) -> Arena:
    """The arena of a device (``VkDevice``), given its handle and memory properties (not the device: the device's
    finalizer holds the arena)."""
    return Arena(functools.partial(new_memory, device, properties), functools.partial(free_memory, device))


def new_memory(device: Any, properties: Any, kind: int, size: int, what: str) -> tuple[Any, Any]:
    """``kind`` memory of ``size`` bytes, mapped whole where it is host-visible and coherent (``Arena``'s maker)."""
    vk = binding()
    memory = vk_call(DeviceLimitError, f"allocate {what}", vk.vkAllocateMemory, device,
                     vk.VkMemoryAllocateInfo(allocationSize=size, memoryTypeIndex=kind), None)
    visible = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
    flags = properties.memoryTypes[kind].propertyFlags
    return memory, vk.vkMapMemory(device, memory, 0, size, 0) if (flags & visible) == visible else None


def free_memory(device: Any, memory: Any) -> None:
    """Free memory (implicitly unmapped)."""
    try:
        binding().vkFreeMemory(device, memory, None)
    except Exception:  # noqa: BLE001 - at interpreter exit the loader may already be gone
        pass


def _free(device: Any, destroy: list[tuple[Any, Any]], arena: Arena | None, where: Range | None) -> None:
    try:
        for fn, handle in destroy:
            fn(device, handle, None)
        if where is not None:
            arena.release(where)
    except Exception:  # noqa: BLE001 - at interpreter exit the loader may already be gone
        pass
