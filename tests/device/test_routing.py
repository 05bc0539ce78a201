"""Routing profiles are data; each resolves against an adapter and names itself."""

from __future__ import annotations

import dataclasses

import pytest

from vkdiff.device.transports.adapters import DeviceInfo
from vkdiff.device.runtime.routing import DeviceRouteError, UnknownRouteError, check_route, profiles, route_for

INFO = DeviceInfo(slug="x", name="x", vendor="nvidia", vendor_id=0x10DE, driver="d", backend="Vulkan",
                  adapter_type="DiscreteGPU", features=("shader-f16",), limits={})


def test_profiles_cover_the_vendors_and_native_takes_the_adapter():
    assert {"native", "mali", "adreno", "amd-coopmat", "no-dot-product"} <= set(profiles())
    native = route_for("native", INFO)
    assert native.vendor == "nvidia" and not native.integrated and native.float16_buffers
    mali = route_for("mali", INFO)
    assert mali.vendor == "arm" and mali.integrated and mali.subgroup_size == 16 and mali.name == "mali"
    assert not route_for("no-dot-product", INFO).int8_dot_product


def test_unknown_route_is_one_line_naming_the_known_ones():
    with pytest.raises(UnknownRouteError, match="--route mallí: no such routing profile; known: native, mali"):
        check_route("mallí")


def test_the_device_profile_asks_the_raw_device_as_et_vk_does():
    """``has_full_int8_buffers_support`` needs 8-bit storage buffers and int8 types; a wgpu adapter cannot answer."""

    raw = dataclasses.replace(INFO, features=INFO.features + (
        "vk:storageBuffer8BitAccess", "vk:shaderInt8", "vk:storageBuffer16BitAccess", "vk:shaderFloat16",
        "vk:cooperativeMatrix", "vk:shaderIntegerDotProduct"))
    route = route_for("device", raw)
    assert (route.int8_buffers, route.float16_buffers, route.cooperative_matrix, route.int8_dot_product) == (
        True, True, True, True)
    assert not route.int8_cooperative_matrix, "no vk:int8CooperativeMatrix: no signed 8-bit A type listed"
    no_int8 = dataclasses.replace(raw, features=tuple(f for f in raw.features if f != "vk:shaderInt8"))
    assert not route_for("device", no_int8).int8_buffers
    with pytest.raises(DeviceRouteError, match="--transport vulkan"):
        route_for("device", INFO)


def test_the_device_profile_through_wgpu_is_a_usage_error_before_device_work():
    from vkdiff.datamodel.settings import RunSettings
    from vkdiff.entry.options import route_transport_problem

    assert route_transport_problem(RunSettings(route="device")).endswith("add --transport vulkan")
    assert route_transport_problem(RunSettings(route="mali")) is None
    assert route_transport_problem(RunSettings(route="device", transport="vulkan")) is None
