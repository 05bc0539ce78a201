"""The raw Vulkan transport: physical devices as adapters, a logical device with the features ET-VK asks for,
and its buffers and images.

``VkDevice`` implements the transport interface (``vkdiff.device.transports.transport``): the subset of wgpu's API the runtime
calls (``create_buffer``, ``create_texture``, ``queue``, ``create_command_encoder``, ``create_bind_group``), and
pipelines from ``create_pipeline`` with the module exactly as glslc built it (``vkdiff.device.transports.vk_commands``). Every
submission waits for its fence, so host writes and reads never race the device and a resource is never freed while
in use.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any, Sequence

import numpy as np

from vkdiff.device.boundary import DeviceLimitError
from vkdiff.device.shaders import device_profiles
from vkdiff.device.runtime import layouts
from vkdiff.device.boundary import DispatchError
from vkdiff.device.shaders.dispatch import Pipeline
from vkdiff.device.runtime.resources import Tensor, byte_view, guarded, texture_extent
from vkdiff.device.transports.raw_vulkan import FEATURES, RawDevice, RawVulkanError, binding, describe
from vkdiff.device.transports.vk_commands import (BindGroup, Encoder, Queue, ShaderObjects, create_pipeline,
                                                  descriptor_pools)
from vkdiff.device.transports.vk_descriptors import DescriptorPools
from vkdiff.device.transports.validation import VALIDATION_LAYER, on_message
from vkdiff.device.transports.vk_arena import Arena
from vkdiff.device.transports import watchdog
from vkdiff.device.transports.vk_memory import WAIT_NS, Buffer, Image, SharedMemory, device_arena, vk_call, vk_result
from vkdiff.device.transports.vk_pipeline_cache import PipelineStore

_KEEP: list[Any] = []
"""The debug messenger, its callback and create info: alive as long as the instance."""


def validation_layer_available() -> bool:
    vk = binding()
    return VALIDATION_LAYER in {p.layerName for p in vk.vkEnumerateInstanceLayerProperties()}


def layered(validate: str) -> str:
    """The validation an instance for ``validate`` really has: none without the layer installed."""
    return validate if validate and validation_layer_available() else ""


@functools.lru_cache(maxsize=None)
def instance(validate: str = "") -> Any:
    """The process's ``VkInstance`` (Vulkan 1.3) for a validation setting; with ``validate`` and the Khronos validation
    layer installed, that layer with synchronization validation (and with ``gpu`` GPU-assisted validation: shaders
    instrumented, accesses past a descriptor's range reported), reporting into ``LAYER_MESSAGES``."""
    vk = binding()
    app = vk.VkApplicationInfo(pApplicationName="vkdiff", apiVersion=vk.VK_MAKE_VERSION(1, 3, 0))
    if not layered(validate):
        return vk_call(RawVulkanError, "vkCreateInstance", vk.vkCreateInstance,
                       vk.VkInstanceCreateInfo(pApplicationInfo=app), None)
    features = vk.VkValidationFeaturesEXT(pEnabledValidationFeatures=[
        vk.VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT,
        *([vk.VK_VALIDATION_FEATURE_ENABLE_GPU_ASSISTED_EXT] if validate == "gpu" else [])])
    created = vk_call(RawVulkanError, "vkCreateInstance with the validation layer", vk.vkCreateInstance,
                      vk.VkInstanceCreateInfo(pNext=features, pApplicationInfo=app,
                                              ppEnabledLayerNames=[VALIDATION_LAYER],
                                              ppEnabledExtensionNames=[vk.VK_EXT_DEBUG_UTILS_EXTENSION_NAME,
                                                                       vk.VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME]),
                      None)
    info = vk.VkDebugUtilsMessengerCreateInfoEXT(
        messageSeverity=vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        messageType=vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
        pfnUserCallback=on_message)
    _KEEP.extend([info, on_message, vk.vkGetInstanceProcAddr(created, "vkCreateDebugUtilsMessengerEXT")(
        created, info, None)])
    return created


class VkAdapter:
    """One physical device, described as wgpu describes an adapter (``info``, ``features``, ``limits``)."""

    def __init__(self, physical: Any, raw: RawDevice, validate: str = "", profile: str = ""):
        self.physical = physical
        self.raw = raw
        self.profile = profile
        """``--device-profile`` (``vkdiff.device.shaders.device_profiles``): rules applied to every module loaded."""
        self.validate = layered(validate)
        """The validation layer's mode on this adapter's instance (``""``: none)."""
        self.info = {"device": raw.name, "vendor_id": raw.vendor_id, "vendor": "",
                     "description": f"raw Vulkan {raw.api_version}, driver {raw.driver_version:#x}",
                     "backend_type": "Vulkan", "adapter_type": raw.device_type}
        self.features = wgpu_features(raw)
        self.vulkan_features = tuple(f"vk:{name}" for name, ok in raw.features.items() if ok) + (
            ((f"layer:{VALIDATION_LAYER}",) if self.validate else ()) + (
                ("layer:gpu-assisted",) if self.validate == "gpu" else ()))
        """The device's own features (``vk:storageBuffer8BitAccess``…), recorded with every result."""
        self.limits = wgpu_limits(raw)
        self.transport = "vulkan"

    def request_device_sync(self, required_features: Sequence[str] = (), required_limits: dict | None = None,
                            label: str = "") -> "VkDevice":
        return VkDevice(self, dict(required_limits or self.limits), label)


def wgpu_features(raw: RawDevice) -> set[str]:
    """The wgpu feature names vkdiff asks for, from the device's own features (push constants always exist)."""
    have = raw.features
    names = {"immediates", "texture-adapter-specific-format-features", "subgroup"}
    if have.get("shaderFloat16") and have.get("storageBuffer16BitAccess"):
        names.add("shader-f16")
    if have.get("shaderInt16"):
        names.add("shader-i16")
    if have.get("shaderInt64"):
        names.add("shader-int64")
    return names


def wgpu_limits(raw: RawDevice) -> dict[str, int]:
    """The device's ``VkPhysicalDeviceLimits`` under the names vkdiff's launchers read (wgpu's)."""
    lim = raw.limits
    return {"max-texture-dimension-2d": lim["maxImageDimension2D"],
            "max-texture-dimension-3d": lim["maxImageDimension3D"],
            "max-storage-buffer-binding-size": lim["maxStorageBufferRange"],
            "max-buffer-size": max(lim["maxStorageBufferRange"], lim.get("maxMemoryAllocationSize", 0)),
            "max-compute-workgroup-size-x": lim["maxComputeWorkGroupSize"][0],
            "max-compute-workgroup-size-y": lim["maxComputeWorkGroupSize"][1],
            "max-compute-workgroup-size-z": lim["maxComputeWorkGroupSize"][2],
            "max-compute-invocations-per-workgroup": lim["maxComputeWorkGroupInvocations"],
            "max-compute-workgroup-storage-size": lim["maxComputeSharedMemorySize"],
            "max-compute-workgroups-per-dimension": min(lim["maxComputeWorkGroupCount"]),
            "max-immediate-size": lim["maxPushConstantsSize"],
            "max-storage-buffers-per-shader-stage": lim["maxPerStageDescriptorStorageBuffers"],
            "max-storage-textures-per-shader-stage": lim["maxPerStageDescriptorStorageImages"]}


def probe() -> list[RawDevice]:
    """Every physical device the loader lists, with ``FEATURES``, ``EXTENSIONS`` and ``LIMITS``.

    Raises:
        RawVulkanError: the binding or the loader is missing, or instance creation fails.
    """
    return [adapter.raw for adapter in adapters()]


def adapters(validate: str = "", profile: str = "") -> list[VkAdapter]:
    """Every physical device the loader lists, on the instance for ``validate`` (``RunSettings.validate``), its
    devices loading every module under ``profile``'s rules.

    Raises:
        RawVulkanError: no binding, no loader, or instance creation failed.
    """
    vk = binding()
    created = instance(validate)
    return [VkAdapter(p, describe(vk, p, created), validate, profile) for p in vk.vkEnumeratePhysicalDevices(created)]


def _enable_chain(vk: Any, raw: RawDevice) -> tuple[Any, list[Any]]:
    """``VkPhysicalDeviceFeatures2`` → Vulkan11 → 12 → 13 (→ cooperative matrix) with every ``FEATURES`` entry the
    device has; the structs are returned too, to stay alive until ``vkCreateDevice`` returns."""
    on = {name for name, ok in raw.features.items() if ok}
    pick = lambda where: {n: 1 for n, w in FEATURES.items() if w == where and n in on}  # noqa: E731
    structs = [vk.VkPhysicalDeviceVulkan11Features(**pick("1.1")), vk.VkPhysicalDeviceVulkan12Features(**pick("1.2")),
               vk.VkPhysicalDeviceVulkan13Features(**pick("1.3"))]
    if "cooperativeMatrix" in on:
        structs.append(vk.VkPhysicalDeviceCooperativeMatrixFeaturesKHR(cooperativeMatrix=1))
    for first, second in zip(structs, structs[1:]):
        first.pNext = vk.ffi.addressof(second)
    core = vk.VkPhysicalDeviceFeatures(**pick("core"))
    return vk.VkPhysicalDeviceFeatures2(pNext=structs[0], features=core), structs


class VkDevice:
    """A logical device with one compute queue, behind the transport interface (``vkdiff.device.transports.transport``)."""

    transport = "vulkan"
    own_barriers = True
    """Only the barriers the runtime records (ET-VK's) run between commands."""
    aliases = True
    """A shared object's users are bound to one allocation, as ET-VK binds them."""
    specialises = True
    """Spec constants and the workgroup size go in at pipeline creation (``VkSpecializationInfo``)."""
    overlap: Any = None
    """The ``Overlap`` running tasks on the device, if any (its tasks' submissions give way)."""

    def __init__(self, adapter: VkAdapter, limits: dict[str, int], label: str = ""):
        vk = binding()
        self.adapter, self.raw, self.limits, self.label = adapter, adapter.raw, limits, label
        self.finalizers: list = []
        self.format_features: dict[int, int] = {}
        """``VkFormat`` → its optimal-tiling features, asked once."""
        """Finalizers of the device's buffers, images and descriptor sets (``vk_memory.owned_by``)."""
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(adapter.physical)
        self.family = next(i for i, q in enumerate(families) if q.queueFlags & vk.VK_QUEUE_COMPUTE_BIT)
        chain, keep = _enable_chain(vk, self.raw)
        extensions = ["VK_KHR_cooperative_matrix"] if self.raw.features.get("cooperativeMatrix") else []
        create = vk.VkDeviceCreateInfo(
            pNext=chain, ppEnabledExtensionNames=extensions,
            pQueueCreateInfos=[vk.VkDeviceQueueCreateInfo(queueFamilyIndex=self.family, queueCount=1,
                                                          pQueuePriorities=[1.0])])
        self.handle = vk_call(RawVulkanError, f"vkCreateDevice on {self.raw.name}", vk.vkCreateDevice,
                              adapter.physical, create, None)
        del keep
        self.memory = vk.vkGetPhysicalDeviceMemoryProperties(adapter.physical)
        self.arena = device_arena(self.handle, self.memory)
        self.descriptors = descriptor_pools(self.handle)
        self.queue = Queue(self)
        self.sampler = vk.vkCreateSampler(self.handle, vk.VkSamplerCreateInfo(
            magFilter=vk.VK_FILTER_NEAREST, minFilter=vk.VK_FILTER_NEAREST,
            mipmapMode=vk.VK_SAMPLER_MIPMAP_MODE_NEAREST, addressModeU=vk.VK_SAMPLER_ADDRESS_MODE_REPEAT,
            addressModeV=vk.VK_SAMPLER_ADDRESS_MODE_REPEAT, addressModeW=vk.VK_SAMPLER_ADDRESS_MODE_REPEAT,
            maxAnisotropy=1.0, maxLod=vk.VK_LOD_CLAMP_NONE,
            borderColor=vk.VK_BORDER_COLOR_FLOAT_TRANSPARENT_BLACK), None)
        """ET-VK's image sampler (``vTensorStorage``'s ``sampler_props``: nearest, repeat, transparent black)."""
        self._direct = self._direct_memory_type()
        cached = binding().VK_MEMORY_PROPERTY_HOST_CACHED_BIT
        self.reads_mapped = self._direct is None or self.raw.device_type != "discrete" or bool(
            self.memory.memoryTypes[self._direct].propertyFlags & cached)
        """Whether mapped buffers are read in place; else through a copy into host-cached memory (the CPU reads
        uncached video memory through a resizable BAR a bus round trip at a time: 27 s of the kernel suite on an
        H200)."""
        self.pipeline_store = PipelineStore(vk, self.handle, adapter.physical)
        self.shader_objects: dict[bytes, ShaderObjects] = {}
        """Each module's reflection, layouts and ``VkShaderModule``, by the module's sha256."""
        weakref.finalize(self, _destroy_device, self.handle, self.queue.release_handles(), self.sampler,
                         self.finalizers, self.pipeline_store, self.arena, self.descriptors)

    @staticmethod
    def call(error_type: type, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """The raw transport's calls raise typed errors where they reach the binding (``vk_memory.vk_call``)."""
        return fn(*args, **kwargs)

    def host_memory_type(self, bits: int) -> int:
        """A host-visible, coherent type for staging, host-cached where one is (reads from write-combined memory
        are slow), else one not on the device (a BAR type last)."""
        vk = binding()
        visible = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        for extra in (vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT, 0):
            for index in range(self.memory.memoryTypeCount):
                flags = self.memory.memoryTypes[index].propertyFlags
                on_device = flags & vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT and self.raw.device_type == "discrete"
                if bits & (1 << index) and (flags & (visible | extra)) == visible | extra and not on_device:
                    return index
        return self.memory_type(bits, visible)

    def memory_type(self, bits: int, flags: int) -> int:
        for index in range(self.memory.memoryTypeCount):
            if bits & (1 << index) and (self.memory.memoryTypes[index].propertyFlags & flags) == flags:
                return index
        raise DeviceLimitError(f"{self.raw.name}: no memory type with flags {flags:#x} among {bits:#x}")

    def _direct_memory_type(self) -> int | None:
        """A device-local, host-visible, coherent type on a heap as large as the largest device-local one (a CPU
        device, unified memory, resizable BAR): buffers there are mapped, not staged."""
        vk = binding()
        want = (vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
                | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)
        heaps = [self.memory.memoryHeaps[i] for i in range(self.memory.memoryHeapCount)]
        largest = max((h.size for h in heaps if h.flags & vk.VK_MEMORY_HEAP_DEVICE_LOCAL_BIT), default=0)
        for index in range(self.memory.memoryTypeCount):
            kind = self.memory.memoryTypes[index]
            if (kind.propertyFlags & want) == want and heaps[kind.heapIndex].size >= largest:
                return index
        return None

    def create_buffer(self, *, size: int, usage: int = 0, label: str = "") -> "Buffer":
        """A buffer; with wgpu's ``MAP_READ`` usage bit (1) one in host-visible memory, for ``read_mapped``."""
        return Buffer(self, int(size), label, host=bool(int(usage) & 1))

    def create_buffer_with_data(self, *, data: Any, usage: int = 0, label: str = "") -> "Buffer":
        raw = np.frombuffer(memoryview(data).cast("B"), np.uint8)
        buffer = Buffer(self, raw.size, label)
        self.queue.write_buffer(buffer, 0, raw, fresh=True)
        return buffer

    def create_texture(self, *, size: Sequence[int], dimension: str = "2d", format: str, usage: int = 0,
                       label: str = "") -> "Image":
        return Image(self, tuple(int(s) for s in size), dimension, format, label)

    def create_command_encoder(self, label: str = "") -> Any:
        return Encoder(self, label)

    def create_bind_group(self, *, layout: Any, entries: Sequence[dict]) -> Any:
        return BindGroup(self, layout, entries)

    def allocate_shared(self, tensors: Sequence[Tensor], label: str) -> None:
        """Storage for the users of one ``SharedObject``: each buffer or image bound to one allocation at offset 0, as
        ``SharedObject::allocate`` and ``bind_users`` make it (this transport ``aliases``).

        Each buffer is sized as ``allocate`` sizes it (its canary band inside its bound range); the band of the largest
        buffer is written and checked (``Tensor.guard``) when no other user's storage reaches it, the other bands lie
        in storage a larger user may write. The allocation is poisoned through that buffer; images are not poisoned.
        """
        users, datas = [], []
        for tensor in tensors:
            spec, element = tensor.spec, tensor.spec.element_dtype
            if spec.storage == "buffer":
                count = max(spec.physical_numel, 1)
                data, guard = guarded(layouts.poison_like((count,), element))
                max_size = self.limits.get("max-storage-buffer-binding-size", 1 << 27)
                if data.size > max_size:
                    raise DeviceLimitError(f"{label}: {data.size} bytes exceeds max-storage-buffer-binding-size "
                                           f"{max_size}")
                users.append(self.call(DispatchError, f"create buffer {label}", Buffer, self, int(data.size), label,
                                      False, True))
                tensor.buffer_shape, tensor.guard = (count,), guard
            else:
                extent = texture_extent(self, spec, label)
                users.append(self.call(DispatchError, f"create texture {label}", Image, self, extent,
                                      "3d" if spec.storage == "texture3d" else "2d", layouts.TEXEL_FORMATS[element],
                                      label, True))
                data = None
            datas.append(data)
            tensor.handle, tensor.allocated = users[-1], spec
        self.call(DispatchError, f"allocate {label}", SharedMemory, self, users, label)
        buffers = [i for i, t in enumerate(tensors) if t.storage == "buffer"]
        band = max(buffers, key=lambda i: tensors[i].guard, default=None)
        for i, tensor in enumerate(tensors):
            reach = tensor.guard if tensor.storage == "buffer" else int(users[i].requirements.size)
            if band is not None and i != band and reach > tensors[band].guard:
                band = None
        for i in buffers:
            if i != band:
                tensors[i].guard = 0
        if band is not None:
            self.queue.write_buffer(users[band], 0, byte_view(datas[band]))

    def create_pipeline(self, spv: bytes, spec_constants: dict, local_size: tuple[int, int, int],
                        label: str) -> Pipeline:
        """The module exactly as glslc built it (rewritten by the adapter's device profile, ``device_profiles.rewritten``; a
        repro records what was loaded), specialised (``vk_commands.create_pipeline``)."""
        spv = device_profiles.rewritten(spv, self.adapter.profile)
        handle, layout, reflection = create_pipeline(self, spv, spec_constants, local_size, label)
        return Pipeline(handle=handle, layout=layout, reflection=reflection, local_size=tuple(local_size), module=spv,
                        spec=dict(spec_constants))

    def wait_parked(self, tokens: Sequence[Any]) -> None:
        """One wait for the submissions of every task an ``Overlap`` parked (each fence, as ``Queue._submit`` made
        it); a hang is the watchdog's to report, so the wait repeats."""
        vk = binding()
        fences = vk.ffi.new("VkFence[]", [token[0] for token in tokens])
        what = f"{len(tokens)} overlapped submissions"
        with watchdog.waiting(what):
            while (result := vk.lib.vkWaitForFences(self.handle, len(tokens), fences, vk.VK_TRUE,
                                                    WAIT_NS)) == vk.VK_TIMEOUT:
                pass
        vk_result(result, DispatchError, what)

    @staticmethod
    def read_copied(buffer: Any) -> bytes:
        """Read in place once the deferred dispatches have run (``Buffer.map_sync``): it stays mapped."""
        buffer.map_sync()
        return bytes(buffer.read_mapped())

    def defer(self, record: Any) -> bool:
        """Queue ``record``'s commands into the next submission (each followed by a full barrier), not under a
        validation layer, whose reports name the submission they come in."""
        if self.adapter.validate:
            return False
        encoder = self.create_command_encoder(label="deferred")
        record(encoder)
        self.queue.pending.extend(encoder.ops)
        self.queue.dispatches_pending = True
        return True

    def blit(self, src: Any, dst: Any, label: str) -> None:
        """``vkCmdBlitImage`` of the whole of ``src`` onto the whole of ``dst`` (formats converted, sizes scaled)."""
        encoder = self.create_command_encoder(label=label)
        encoder.blit_texture(src.handle, dst.handle)
        self.queue.submit([encoder.finish()])


def _destroy_device(handle: Any, queue_handles: tuple, sampler: Any, finalizers: list,
                    store: PipelineStore, arena: Arena, descriptors: DescriptorPools) -> None:
    vk = binding()
    try:
        vk.vkDeviceWaitIdle(handle)
        store.close(vk, handle)
        for finalizer in finalizers:
            finalizer()
        arena.close()
        descriptors.close()
        pool, fences = queue_handles
        for fence in fences:
            vk.vkDestroyFence(handle, fence, None)
        vk.vkDestroyCommandPool(handle, pool, None)
        vk.vkDestroySampler(handle, sampler, None)
        vk.vkDestroyDevice(handle, None)
    except Exception:  # noqa: BLE001 - at interpreter exit the loader may already be gone
        pass
