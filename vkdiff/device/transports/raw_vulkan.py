"""The raw Vulkan transport's device discovery: Vulkan devices as the loader lists them, with the features ET-VK's
shaders need and the limits it routes on, read through the pinned ``vulkan`` binding (cffi, 1.3.275.1).

Where wgpu shows only what naga can represent (no 8-bit storage buffers, no cooperative matrix), this reports
what the device itself has: the ground for a ``NOT_SUPPORTED`` that names a feature the *device* lacks.
The binding is imported only through ``binding()`` and only when asked for: importing it dlopens
``libvulkan.so.1``.

Example (``vk_device.probe()`` gives these for each device; lavapipe 22.3 lacks only cooperative matrix)::

    >>> lavapipe = RawDevice(name="llvmpipe", device_type="cpu", vendor_id=0x10005, api_version="1.3.230",
    ...                      driver_version=1, features={"storageBuffer8BitAccess": True, "cooperativeMatrix": False},
    ...                      extensions=("VK_KHR_8bit_storage",), limits={"maxImageDimension3D": 4096})
    >>> lavapipe.lacks(["storageBuffer8BitAccess", "cooperativeMatrix", "shaderInt16"])
    ['cooperativeMatrix', 'shaderInt16']
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

from vkdiff.device.boundary import DeviceError

FEATURES: dict[str, str] = {
    "robustBufferAccess": "core", "shaderInt16": "core", "shaderInt64": "core", "shaderFloat64": "core",
    "shaderStorageImageExtendedFormats": "core",
    "shaderStorageImageReadWithoutFormat": "core", "shaderStorageImageWriteWithoutFormat": "core",
    "storageBuffer16BitAccess": "1.1", "uniformAndStorageBuffer16BitAccess": "1.1", "storagePushConstant16": "1.1",
    "storageBuffer8BitAccess": "1.2", "uniformAndStorageBuffer8BitAccess": "1.2", "storagePushConstant8": "1.2",
    "shaderFloat16": "1.2", "shaderInt8": "1.2", "vulkanMemoryModel": "1.2", "vulkanMemoryModelDeviceScope": "1.2", "shaderSubgroupExtendedTypes": "1.2",
    "shaderIntegerDotProduct": "1.3", "subgroupSizeControl": "1.3", "computeFullSubgroups": "1.3",
    "synchronization2": "1.3",
    "cooperativeMatrix": "VK_KHR_cooperative_matrix",
}
"""Features ET-VK's shaders or device setup use, by the struct that holds them (core ``VkPhysicalDeviceFeatures``,
``Vulkan11/12/13Features``, or the extension's own struct). ``robustBufferAccess`` is vkdiff's, not ET-VK's: on a
CPU device (lavapipe) a shader's write past its buffer lands in vkdiff's own heap, so the raw transport turns it on
where the device has it; the canary guard bands (inside every bound range) still see writes past a tensor."""

LIMITS = ("maxImageDimension2D", "maxImageDimension3D", "maxStorageBufferRange", "maxPushConstantsSize",
          "maxComputeWorkGroupInvocations", "maxComputeSharedMemorySize", "maxComputeWorkGroupSize",
          "maxComputeWorkGroupCount", "maxPerStageDescriptorStorageBuffers", "maxPerStageDescriptorStorageImages")
"""``VkPhysicalDeviceLimits`` fields ET-VK routes on or a dispatch must fit (the two arrays as x, y, z lists)."""

SUBGROUP_OPERATIONS = {"GroupNonUniform": 0x1, "GroupNonUniformVote": 0x2, "GroupNonUniformArithmetic": 0x4,
                       "GroupNonUniformBallot": 0x8, "GroupNonUniformShuffle": 0x10,
                       "GroupNonUniformShuffleRelative": 0x20, "GroupNonUniformClustered": 0x40,
                       "GroupNonUniformQuad": 0x80}
"""SPIR-V subgroup capabilities → their ``VkSubgroupFeatureFlagBits``."""

EXTENSIONS = ("VK_KHR_8bit_storage", "VK_KHR_16bit_storage", "VK_KHR_shader_float16_int8",
              "VK_KHR_shader_integer_dot_product", "VK_KHR_cooperative_matrix", "VK_EXT_subgroup_size_control")
"""Device extensions whose presence is reported."""


class RawVulkanError(DeviceError):
    """The Vulkan loader or the binding failed (no loader, no driver, an instance the driver refuses)."""


@dataclasses.dataclass(frozen=True)
class RawDevice:
    """One physical device as raw Vulkan sees it."""

    name: str
    device_type: str
    vendor_id: int
    api_version: str
    driver_version: int
    features: dict[str, bool]
    """Every name of ``FEATURES``: whether the device supports it."""
    extensions: tuple[str, ...]
    """The ``EXTENSIONS`` the device has."""
    limits: dict[str, Any]
    subgroup_operations: int = 0
    """``VkSubgroupFeatureFlags`` the device supports in compute shaders (0: none)."""
    subgroup_size: int = 0

    def lacks(self, needed: Iterable[str]) -> list[str]:
        """The features of ``needed`` the device does not have, in order (empty: it has them all)."""
        return [name for name in needed if not self.features.get(name, False)]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_TYPES = {0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "cpu"}


def _version(packed: int) -> str:
    return f"{packed >> 22}.{(packed >> 12) & 0x3FF}.{packed & 0xFFF}"


def _features(vk: Any, physical: Any, extensions: set[str]) -> dict[str, bool]:
    """``vkGetPhysicalDeviceFeatures2`` through Vulkan 1.1/1.2/1.3 (and cooperative matrix, when present)."""
    f13 = vk.VkPhysicalDeviceVulkan13Features()
    f12 = vk.VkPhysicalDeviceVulkan12Features(pNext=f13)
    f11 = vk.VkPhysicalDeviceVulkan11Features(pNext=f12)
    coop = vk.VkPhysicalDeviceCooperativeMatrixFeaturesKHR() if "VK_KHR_cooperative_matrix" in extensions else None
    if coop is not None:
        f13.pNext = vk.ffi.addressof(coop)  # set after construction: `coop` stays referenced until the call returns
    chain = vk.VkPhysicalDeviceFeatures2(pNext=f11)
    vk.vkGetPhysicalDeviceFeatures2(physical, vk.ffi.addressof(chain))
    holders = {"core": chain.features, "1.1": f11, "1.2": f12, "1.3": f13, "VK_KHR_cooperative_matrix": coop}
    return {name: bool(holders[where] is not None and getattr(holders[where], name))
            for name, where in FEATURES.items()}


def binding() -> Any:
    """The ``vulkan`` module (importing it dlopens ``libvulkan.so.1``).

    Raises:
        RawVulkanError: the binding or the loader is missing (names what to install).
    """
    try:
        import vulkan
    except (ImportError, OSError) as exc:
        raise RawVulkanError(f"raw Vulkan: the `vulkan` binding cannot load ({exc}); run scripts/setup.sh "
                             f"(pip vulkan==1.3.275.1, apt libvulkan1)") from None
    return vulkan


def _limit(value: Any) -> Any:
    return [int(v) for v in value] if hasattr(value, "__len__") else int(value)


def int8_cooperative_matrix(vk: Any, instance: Any, physical: Any) -> bool:
    """Whether the device lists a cooperative-matrix shape with a signed 8-bit A type (ET-VK's
    ``supports_int8_coopmat``, from ``vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR``)."""
    name = "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"
    address = vk.lib.vkGetInstanceProcAddr(instance, name.encode())
    if address == vk.ffi.NULL:
        return False
    fn = vk.ffi.cast(f"PFN_{name}", address)
    count = vk.ffi.new("uint32_t*")
    if fn(physical, count, vk.ffi.NULL) != vk.VK_SUCCESS or not count[0]:
        return False
    props = vk.ffi.new("VkCooperativeMatrixPropertiesKHR[]", count[0])
    for index in range(count[0]):
        props[index].sType = vk.VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR
    if fn(physical, count, props) != vk.VK_SUCCESS:
        return False
    return any(props[i].AType == vk.VK_COMPONENT_TYPE_SINT8_KHR for i in range(count[0]))


def describe(vk: Any, physical: Any, instance: Any = None) -> RawDevice:
    """One physical device's identity, ``FEATURES``, ``EXTENSIONS``, ``LIMITS`` and subgroup support; with the
    instance, also ``int8CooperativeMatrix`` among the features (a property ET-VK routes on, not a feature)."""
    props = vk.vkGetPhysicalDeviceProperties(physical)
    present = {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(physical, None)}
    subgroup = vk.VkPhysicalDeviceSubgroupProperties()
    vk.vkGetPhysicalDeviceProperties2(physical, vk.ffi.addressof(vk.VkPhysicalDeviceProperties2(
        pNext=vk.ffi.addressof(subgroup))))
    compute = bool(subgroup.supportedStages & vk.VK_SHADER_STAGE_COMPUTE_BIT)
    features = _features(vk, physical, present)
    if instance is not None and features.get("cooperativeMatrix"):
        features["int8CooperativeMatrix"] = int8_cooperative_matrix(vk, instance, physical)
    return RawDevice(name=str(props.deviceName), device_type=_TYPES.get(props.deviceType, str(props.deviceType)),
                     vendor_id=int(props.vendorID), api_version=_version(props.apiVersion),
                     driver_version=int(props.driverVersion), features=features,
                     extensions=tuple(e for e in EXTENSIONS if e in present),
                     limits={name: _limit(getattr(props.limits, name)) for name in LIMITS},
                     subgroup_operations=int(subgroup.supportedOperations) if compute else 0,
                     subgroup_size=int(subgroup.subgroupSize))
