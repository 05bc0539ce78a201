"""The raw Vulkan transport's pipelines, descriptor sets, command recording and queue.

A pipeline is the module exactly as glslc built it: spec constants (the workgroup size at ids 0–2, as ET-VK's
``Context::get_descriptor_set`` prepends it) go through ``VkSpecializationInfo``, the descriptor set layout and
push-constant range come from the module's own declarations, combined image samplers stay combined (with ET-VK's
sampler). A module that needs a feature the device lacks is ``NOT_SUPPORTED`` naming the feature.

Commands are recorded into one command buffer per submission, each separated from the next by a full memory
barrier (what wgpu inserts, so both transports order work alike; ET-VK's own barriers are the whole-graph mode's).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import struct
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from vkdiff.device.shaders import spirv
from vkdiff.device.transports import watchdog
from vkdiff.device.boundary import (DispatchError, InstrumentationError, OutOfBoundsError, ShaderLoadError,
                                    ShaderUnsupportedError, SyncHazardError)
from vkdiff.device.transports.raw_vulkan import SUBGROUP_OPERATIONS, binding
from vkdiff.device.transports.validation import LAYER_MESSAGES
from vkdiff.device.transports.vk_descriptors import DescriptorPools
from vkdiff.device.transports.vk_memory import (TEXEL_BYTES, WAIT_NS, WHOLE_SIZE, Buffer, Image, owned_by, subresource_range,
                                                vk_call, vk_result)

VkDevice = Any
"""``vk_device.VkDevice`` (which imports this module)."""

CAPABILITY_FEATURES = {
    "Int8": "shaderInt8", "Int16": "shaderInt16", "Int64": "shaderInt64", "Float16": "shaderFloat16",
    "Float64": "shaderFloat64", "StorageBuffer8BitAccess": "storageBuffer8BitAccess",
    "UniformAndStorageBuffer8BitAccess": "uniformAndStorageBuffer8BitAccess",
    "StoragePushConstant8": "storagePushConstant8", "StorageBuffer16BitAccess": "storageBuffer16BitAccess",
    "UniformAndStorageBuffer16BitAccess": "uniformAndStorageBuffer16BitAccess",
    "StoragePushConstant16": "storagePushConstant16", "DotProductInputAll": "shaderIntegerDotProduct",
    "DotProductInput4x8Bit": "shaderIntegerDotProduct", "DotProductInput4x8BitPacked": "shaderIntegerDotProduct",
    "DotProduct": "shaderIntegerDotProduct", "CooperativeMatrixKHR": "cooperativeMatrix",
    "VulkanMemoryModel": "vulkanMemoryModel", "StorageImageExtendedFormats": "shaderStorageImageExtendedFormats",
    "StorageImageReadWithoutFormat": "shaderStorageImageReadWithoutFormat",
    "StorageImageWriteWithoutFormat": "shaderStorageImageWriteWithoutFormat",
}
"""SPIR-V capabilities → the Vulkan feature a device must have (and vkdiff enables) for a module declaring them."""


def missing_features(device: VkDevice, capabilities: set[str]) -> list[str]:
    """What the device lacks for a module declaring ``capabilities``: features, and subgroup operations by name."""
    lacking = [f"{feature} (capability {cap})" for cap, feature in CAPABILITY_FEATURES.items()
               if cap in capabilities and not device.raw.features.get(feature, False)]
    lacking += [f"subgroup operation {cap} (VkSubgroupFeatureFlags {bit:#x})" for cap, bit in SUBGROUP_OPERATIONS.items()
                if cap in capabilities and not device.raw.subgroup_operations & bit]
    return lacking


_DESCRIPTORS = {"storage-buffer": "VK_DESCRIPTOR_TYPE_STORAGE_BUFFER", "uniform-buffer": "VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER",
                "storage-texture": "VK_DESCRIPTOR_TYPE_STORAGE_IMAGE"}


def descriptor_type(vk: Any, item: spirv.Binding) -> int:
    if item.kind == "sampled-texture":
        return vk.VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER if item.combined else vk.VK_DESCRIPTOR_TYPE_SAMPLED_IMAGE
    return getattr(vk, _DESCRIPTORS[item.kind])


@dataclasses.dataclass(frozen=True)
class SetLayout:
    """Descriptor set 0 as the module declares it."""

    handle: Any
    types: dict[int, int]
    """Binding number → ``VkDescriptorType``."""


@dataclasses.dataclass(frozen=True)
class ComputePipeline:
    handle: Any
    layout: Any
    """``VkPipelineLayout``."""
    set_layout: SetLayout
    label: str


def specialization(spv: bytes, values: Mapping[int, int | float | bool]) -> tuple[list[tuple[int, int, int]], bytes]:
    """``VkSpecializationMapEntry`` (id, offset, size) triples and data for the ids the module declares, each in its
    declared type (``spirv.spec_constant_types``); values for undeclared ids are dropped, as the driver would."""
    types = spirv.spec_constant_types(spv)
    entries, data = [], b""
    for spec_id in sorted(values):
        if spec_id not in types:
            continue
        kind, bits = types[spec_id]
        value = values[spec_id]
        code = {("bool", 32): "<I", ("int", 32): "<i", ("uint", 32): "<I", ("float", 32): "<f",
                ("int", 64): "<q", ("uint", 64): "<Q", ("float", 64): "<d", ("int", 16): "<h",
                ("uint", 16): "<H", ("float", 16): "<e"}[(kind, bits)]
        raw = struct.pack(code, float(value) if kind == "float" else int(value) & ((1 << bits) - 1)
                          if kind == "uint" or kind == "bool" else int(value))
        entries.append((spec_id, len(data), len(raw)))
        data += raw
    return entries, data


@dataclasses.dataclass(frozen=True)
class ShaderObjects:
    """What a module's pipelines share: its reflection, set layout, pipeline layout and ``VkShaderModule``."""

    reflection: spirv.Reflection
    set_layout: SetLayout
    layout: Any
    module: Any


def create_pipeline(device: VkDevice, spv: bytes, spec_constants: Mapping[int, int | float | bool],
                    local_size: tuple[int, int, int], label: str) -> tuple[ComputePipeline, SetLayout,
                                                                            spirv.Reflection]:
    """The module as built, specialised, through the device's ``VkPipelineCache``; its set layout; its reflection.
    The module, its layouts and its reflection are made once per module and device (``ShaderObjects``).

    Raises:
        ShaderUnsupportedError: the device lacks a feature or subgroup operation the module needs (named).
        ShaderLoadError: the driver refused the module or the pipeline.
    """
    key = hashlib.sha256(spv).digest()
    shader = device.shader_objects.get(key)
    if shader is None:
        shader = device.shader_objects[key] = _shader_objects(device, spv, label)
    vk = binding()
    handle = _compute_pipeline(vk, device.handle, shader.module, shader.layout, spv, spec_constants, local_size,
                               label, instrumented=device.adapter.validate == "gpu", store=device.pipeline_store)
    pipeline = ComputePipeline(handle, shader.layout, shader.set_layout, label)
    return pipeline, shader.set_layout, shader.reflection


def _shader_objects(device: VkDevice, spv: bytes, label: str) -> ShaderObjects:
    """The module's reflection, layouts and ``VkShaderModule`` (kept until the device goes)."""
    vk = binding()
    try:
        reflection = spirv.reflect(spv)
        caps = spirv.capabilities(spv)
    except spirv.SpirvError as exc:
        raise ShaderLoadError(f"{label}: {exc}") from None
    lacking = missing_features(device, caps)
    if lacking:
        raise ShaderUnsupportedError(f"{label}: needs {', '.join(lacking)}, which {device.raw.name} lacks")
    dev = device.handle
    bindings = [b for b in reflection.bindings if b.group == 0]
    types = {b.binding: descriptor_type(vk, b) for b in bindings}
    made: list[Callable[[], None]] = []
    """What was created so far, destroyed again (newest first) if a later step fails."""
    try:
        set_handle = vk_call(ShaderLoadError, f"{label}: descriptor set layout", vk.vkCreateDescriptorSetLayout, dev,
                             vk.VkDescriptorSetLayoutCreateInfo(pBindings=[
                                 vk.VkDescriptorSetLayoutBinding(binding=n, descriptorType=t, descriptorCount=1,
                                                                 stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT)
                                 for n, t in types.items()]), None)
        made.append(lambda: vk.vkDestroyDescriptorSetLayout(dev, set_handle, None))
        ranges = [vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0,
                                         size=reflection.immediate_size)] if reflection.immediate_size else []
        layout = vk_call(ShaderLoadError, f"{label}: pipeline layout", vk.vkCreatePipelineLayout, dev,
                         vk.VkPipelineLayoutCreateInfo(pSetLayouts=[set_handle], pPushConstantRanges=ranges), None)
        made.append(lambda: vk.vkDestroyPipelineLayout(dev, layout, None))
        module = vk_call(ShaderLoadError, f"{label}: vkCreateShaderModule", vk.vkCreateShaderModule, dev,
                         vk.VkShaderModuleCreateInfo(codeSize=len(spv), pCode=spv), None)
    except BaseException:
        for destroy in reversed(made):
            destroy()
        raise
    return ShaderObjects(reflection=reflection, set_layout=SetLayout(set_handle, types), layout=layout, module=module)


def _compute_pipeline(vk: Any, dev: Any, module: Any, layout: Any, spv: bytes,
                      spec_constants: Mapping[int, int | float | bool], local_size: tuple[int, int, int],
                      label: str, instrumented: bool = False, store: Any = None) -> Any:
    """``vkCreateComputePipelines`` for the module, specialised; a pipeline the validation layer reports on is
    destroyed and refused.

    Raises:
        ShaderLoadError: the driver or the layer refused it.
        InstrumentationError: GPU-assisted validation's instrumentation could not create it.
    """
    entries, data = specialization(spv, {**dict(zip((0, 1, 2), local_size)), **dict(spec_constants)})
    info = vk.VkSpecializationInfo(
        pMapEntries=[vk.VkSpecializationMapEntry(constantID=i, offset=o, size=s) for i, o, s in entries],
        pData=vk.ffi.from_buffer(data)) if entries else None
    stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=module, pName="main",
                                               pSpecializationInfo=info)
    seen = len(LAYER_MESSAGES)
    with watchdog.waiting(f"creating the pipeline of {label}"):
        try:
            handle = vk_call(ShaderLoadError, f"{label}: vkCreateComputePipelines", vk.vkCreateComputePipelines,
                             dev, vk.VK_NULL_HANDLE if store is None else store.ready().handle, 1,
                             [vk.VkComputePipelineCreateInfo(stage=stage, layout=layout)], None)[0]
            if store is not None:
                store.made(vk, dev)
        except ShaderLoadError as exc:
            if instrumented and "VkErrorUnknown" in str(exc):
                raise InstrumentationError(
                    f"{exc} under the validation layer's GPU-assisted instrumentation, which rewrites the module: "
                    f"the pipeline itself is judged without --validate gpu") from None
            raise
    try:
        layer_errors(LAYER_MESSAGES[seen:], f"{label}: pipeline")
    except DispatchError as exc:
        vk.vkDestroyPipeline(dev, handle, None)
        raise ShaderLoadError(str(exc)) from None
    return handle


class BindGroup:
    """One descriptor set (from the device's shared pools) with buffers, storage images and combined image samplers
    written."""

    def __init__(self, device: VkDevice, layout: SetLayout, entries: Sequence[dict]):
        import weakref

        vk = binding()
        counts: dict[int, int] = {}
        for kind in layout.types.values():
            counts[kind] = counts.get(kind, 0) + 1
        pool, self.sets = device.descriptors.allocate(layout.handle, counts)
        """The set as the one-element array ``vkCmdBindDescriptorSets`` takes."""
        self.handle = self.sets[0]
        owned_by(device, weakref.finalize(self, device.descriptors.release, pool))
        self.resources = [e["resource"] for e in entries]
        """Kept alive as long as the set can be bound."""
        if entries:
            self._write_all(vk, device, layout, entries)

    def _write_all(self, vk: Any, device: VkDevice, layout: SetLayout, entries: Sequence[dict]) -> None:
        """One ``vkUpdateDescriptorSets`` for every entry, its structs filled in place."""
        ffi = vk.ffi
        writes = ffi.new("VkWriteDescriptorSet[]", len(entries))
        infos = []
        for write, entry in zip(writes, entries):
            resource, kind = entry["resource"], layout.types[entry["binding"]]
            write.sType, write.dstSet, write.dstBinding = vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, self.handle, \
                entry["binding"]
            write.descriptorCount, write.descriptorType = 1, kind
            if isinstance(resource, dict):
                info = ffi.new("VkDescriptorBufferInfo *", {"buffer": resource["buffer"].handle,
                                                             "offset": int(resource.get("offset", 0)),
                                                             "range": int(resource["size"])})
                write.pBufferInfo = info
            else:
                sampler = device.sampler if kind == vk.VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER else ffi.NULL
                info = ffi.new("VkDescriptorImageInfo *", {"sampler": sampler, "imageView": resource.view,
                                                            "imageLayout": vk.VK_IMAGE_LAYOUT_GENERAL})
                write.pImageInfo = info
            infos.append(info)
        vk.lib.vkUpdateDescriptorSets(device.handle, len(entries), writes, 0, ffi.NULL)


def buffer_copy(source: int, destination: int, size: int) -> Any:
    """One ``VkBufferCopy`` region, as the binding's ``lib`` takes it."""
    return binding().ffi.new("VkBufferCopy *", {"srcOffset": source, "dstOffset": destination, "size": size})


def descriptor_pools(device: Any) -> DescriptorPools:
    """The shared descriptor pools of a device, given its handle (``VkDevice``'s finalizer holds them)."""
    vk = binding()
    types = tuple(getattr(vk, name) for name in (*_DESCRIPTORS.values(), "VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER",
                                                 "VK_DESCRIPTOR_TYPE_SAMPLED_IMAGE"))

    def make(sizes: dict[int, int], sets: int) -> Any:
        return vk_call(DispatchError, "descriptor pool", vk.vkCreateDescriptorPool, device, vk.VkDescriptorPoolCreateInfo(
            maxSets=sets, pPoolSizes=[vk.VkDescriptorPoolSize(type=k, descriptorCount=n) for k, n in sizes.items()]),
                       None)

    def allocate(pool: Any, layout: Any) -> Any:
        """The set as a one-element array."""
        layouts, sets = vk.ffi.new("VkDescriptorSetLayout[1]", [layout]), vk.ffi.new("VkDescriptorSet[1]")
        info = vk.ffi.new("VkDescriptorSetAllocateInfo *", {
            "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, "descriptorPool": pool,
            "descriptorSetCount": 1, "pSetLayouts": layouts})
        vk_result(vk.lib.vkAllocateDescriptorSets(device, info, sets), DispatchError, "descriptor set")
        return sets

    return DescriptorPools(make, lambda pool: vk.vkResetDescriptorPool(device, pool, 0),
                           lambda pool: vk.vkDestroyDescriptorPool(device, pool, None), allocate, types)


Record = Callable[[Any], None]
"""Records one command into a ``VkCommandBuffer``."""


class ComputePass:
    """wgpu's compute pass: state set, then each ``dispatch_workgroups`` becomes one recorded dispatch."""

    def __init__(self, encoder: "Encoder"):
        self.encoder = encoder
        self.pipeline: ComputePipeline | None = None
        self.group: BindGroup | None = None
        self.immediates = b""

    def set_pipeline(self, pipeline: ComputePipeline) -> None:
        self.pipeline = pipeline

    def set_bind_group(self, index: int, group: BindGroup) -> None:
        self.group = group

    def set_immediates(self, offset: int, data: bytes, data_offset: int = 0, size: int | None = None) -> None:
        self.immediates = bytes(data)[data_offset: None if size is None else data_offset + size]

    def dispatch_workgroups(self, x: int, y: int = 1, z: int = 1) -> None:
        pipeline, group, data = self.pipeline, self.group, self.immediates

        def record(cb: Any) -> None:
            vk = binding()
            vk.lib.vkCmdBindPipeline(cb, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle)
            vk.lib.vkCmdBindDescriptorSets(cb, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout, 0, 1, group.sets, 0,
                                           vk.ffi.NULL)
            if data:
                vk.vkCmdPushConstants(cb, pipeline.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, len(data),
                                      vk.ffi.from_buffer(data))
            vk.lib.vkCmdDispatch(cb, int(x), int(y), int(z))

        self.encoder.ops.append(record)

    def end(self) -> None:
        pass


class Encoder:
    """wgpu's command encoder: compute passes and copies, recorded at submission."""

    def __init__(self, device: VkDevice, label: str = ""):
        self.device, self.label = device, label
        self.ops: list[Record] = []
        self.exact = False
        """Record only the barriers given (``pipeline_barrier``), none between commands."""

    def begin_compute_pass(self, **_: Any) -> ComputePass:
        return ComputePass(self)

    def copy_buffer_to_buffer(self, source: Buffer, source_offset: int, destination: Buffer, destination_offset: int,
                              size: int) -> None:
        region = buffer_copy(int(source_offset), int(destination_offset), int(size))
        self.ops.append(lambda cb: binding().lib.vkCmdCopyBuffer(cb, source.handle, destination.handle, 1, region))

    def copy_texture_to_buffer(self, source: dict, destination: dict, copy_size: Sequence[int]) -> None:
        image: Image = source["texture"]
        buffer: Buffer = destination["buffer"]
        region = image_copy(image, destination, copy_size, int(destination.get("offset", 0)))
        self.ops.append(lambda cb: binding().lib.vkCmdCopyImageToBuffer(
            cb, image.handle, binding().VK_IMAGE_LAYOUT_GENERAL, buffer.handle, 1, region))

    def copy_texture_to_texture(self, source: dict, destination: dict, size: Sequence[int]) -> None:
        src, dst = source["texture"], destination["texture"]

        def record(cb: Any) -> None:
            vk = binding()
            layers = image_layers(vk)
            zero = vk.VkOffset3D(x=0, y=0, z=0)
            region = vk.VkImageCopy(srcSubresource=layers, srcOffset=zero, dstSubresource=layers, dstOffset=zero,
                                    extent=vk.VkExtent3D(width=size[0], height=size[1], depth=size[2]))
            vk.vkCmdCopyImage(cb, src.handle, vk.VK_IMAGE_LAYOUT_GENERAL, dst.handle, vk.VK_IMAGE_LAYOUT_GENERAL, 1,
                              [region])

        self.ops.append(record)

    def blit_texture(self, source: Image, destination: Image) -> None:
        """``CommandBuffer::blit``: the whole source image onto the whole destination, ``VK_FILTER_NEAREST`` (converts
        formats and scales, which no wgpu command does)."""
        def record(cb: Any) -> None:
            vk = binding()
            layers = image_layers(vk)
            corner = lambda e: vk.VkOffset3D(x=e[0], y=e[1], z=e[2])  # noqa: E731
            region = vk.VkImageBlit(srcSubresource=layers, srcOffsets=[corner((0, 0, 0)), corner(source.extent)],
                                    dstSubresource=layers,
                                    dstOffsets=[corner((0, 0, 0)), corner(destination.extent)])
            vk.vkCmdBlitImage(cb, source.handle, vk.VK_IMAGE_LAYOUT_GENERAL, destination.handle,
                              vk.VK_IMAGE_LAYOUT_GENERAL, 1, [region], vk.VK_FILTER_NEAREST)

        self.ops.append(record)

    def pipeline_barrier(self, barrier: Any) -> None:
        """A ``vkapi::PipelineBarrier`` (``vkdiff.device.runtime.barriers``) as ``CommandBuffer::insert_barrier`` records it:
        its stage masks, one buffer barrier (whole buffer) or image barrier per resource. Images stay in
        ``GENERAL`` (vkdiff keeps every image there), so only access masks and stages differ from ET-VK's."""
        def record(cb: Any) -> None:
            vk = binding()
            buffers, images = [], []
            for r in barrier.resources:
                handle = r.handle
                if isinstance(handle, Buffer):
                    buffers.append(vk.VkBufferMemoryBarrier(
                        srcAccessMask=r.src_access, dstAccessMask=r.dst_access,
                        srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED, dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
                        buffer=handle.handle, offset=0, size=WHOLE_SIZE))
                elif isinstance(handle, Image):
                    images.append(vk.VkImageMemoryBarrier(
                        srcAccessMask=r.src_access, dstAccessMask=r.dst_access, oldLayout=vk.VK_IMAGE_LAYOUT_GENERAL,
                        newLayout=vk.VK_IMAGE_LAYOUT_GENERAL, srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
                        dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED, image=handle.handle,
                        subresourceRange=subresource_range(vk)))
            vk.vkCmdPipelineBarrier(cb, barrier.src or vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT,
                                    barrier.dst or vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, 0, 0, None,
                                    len(buffers), buffers or None, len(images), images or None)

        self.ops.append(record)

    def finish(self) -> "CommandList":
        return CommandList(self.ops, exact=self.exact)


class CommandList(list):
    """A finished encoder's commands; ``exact``: submitted without barriers between them."""

    def __init__(self, ops: Sequence[Record], exact: bool = False):
        super().__init__(ops)
        self.exact = exact


def image_copy(image: Image, layout: dict, size: Sequence[int], offset: int = 0) -> Any:
    """One ``VkBufferImageCopy`` of the image's first ``size`` texels, the buffer side laid out as ``layout`` says
    (``bytes_per_row``, ``rows_per_image``, as wgpu's ``ImageCopyBuffer``)."""
    vk = binding()
    texel = TEXEL_BYTES[image.format]
    return vk.ffi.new("VkBufferImageCopy *", {
        "bufferOffset": offset, "bufferRowLength": int(layout.get("bytes_per_row", 0)) // texel,
        "bufferImageHeight": int(layout.get("rows_per_image", 0)),
        "imageSubresource": {"aspectMask": vk.VK_IMAGE_ASPECT_COLOR_BIT, "mipLevel": 0, "baseArrayLayer": 0,
                             "layerCount": 1},
        "imageExtent": {"width": int(size[0]), "height": int(size[1]), "depth": int(size[2])}})


def image_layers(vk: Any) -> Any:
    return vk.VkImageSubresourceLayers(aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, mipLevel=0, baseArrayLayer=0,
                                       layerCount=1)


ERROR_SEVERITY = 0x1000
"""``VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT``."""
OUT_OF_BOUNDS = "access out of bounds"
"""How GPU-assisted validation words an access past a descriptor's range (a warning where robustBufferAccess makes
it defined, which vkdiff turns on: ET-VK does not)."""


def layer_errors(messages: Sequence[tuple[int, str, str]], what: str) -> None:
    """Raise for the first error the validation layer reported about a submission (or an out-of-bounds access, which
    it reports as a warning): a hazard is ``SyncHazardError`` (``FAIL_SYNC``), an out-of-bounds access
    ``OutOfBoundsError`` (``FAIL_OOB``), anything else ``DispatchError`` (invalid usage, by the port or by vkdiff),
    each with the layer's message id and first lines."""
    errors = [(name, text) for severity, name, text in messages
              if severity & ERROR_SEVERITY or OUT_OF_BOUNDS in text.lower()]
    if not errors:
        return
    name, text = errors[0]
    more = f" ({len(errors) - 1} more)" if len(errors) > 1 else ""
    said = f"{what}: validation layer {name}: {' '.join(text.split())[:600]}{more}"
    if name.startswith("SYNC-HAZARD"):
        raise SyncHazardError(said)
    if OUT_OF_BOUNDS in text.lower():
        raise OutOfBoundsError(said)
    raise DispatchError(said)


@functools.lru_cache(maxsize=None)
def _barriers(vk: Any) -> tuple[Any, Any]:
    """The two memory barriers every submission records, made once (the binding's struct wrappers cost 15 µs each)."""
    return tuple(vk.ffi.new("VkMemoryBarrier *", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                                  "srcAccessMask": vk.VK_ACCESS_MEMORY_WRITE_BIT, "dstAccessMask": dst})
                 for dst in (vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT, vk.VK_ACCESS_HOST_READ_BIT))


def full_barrier(vk: Any, cb: Any) -> None:
    """Every earlier write available and visible to every later access (what wgpu's tracker amounts to here)."""
    vk.lib.vkCmdPipelineBarrier(cb, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1,
                                _barriers(vk)[0], 0, vk.ffi.NULL, 0, vk.ffi.NULL)


def _to_host(vk: Any, cb: Any) -> None:
    vk.lib.vkCmdPipelineBarrier(cb, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                                _barriers(vk)[1], 0, vk.ffi.NULL, 0, vk.ffi.NULL)


class Queue:
    """The device's compute queue; every submission is waited for.

    As wgpu's ``Queue.write_*``, uploads to device-local memory and new images' layout transitions are deferred:
    recorded at the head of the next submission (one fence wait for a launch's staging and its dispatches), or
    submitted alone before a kept command buffer or a read.
    """

    def __init__(self, device: VkDevice):
        vk = binding()
        self.device = device
        dev = device.handle
        self.handle = vk.vkGetDeviceQueue(dev, device.family, 0)
        self.pool = vk.vkCreateCommandPool(dev, vk.VkCommandPoolCreateInfo(
            queueFamilyIndex=device.family, flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT), None)
        self.fence = vk.vkCreateFence(dev, vk.VkFenceCreateInfo(), None)
        self._fences = vk.ffi.new("VkFence[1]", [self.fence])
        self._allocate = vk.ffi.new("VkCommandBufferAllocateInfo *", {
            "sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, "commandPool": self.pool,
            "level": vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, "commandBufferCount": 1})
        self._begin = {keep: vk.ffi.new("VkCommandBufferBeginInfo *", {
            "sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
            "flags": 0 if keep else vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT}) for keep in (False, True)}
        """What every submission's calls take, made once: the hot path calls the binding's ``lib`` directly."""
        self.pending: list[Record] = []
        """Deferred uploads, layout transitions and dispatches, in order (their closures keep what they use
        alive)."""
        self.dispatches_pending = False
        """A dispatch is among ``pending`` (``VkDevice.defer``): the host reads or writes mapped memory only after
        it ran."""
        self.fences: list[Any] = [self.fence]
        """Every fence made (destroyed with the device)."""
        self.spare_fences: list[Any] = []
        """Fences of overlapped submissions (``_submit``) not in flight, each as the one-element array waits take."""

    def release_handles(self) -> tuple[Any, list[Any]]:
        return self.pool, self.fences

    def run(self, ops: Sequence[Record], what: str = "submission", barriers: bool = True,
            keep: bool = False) -> "Recorded | None":
        """Record ``ops`` into one command buffer (a full barrier between two, with ``barriers``), submit, wait;
        with ``keep``, the command buffer is kept for ``resubmit`` (ET-VK's reusable command buffer)."""
        if keep:
            self.flush()
        vk = binding()
        dev = self.device.handle
        head, self.pending, self.dispatches_pending = self.pending, [], False
        seen = len(LAYER_MESSAGES)  # the layer reports hazards within a command buffer as they are recorded
        cbs = vk.ffi.new("VkCommandBuffer[1]")
        vk_result(vk.lib.vkAllocateCommandBuffers(dev, self._allocate, cbs), DispatchError, f"{what}: command buffer")
        cb = cbs[0]
        recorded = Recorded(self, cbs, ops) if keep else None
        try:
            vk.lib.vkBeginCommandBuffer(cb, self._begin[keep])
            for record in head:
                record(cb)
                full_barrier(vk, cb)
            for index, record in enumerate(ops):
                if index and barriers:
                    full_barrier(vk, cb)
                record(cb)
            _to_host(vk, cb)
            vk_result(vk.lib.vkEndCommandBuffer(cb), DispatchError, what)
            self._submit(vk, cbs, what, seen)
        finally:
            if recorded is None:
                vk.lib.vkFreeCommandBuffers(dev, self.pool, 1, cbs)
        return recorded

    def flush(self, what: str = "upload") -> None:
        """Submit the deferred uploads and transitions now, if any."""
        if self.pending:
            self.run([], what)

    def resubmit(self, recorded: "Recorded", what: str = "resubmission") -> None:
        """Submit a kept command buffer again and wait (``submit_deferred_cmds_and_wait``)."""
        self.flush()
        self._submit(binding(), recorded.handles, what, len(LAYER_MESSAGES))

    def _submit(self, vk: Any, cbs: Any, what: str, seen: int) -> None:
        """Submit the one command buffer of the array ``cbs`` and wait for it; in one of an ``Overlap``'s tasks,
        give way to the others until a wait shared with theirs is done."""
        info = vk.ffi.new("VkSubmitInfo *", {"sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, "commandBufferCount": 1,
                                             "pCommandBuffers": cbs})
        overlap = self.device.overlap
        if overlap is not None and overlap.in_task():
            fences = self.spare_fences.pop() if self.spare_fences else self._new_fence(vk)
            vk_result(vk.lib.vkQueueSubmit(self.handle, 1, info, fences[0]), DispatchError, what)
            overlap.park(fences)
            self._wait(vk, self.device.handle, what, fences)
            self.spare_fences.append(fences)
        else:
            vk_result(vk.lib.vkQueueSubmit(self.handle, 1, info, self.fence), DispatchError, what)
            with watchdog.waiting(what):
                self._wait(vk, self.device.handle, what, self._fences)
        layer_errors(LAYER_MESSAGES[seen:], what)

    def _new_fence(self, vk: Any) -> Any:
        """A fence of its own for a submission waited for with others' (``VkDevice.wait_parked``)."""
        fences = vk.ffi.new("VkFence[1]", [vk.vkCreateFence(self.device.handle, vk.VkFenceCreateInfo(), None)])
        self.fences.append(fences[0])
        return fences

    @staticmethod
    def _wait(vk: Any, dev: Any, what: str, fences: Any) -> None:
        """Wait for the fence (a hang is the watchdog's to report, so waits repeat), then reset it."""
        while (result := vk.lib.vkWaitForFences(dev, 1, fences, vk.VK_TRUE, WAIT_NS)) == vk.VK_TIMEOUT:
            pass
        vk_result(result, DispatchError, what)
        vk.lib.vkResetFences(dev, 1, fences)

    def submit(self, command_lists: Sequence[list[Record]], keep: bool = False) -> "Recorded | None":
        exact = bool(command_lists) and all(getattr(ops, "exact", False) for ops in command_lists)
        return self.run([op for ops in command_lists for op in ops], "submission", barriers=not exact, keep=keep)


    def write_buffer(self, buffer: Buffer, buffer_offset: int, data: Any, data_offset: int = 0,
                     size: int | None = None, fresh: bool = False) -> None:
        """wgpu's ``write_buffer``; ``fresh``: a buffer just made, which no deferred dispatch can use (what they
        use stays alive, so its memory is not reused), written without running them first."""
        raw = np.frombuffer(memoryview(data).cast("B"), np.uint8)[data_offset: None if size is None
                                                                   else data_offset + size]
        end = int(buffer_offset) + raw.size
        if end > buffer.size:
            raise DispatchError(f"write of {raw.size} bytes at {buffer_offset} overruns {buffer.label or 'a buffer'} "
                                f"of {buffer.size} bytes")
        if buffer.mapped is not None:
            if not fresh:
                self.settle()
            buffer.mapped[int(buffer_offset):end] = raw.tobytes()
            return
        staging = Buffer(self.device, raw.size, "staging", host=True)
        staging.mapped[0:raw.size] = raw.tobytes()
        region = buffer_copy(0, int(buffer_offset), raw.size)
        self.pending.append(lambda cb: binding().lib.vkCmdCopyBuffer(cb, staging.handle, buffer.handle, 1, region))

    def read_buffer(self, buffer: Buffer, buffer_offset: int = 0, size: int | None = None) -> memoryview:
        size = buffer.size - int(buffer_offset) if size is None else int(size)
        if buffer.mapped is None or not self.device.reads_mapped:
            staging = Buffer(self.device, size, "staging", host=True)
            region = buffer_copy(int(buffer_offset), 0, size)
            self.run([lambda cb: binding().lib.vkCmdCopyBuffer(cb, buffer.handle, staging.handle, 1, region)], "read")
            return memoryview(bytes(staging.mapped[0:size]))
        self.settle()
        return memoryview(bytes(buffer.mapped[int(buffer_offset):int(buffer_offset) + size]))

    def settle(self) -> None:
        """Run the deferred dispatches before the host touches mapped memory they may read or write."""
        if self.dispatches_pending:
            self.flush("deferred dispatches, before the host reads or writes mapped memory")

    def write_texture(self, destination: dict, data: Any, data_layout: dict, size: Sequence[int]) -> None:
        image: Image = destination["texture"]
        raw = np.frombuffer(memoryview(data).cast("B"), np.uint8)
        staging = Buffer(self.device, raw.size, "staging", host=True)
        staging.mapped[0:raw.size] = raw.tobytes()
        region = image_copy(image, data_layout, size)
        vk = binding()
        self.pending.append(lambda cb: vk.lib.vkCmdCopyBufferToImage(cb, staging.handle, image.handle,
                                                                     vk.VK_IMAGE_LAYOUT_GENERAL, 1, region))

    def read_texture(self, source: dict, data_layout: dict, size: Sequence[int]) -> memoryview:
        image: Image = source["texture"]
        nbytes = int(data_layout["bytes_per_row"]) * int(data_layout.get("rows_per_image", size[1])) * int(size[2])
        staging = Buffer(self.device, nbytes, "staging", host=True)
        region = image_copy(image, data_layout, size)
        vk = binding()
        self.run([lambda cb: vk.lib.vkCmdCopyImageToBuffer(cb, image.handle, vk.VK_IMAGE_LAYOUT_GENERAL, staging.handle,
                                                           1, region)], "read texture")
        return memoryview(bytes(staging.mapped[0:nbytes]))

    def to_general(self, image: Image) -> None:
        """A new image's one layout transition: ``UNDEFINED`` → ``GENERAL``, where it stays."""
        vk = binding()
        barrier = vk.VkImageMemoryBarrier(
            srcAccessMask=0, dstAccessMask=vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT,
            oldLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED, newLayout=vk.VK_IMAGE_LAYOUT_GENERAL,
            srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED, dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
            image=image.handle, subresourceRange=subresource_range(vk))
        self.pending.append(lambda cb: vk.vkCmdPipelineBarrier(cb, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT,
                                                               vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 0, None, 0,
                                                               None, 1, [barrier]))


class Recorded:
    """A kept command buffer, with what it records (whose closures keep its resources alive); freed when
    unreferenced."""

    def __init__(self, queue: Queue, handles: Any, ops: Sequence[Record]):
        import weakref

        self.handles, self.ops = handles, list(ops)
        """``handles``: the command buffer as a one-element array (what submitting and freeing it take)."""
        self.handle = handles[0]
        owned_by(queue.device, weakref.finalize(self, _free_command_buffer, queue.device.handle, queue.pool, handles))


def _free_command_buffer(device: Any, pool: Any, handles: Any) -> None:
    try:
        binding().lib.vkFreeCommandBuffers(device, pool, 1, handles)
    except Exception:  # noqa: BLE001 - at interpreter exit the loader may already be gone
        pass
