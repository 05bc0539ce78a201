"""Mobile limits profiles: a wgpu device created with a phone's limits (``limits.toml``, data, not code).

``apply`` lowers an adapter's limits to a profile's (never above what the adapter
reports); ``create_device`` requests exactly those, so wgpu validates textures,
buffers, bindings and dispatches against them, and ET-VK host code that reads
``device.limits`` decides as on the phone. Checks that name the limit before wgpu
would fail obscurely live in ``resources.allocate`` and ``dispatch``.
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import Any, Mapping

LIMITS_FILE = Path(__file__).with_name("limits.toml")


class UnknownLimitsProfileError(ValueError):
    """``--limits-profile`` names no profile."""


@functools.lru_cache(maxsize=1)
def profiles() -> dict[str, dict[str, Any]]:
    """Every profile in ``limits.toml`` by name."""
    return tomllib.loads(LIMITS_FILE.read_text())


def check_limits_profile(name: str) -> str:
    """``name`` if it is a profile, else one line naming the known ones."""
    if name not in profiles():
        raise UnknownLimitsProfileError(f"--limits-profile {name}: no such limits profile; known: "
                                        f"{', '.join(profiles())} (defined in {LIMITS_FILE})")
    return name


def apply(adapter_limits: Mapping[str, int], name: str | None) -> dict[str, int]:
    """The limits to request: the adapter's, each lowered to the profile's value where the profile is lower."""
    limits = dict(adapter_limits)
    if name is None:
        return limits
    for key, value in profiles()[check_limits_profile(name)].items():
        if key != "description" and key in limits:
            limits[key] = min(int(limits[key]), int(value))
    return limits
