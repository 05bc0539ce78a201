"""Routing profiles are data; each resolves against an adapter and names itself."""

from __future__ import annotations

import pytest

from vkdiff.device.adapters import DeviceInfo
from vkdiff.device.routing import UnknownRouteError, check_route, profiles, route_for

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
