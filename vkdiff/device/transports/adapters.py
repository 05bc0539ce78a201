"""Vulkan adapters as vkdiff sees them: identity, features, limits, selection, device creation."""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Sequence

from vkdiff.capture import quiet_stderr
from vkdiff.device.transports.transport import Transport

WANTED_FEATURES = (
    "immediates",
    "texture-adapter-specific-format-features",
    "shader-f16",
    "shader-i16",
    "shader-int64",
    "subgroup",
)
"""Features requested whenever the adapter has them (ET-VK shaders use each somewhere)."""

REPORTED_LIMITS = (
    "max-texture-dimension-2d",
    "max-texture-dimension-3d",
    "max-storage-buffer-binding-size",
    "max-buffer-size",
    "max-compute-workgroup-size-x",
    "max-compute-workgroup-size-y",
    "max-compute-workgroup-size-z",
    "max-compute-invocations-per-workgroup",
    "max-compute-workgroup-storage-size",
    "max-compute-workgroups-per-dimension",
    "max-immediate-size",
    "max-storage-buffers-per-shader-stage",
    "max-storage-textures-per-shader-stage",
)
"""Limits that decide whether an ET-VK dispatch fits; all are requested at the adapter's maximum."""

REPORTS_DEVICE_FEATURES = {"wgpu": False, "vulkan": True}
"""Whether a transport's adapters report the device's own Vulkan features (what a ``from_device`` route reads)."""
LOADS_MODULES_AS_GIVEN = {"wgpu": False, "vulkan": True}
"""Whether a transport loads the SPIR-V it is given (a device profile rewrites it there; naga re-translates it)."""
TRANSFORMS_MODULES = {"wgpu": True, "vulkan": False}
"""Whether a transport runs glslc's modules transformed (for naga, by spirv-opt, unless transformed ones are cached)."""
ADAPTER_ENV = "VKDIFF_DEVICE"
"""Adapter selector when no ``--device`` is given (read where the run selects its adapters)."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class DeviceInfo:
    """Identity of one adapter, recorded with every result."""

    slug: str
    """Short stable name for file names and ``--device`` (e.g. ``llvmpipe``, ``nvidia-h200``)."""
    name: str
    """Adapter (device) name as the driver reports it."""
    vendor: str
    """Vendor name, or the PCI vendor id in hex when the driver gives none."""
    vendor_id: int
    """PCI vendor id."""
    driver: str
    """Driver description (Mesa version, NVIDIA driver version, ...)."""
    backend: str
    """wgpu backend: Vulkan, Metal, D3D12, OpenGL."""
    adapter_type: str
    """DiscreteGPU, IntegratedGPU, CPU, ..."""
    features: tuple[str, ...]
    """The wanted features this adapter has."""
    limits: dict[str, int]
    """The limits that matter (see ``REPORTED_LIMITS``)."""
    transport: str = "wgpu"
    """How vkdiff reaches the device: ``wgpu`` (naga re-translates every module) or ``vulkan`` (raw Vulkan: the
    SPIR-V as built); with ``vulkan``, ``features`` also lists the device's own (``vk:shaderInt8``…)."""
    profile: str = ""
    """``--device-profile`` its modules are rewritten under (``strict``: as the least accurate conformant device
    computes; the slug says so, ``llvmpipe-strict``); ``""``: as built."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_VENDORS = {0x10DE: "nvidia", 0x1002: "amd", 0x8086: "intel", 0x13B5: "arm", 0x5143: "qualcomm",
            0x10005: "mesa", 0x106B: "apple", 0x1AE0: "google", 0x144D: "samsung"}


def _slug(name: str, vendor_id: int) -> str:
    """Stable short slug: vendor plus the model word(s), lower case (``nvidia-h100``, ``llvmpipe``)."""
    lowered = name.lower()
    if "llvmpipe" in lowered:
        return "llvmpipe"
    if "swiftshader" in lowered:
        return "swiftshader"
    words = re.sub(r"\(.*?\)", " ", lowered)
    words = re.sub(r"[^a-z0-9]+", " ", words).split()
    vendor = _VENDORS.get(vendor_id, "")
    drop = {vendor, "nvidia", "amd", "intel", "corporation", "graphics", "gpu", "radeon", "geforce",
            "tm", "r", "pcie", "sxm5", "sxm", "nvl", "80gb", "94gb", "141gb", "hbm3", "mesa"}
    model = [w for w in words if w not in drop][:2]
    return "-".join([vendor] + model if vendor else model) or f"adapter-{vendor_id:x}"


def _info(adapter: Any) -> DeviceInfo:
    info = adapter.info
    vendor_id = int(info.get("vendor_id", 0))
    return DeviceInfo(
        slug=_slug(info.get("device", ""), vendor_id) + (f"-{adapter.profile}" if adapter.profile else ""),
        name=info.get("device", ""),
        vendor=info.get("vendor", "") or _VENDORS.get(vendor_id, f"{vendor_id:#06x}"),
        vendor_id=vendor_id,
        driver=info.get("description", ""),
        backend=info.get("backend_type", ""),
        adapter_type=info.get("adapter_type", ""),
        features=tuple(f for f in WANTED_FEATURES if f in adapter.features) + tuple(getattr(adapter, "vulkan_features",
                                                                                            ())),
        limits={k: int(adapter.limits[k]) for k in REPORTED_LIMITS if k in adapter.limits},
        transport=adapter.transport,
        profile=adapter.profile,
    )


def _unique_slugs(infos: list[DeviceInfo]) -> list[DeviceInfo]:
    seen: dict[str, int] = {}
    out = []
    for info in infos:
        n = seen.get(info.slug, 0)
        seen[info.slug] = n + 1
        out.append(info if n == 0 else dataclasses.replace(info, slug=f"{info.slug}-{n}"))
    return out


def enumerate_adapters(backend: str | None = "Vulkan", via: str = "wgpu",
                       validate: str = "", profile: str = "") -> list[tuple[DeviceInfo, Any]]:
    """Every adapter of ``backend`` (all backends when None) through transport ``via``, with its DeviceInfo (raw
    Vulkan lists the loader's physical devices, on an instance with ``validate``'s validation layer)."""
    if via == "vulkan":
        from vkdiff.device.transports.vk_device import adapters as raw_adapters

        adapters = raw_adapters(validate, profile)
        infos = _unique_slugs([_info(a) for a in adapters])
        return list(zip(infos, adapters))
    import wgpu

    from vkdiff.device.transports.wgpu_device import WgpuAdapter

    with quiet_stderr():
        adapters = wgpu.gpu.enumerate_adapters_sync()
    adapters = [WgpuAdapter(a) for a in adapters if backend is None or a.info.get("backend_type") == backend]
    infos = _unique_slugs([_info(a) for a in adapters])
    return list(zip(infos, adapters))


def import_for(via: str) -> None:
    """Import what ``select`` and ``create_device`` run through transport ``via``, so that another thread can run them
    (imports on two threads at once can deadlock on a cycle)."""
    if via == "vulkan":
        from vkdiff.device.transports import vk_device  # noqa: F401 - imported for the caller's threads
    else:
        import wgpu  # noqa: F401 - imported for the caller's threads

        from vkdiff.device.transports import wgpu_device  # noqa: F401 - imported for the caller's threads


class UnknownDeviceError(LookupError):
    """A ``--device`` selector matched no adapter."""


class NoAdapterError(LookupError):
    """A device is promised (``$VKDIFF_REQUIRE_DEVICE`` or ``$CI``) and no Vulkan adapter was found."""


REQUIRE_ENV = "VKDIFF_REQUIRE_DEVICE"
"""Set (``.ci/run`` sets it, as does ``$CI``) where a Vulkan adapter must exist: finding none fails the run."""


def device_promised() -> str | None:
    """The variable that promises a device (``VKDIFF_REQUIRE_DEVICE`` or ``CI``), or None."""
    return next((name for name in (REQUIRE_ENV, "CI") if os.environ.get(name) not in (None, "", "0", "false")), None)


def _no_adapter(promise: str) -> NoAdapterError:
    seen = [f"{i.name} ({i.backend})" for i, _ in enumerate_adapters(None)]
    return NoAdapterError(f"no Vulkan adapter found although ${promise} promises one (adapters seen: "
                          f"{', '.join(seen) or 'none'}); install mesa-vulkan-drivers (lavapipe) or a GPU driver")


def select(selectors: Sequence[str] = (), backend: str | None = "Vulkan", via: str = "wgpu",
           validate: str = "", profile: str = "") -> list[tuple[DeviceInfo, Any]]:
    """Adapters matching any selector (slug, or case-insensitive substring of name/driver).

    With no selector, ``$VKDIFF_DEVICE`` is used when set, else every adapter is chosen.

    Raises:
        UnknownDeviceError: a selector matched nothing; the message lists the slugs.
        NoAdapterError: no Vulkan adapter at all where ``device_promised()`` (names every adapter seen).
    """
    found = enumerate_adapters(backend, via, validate, profile)
    promise = device_promised()
    if not found and promise and backend == "Vulkan":
        raise _no_adapter(promise)
    origin = "--device"
    if not selectors and os.environ.get(ADAPTER_ENV):
        selectors, origin = [os.environ[ADAPTER_ENV]], f"${ADAPTER_ENV}"
    if not selectors:
        return found
    chosen = []
    for sel in selectors:
        hits = [(i, a) for i, a in found if i.slug == sel] or [
            (i, a) for i, a in found if sel.lower() in f"{i.name} {i.driver} {i.vendor}".lower()]
        if not hits:
            slugs = ", ".join(i.slug for i, _ in found) or "none"
            named = f"{origin} {sel!r}" if origin == "--device" else f"{origin}={sel!r}"
            raise UnknownDeviceError(f"no Vulkan adapter matches {named}; available: {slugs}")
        chosen += [h for h in hits if h not in chosen]
    return chosen


def create_device(info: DeviceInfo, adapter: Any, limits_profile: str | None = None) -> Transport:
    """A device (behind the transport interface) with every wanted feature the adapter has and its maximum limits
    (or a profile's lower ones)."""
    from vkdiff.device.transports.limits import apply

    limits = apply(info.limits, limits_profile)
    with quiet_stderr():
        return adapter.request_device_sync(required_features=list(info.features), required_limits=limits,
                                           label=f"vkdiff:{info.slug}")
