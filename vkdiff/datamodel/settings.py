"""How one run reaches and drives its devices: one value, decided by the entry point and passed down.

Environment variables are read only at the top of a process (``RunSettings.from_environment``:
defaults the CLI and the pytest plugin start from) and written only for the processes a
run starts (``environment``); below the entry points the value travels as an argument.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Mapping

TRANSPORTS = ("wgpu", "vulkan")
VALIDATIONS = ("", "sync", "gpu")
"""``--validate``: off, the hazard check (with the Khronos layer's synchronization validation on raw Vulkan), and
that plus the layer's GPU-assisted validation."""

DEVICE_PROFILES = ("", "strict", "mali", "adreno")
"""``--device-profile``: off, or the raw transport rewriting every module under a profile's liberties (``strict``: as
the least accurate conformant device computes; ``vkdiff/device/shaders/profiles.toml``)."""
RULE_SET = re.compile(r"[a-z_0-9]+(\+[a-z_0-9]+)*")
"""A device profile may also be rules of the strict profile joined by ``+`` (``division+contraction``); the device
room checks their names."""

ENVIRONMENT = {"transport": "VKDIFF_TRANSPORT", "validate": "VKDIFF_VALIDATE", "replays": "VKDIFF_REPLAYS",
               "local_wg": "VKDIFF_LOCAL_WG", "device_profile": "VKDIFF_DEVICE_PROFILE", "mediump": "VKDIFF_MEDIUMP"}
"""The settings a process may take from its environment, and the variable of each."""


class SettingsError(ValueError):
    """A setting (an option or its environment variable) has no meaning."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class RunSettings:
    """Every knob of a run that is not a case: where devices are reached and how each case is driven."""

    seed: int = 0
    """Session seed mixed into every case's input seed."""
    repeat: int = 1
    """Runs per case; bitwise differences are ``NONDETERMINISTIC``."""
    route: str = "native"
    """Routing profile launchers pick shaders by (``vkdiff.device.runtime.routing``)."""
    limits_profile: str | None = None
    """Mobile limits every device is created with (``vkdiff.device.transports.limits``)."""
    timeout: float | None = None
    """Seconds a device may be waited on in its child process (None: in-process, no watchdog)."""
    transport: str = "wgpu"
    """How devices are reached: ``wgpu`` or raw ``vulkan``."""
    validate: str = ""
    """``--validate``: ``""`` (off), ``sync`` or ``gpu``."""
    replays: int = 0
    """``--mode graph --replays N``: whole-graph replays of every model case's delegates after the node-by-node run."""
    local_wg: str | None = None
    """``--local-wg XxYxZ[@NODE]``: the local workgroup size every dispatch (or one node's) takes."""
    device_profile: str = ""
    """``--device-profile``: the raw transport rewrites every module it loads under this profile's liberties
    (``DEVICE_PROFILES``; ``vkdiff/device/shaders/profiles.toml``)."""

    mediump: bool = False
    """``--mediump``: half variants built as ExecuTorch's ``EXECUTORCH_VULKAN_USE_MEDIUMP_FOR_FP16`` build builds them
    (``gen_vulkan_spv.py --auto-use-mediump``): GLSL mediump, ``RelaxedPrecision`` in the SPIR-V."""

    def __post_init__(self) -> None:
        if self.transport not in TRANSPORTS:
            raise SettingsError(f"transport {self.transport!r}: use one of {', '.join(TRANSPORTS)}")
        if self.validate not in VALIDATIONS:
            raise SettingsError(f"validation {self.validate!r}: use sync or gpu")
        if self.device_profile not in DEVICE_PROFILES and not RULE_SET.fullmatch(self.device_profile):
            raise SettingsError(f"device profile {self.device_profile!r}: use one of "
                                f"{', '.join(p for p in DEVICE_PROFILES if p)}, or rules joined by +")
        if self.repeat < 1 or self.replays < 0:
            raise SettingsError(f"repeat {self.repeat}, replays {self.replays}: repeat at least 1, replays at least 0")

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, **given: object) -> "RunSettings":
        """``given`` over the process's environment (``ENVIRONMENT``) over the defaults: read once, at the top.

        Raises:
            SettingsError: a variable names no transport or validation, or ``VKDIFF_REPLAYS`` is no count.
        """
        environ = os.environ if environ is None else environ
        found: dict[str, object] = {}
        for name, variable in ENVIRONMENT.items():
            text = (environ.get(variable) or "").strip()
            if text and given.get(name) is None:
                found[name] = _parsed(name, variable, text)
        return cls(**found, **{k: v for k, v in given.items() if v is not None})

    def environment(self) -> dict[str, str]:
        """The variables a process this run starts reads its settings from."""
        values = {"transport": self.transport, "validate": self.validate, "replays": str(self.replays) if self.replays
                  else "", "local_wg": self.local_wg or "", "device_profile": self.device_profile,
                  "mediump": "1" if self.mediump else ""}
        return {ENVIRONMENT[name]: value for name, value in values.items() if value}


def _parsed(name: str, variable: str, text: str) -> object:
    if name == "replays":
        if not text.isdigit():
            raise SettingsError(f"${variable}={text!r}: give a count of whole-graph replays")
        return int(text)
    if name == "validate":
        return "" if text in ("0", "false") else "sync" if text in ("1", "true", "sync") else text
    if name == "mediump":
        if text not in ("0", "1", "false", "true"):
            raise SettingsError(f"${variable}={text!r}: give 1 or 0")
        return text in ("1", "true")
    return text
