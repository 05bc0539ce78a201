"""Raw Vulkan device discovery (the pinned ``vulkan`` binding): what the device itself has, where wgpu shows only
what naga can represent. Raw Vulkan runs in a process of its own (``testutils.isolated``)."""

from __future__ import annotations

import contextlib
import io
import json
import sys

import pytest

from tests.testutils import isolated, requires_vulkan
from vkdiff.device.transports import raw_vulkan, vk_device
from vkdiff.entry import cli


def probed() -> list[dict]:
    return [d.to_dict() for d in vk_device.probe()]


def cli_json() -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["devices", "--transport", "vulkan", "--json"])
    return code, out.getvalue()


@requires_vulkan
def test_each_wgpu_adapter_is_a_raw_device_with_the_same_limits():
    from vkdiff.device.transports.adapters import enumerate_adapters

    raw = {d["name"]: d for d in isolated(probed)}
    for info, _ in enumerate_adapters("Vulkan", via="wgpu"):
        device = raw[info.name]
        assert set(device["features"]) == set(raw_vulkan.FEATURES)
        assert device["limits"]["maxImageDimension2D"] == info.limits["max-texture-dimension-2d"]
        assert device["limits"]["maxImageDimension3D"] == info.limits["max-texture-dimension-3d"]


@requires_vulkan
def test_lavapipe_has_8bit_storage_that_naga_cannot_use_and_no_cooperative_matrix():
    """lavapipe 22.3 supports 8-bit storage buffers (naga does not: those shaders are NOT_SUPPORTED through wgpu)
    and int8 dot products, but not cooperative matrix."""
    lavapipe = [raw_vulkan.RawDevice(**d) for d in isolated(probed) if d["name"].startswith("llvmpipe")]
    if not lavapipe:
        pytest.skip("no lavapipe among the Vulkan devices")
    (device,) = lavapipe
    assert device.device_type == "cpu"
    assert device.lacks(["storageBuffer8BitAccess", "shaderIntegerDotProduct", "cooperativeMatrix",
                         "shaderInt16"]) == ["cooperativeMatrix"]
    assert "VK_KHR_cooperative_matrix" not in device.extensions


def test_a_missing_binding_is_one_line_naming_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "vulkan", None)
    with pytest.raises(raw_vulkan.RawVulkanError, match=r"the `vulkan` binding cannot load .*scripts/setup.sh"):
        vk_device.probe()


@requires_vulkan
def test_the_cli_lists_raw_devices_as_json():
    code, out = isolated(cli_json)
    assert code == 0
    listed = json.loads(out)
    assert listed and {"name", "features", "extensions", "limits"} <= set(listed[0])
