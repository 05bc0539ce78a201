"""The transport interface: both transports implement it, and nothing outside them asks which one it is."""

from __future__ import annotations

import re

from pathlib import Path

import pytest

from tests.testutils import isolated, requires_vulkan
from vkdiff.device.transports.transport import Transport

PACKAGE = Path(__file__).resolve().parents[2] / "vkdiff"
TRANSPORT_MODULES = {f"device/transports/{name}.py" for name in ("transport", "wgpu_device", "vk_device", "vk_commands",
                                                                  "vk_memory", "raw_vulkan", "adapters", "validation")}
"""The transports themselves (and the adapter listing that opens one or the other)."""
BRANCH = re.compile(r"transport[\"']?\s*[!=]=\s*[\"'](vulkan|wgpu)|getattr\([^)]*[\"']transport[\"']|"
                    r"hasattr\([^)]*[\"'](own_barriers|aliases|specialises|create_pipeline|blit)[\"']")
RUNTIME_ROOMS = ("device", "executors", "verdicts", "harness", "repro", "bisect", "reports")
"""Where device behaviour is used; ``entry`` reads the user's ``--transport`` and ``datamodel`` names a result's
column from the transport it records, neither asks a device."""


def test_no_code_outside_a_transport_asks_which_transport_it_is():
    found = [f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
             for room in RUNTIME_ROOMS for path in sorted((PACKAGE / room).rglob("*.py"))
             if str(path.relative_to(PACKAGE)) not in TRANSPORT_MODULES
             for number, line in enumerate(path.read_text().splitlines(), 1) if BRANCH.search(line)]
    assert not found, "\n".join(found)


def _members() -> set[str]:
    return {name for name in dir(Transport) if not name.startswith("_")} | set(Transport.__annotations__)


def test_the_wgpu_transport_implements_the_interface(gpu):
    assert isinstance(gpu, Transport)
    assert {name for name in _members() if not hasattr(gpu, name)} == set()
    assert (gpu.transport, gpu.own_barriers, gpu.aliases, gpu.specialises) == ("wgpu", False, False, False)


def _raw_device_members() -> tuple[bool, set[str], tuple]:
    from vkdiff.device.transports.adapters import create_device, enumerate_adapters

    info, adapter = enumerate_adapters(via="vulkan")[0]
    device = create_device(info, adapter)
    return (isinstance(device, Transport), {name for name in _members() if not hasattr(device, name)},
            (device.transport, device.own_barriers, device.aliases, device.specialises))


@requires_vulkan
def test_the_raw_vulkan_transport_implements_the_interface():
    implements, missing, traits = isolated(_raw_device_members)
    assert implements and missing == set()
    assert traits == ("vulkan", True, True, True)


def test_usage_flags_are_wgpus():
    """The raw transport's copy of WebGPU's flags (it never imports wgpu) has wgpu's values."""
    wgpu = pytest.importorskip("wgpu")
    from vkdiff.device.runtime import usage

    for flags in (usage.BufferUsage, usage.TextureUsage, usage.MapMode):
        theirs = getattr(wgpu, flags.__name__)
        assert {flag.name: int(flag) for flag in flags} == {flag.name: int(getattr(theirs, flag.name)) for flag in flags}
