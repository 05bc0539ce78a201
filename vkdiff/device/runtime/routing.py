"""Routing profiles: the device properties ET-VK's host code picks shaders by, as parameters.

Profiles live in ``routes.toml`` beside this module (data, not code). ``route_for``
resolves a profile against one adapter: keys the profile leaves out come from what the
adapter reports. Launchers read only the resolved ``Route``, never the adapter, so one
device runs every vendor's path; every result records the profile.
"""

from __future__ import annotations

import dataclasses
import functools
import tomllib
from pathlib import Path
from typing import Any

ROUTES_FILE = Path(__file__).with_name("routes.toml")


@dataclasses.dataclass(kw_only=True, frozen=True)
class Route:
    """The routing-relevant properties of one (profile, device)."""

    name: str
    """Profile name (``native``, ``mali``, ...)."""
    int8_dot_product: bool
    cooperative_matrix: bool
    int8_cooperative_matrix: bool
    subgroup_size: int
    vendor: str
    integrated: bool
    int8_buffers: bool
    float16_buffers: bool

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@functools.lru_cache(maxsize=1)
def profiles() -> dict[str, dict[str, Any]]:
    """Every profile in ``routes.toml`` by name."""
    return tomllib.loads(ROUTES_FILE.read_text())


def usable_profiles(transport: str) -> list[str]:
    """The profiles ``transport`` can resolve (a ``from_device`` one needs the device's own features): what a sweep
    tries."""
    from vkdiff.device.transports.adapters import REPORTS_DEVICE_FEATURES

    own = REPORTS_DEVICE_FEATURES[transport]
    return [name for name, profile in profiles().items() if own or not profile.get("from_device")]


class UnknownRouteError(ValueError):
    """``--route`` names no profile."""


def check_route(name: str) -> str:
    """``name`` if it is a profile, else one line naming the known ones."""
    if name not in profiles():
        raise UnknownRouteError(f"--route {name}: no such routing profile; known: {', '.join(profiles())} "
                                f"(defined in {ROUTES_FILE})")
    return name


DEVICE_QUERIES = {"int8_dot_product": ("shaderIntegerDotProduct",), "cooperative_matrix": ("cooperativeMatrix",),
                  "int8_cooperative_matrix": ("int8CooperativeMatrix",),
                  "int8_buffers": ("storageBuffer8BitAccess", "shaderInt8"),
                  "float16_buffers": ("storageBuffer16BitAccess", "shaderFloat16")}
"""Route keys a ``from_device`` profile answers from raw Vulkan features, as ``vk_api/Adapter.h`` does
(``has_full_int8_buffers_support``: 8-bit storage buffers and int8 types; and so on)."""


class DeviceRouteError(ValueError):
    """A ``from_device`` profile on an adapter that reports no raw Vulkan features (wgpu)."""


def route_for(name: str, info: Any) -> Route:
    """Resolve profile ``name`` for an adapter (``DeviceInfo``): the profile's keys over the adapter's; a
    ``from_device`` profile (``device``) takes ET-VK's queries from the raw Vulkan features the adapter reports.

    Raises:
        DeviceRouteError: a ``from_device`` profile on a wgpu adapter (before any device work).
    """
    profile = profiles()[check_route(name)]
    if profile.get("from_device"):
        have = {f[3:] for f in getattr(info, "features", ()) if f.startswith("vk:")}
        if not have:
            raise DeviceRouteError(f"--route {name}: answers ET-VK's queries from the device's own Vulkan features, "
                                   f"which wgpu does not report: use it with --transport vulkan")
        profile = {key: all(f in have for f in needs) for key, needs in DEVICE_QUERIES.items()}
    native = {
        "subgroup_size": int(info.limits.get("subgroup-max-size") or info.limits.get("min-subgroup-size") or 32),
        "vendor": info.vendor,
        "integrated": info.adapter_type == "IntegratedGPU",
        "int8_buffers": False,
        "float16_buffers": "shader-f16" in info.features,
    }
    values = {**native, **{k: v for k, v in profile.items() if k not in ("description", "from_device")}}
    return Route(name=name, **{f.name: values[f.name] for f in dataclasses.fields(Route) if f.name != "name"})
