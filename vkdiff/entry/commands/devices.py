"""``vkdiff devices``: adapters as wgpu lists them, or (``--transport vulkan``) each device's own features."""

from __future__ import annotations

import argparse
import json
import sys

from vkdiff.entry.terminal import console as terminal_console


def add_parser(sub) -> None:
    devices = sub.add_parser("devices", help="List Vulkan adapters with features and limits")
    devices.add_argument("--json", action="store_true", help="Print JSON instead of a table")
    devices.add_argument("--all-backends", action="store_true", help="Include non-Vulkan adapters (OpenGL, ...)")
    devices.add_argument("--transport", choices=("wgpu", "vulkan"), default="wgpu",
                         help="wgpu: adapters as wgpu (naga) sees them; vulkan: the devices' own features and limits "
                              "through raw Vulkan (what the device has, whatever naga can represent)")


def run(args: argparse.Namespace) -> int:
    """``vkdiff devices``: adapters as wgpu lists them, or (``--transport vulkan``) each device's own features."""
    return {"vulkan": lambda: _raw_devices(args.json)}.get(args.transport, lambda: _wgpu_devices(args))()


def _wgpu_devices(args: argparse.Namespace) -> int:
    from rich.table import Table

    from vkdiff.device.transports.adapters import enumerate_adapters

    infos = [info for info, _ in enumerate_adapters(None if args.all_backends else "Vulkan")]
    if args.json:
        print(json.dumps([i.to_dict() for i in infos], indent=2))
        return 0
    console = terminal_console()
    for i in infos:
        table = Table(title=f"{i.slug}", show_header=False, title_justify="left")
        table.add_column("field", style="bold")
        table.add_column("value")
        for field, value in (("name", i.name), ("vendor", f"{i.vendor} ({i.vendor_id:#x})"), ("driver", i.driver),
                             ("backend", i.backend), ("type", i.adapter_type), ("features", ", ".join(i.features))):
            table.add_row(field, value)
        for limit, value in i.limits.items():
            table.add_row(limit, str(value))
        console.print(table)
    if not infos:
        print("no adapters found (install mesa-vulkan-drivers for lavapipe)")
    return 0


def _raw_devices(as_json: bool) -> int:
    """``vkdiff devices --transport vulkan``: each device's features (yes/no) and limits through raw Vulkan."""
    from rich.table import Table

    from vkdiff.device.transports.raw_vulkan import RawVulkanError
    from vkdiff.device.transports.vk_device import probe

    try:
        devices = probe()
    except RawVulkanError as exc:
        print(f"vkdiff: {exc}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps([d.to_dict() for d in devices], indent=2))
        return 0
    console = terminal_console()
    for d in devices:
        table = Table(title=f"{d.name} (raw Vulkan {d.api_version}, {d.device_type})", show_header=False,
                      title_justify="left")
        table.add_column("field", style="bold")
        table.add_column("value")
        table.add_row("has", ", ".join(name for name, ok in d.features.items() if ok))
        table.add_row("lacks", ", ".join(name for name, ok in d.features.items() if not ok) or "—")
        table.add_row("extensions", ", ".join(d.extensions))
        for limit, value in d.limits.items():
            table.add_row(limit, str(value))
        console.print(table)
    if not devices:
        print("no Vulkan devices found (install mesa-vulkan-drivers for lavapipe)")
    return 0
