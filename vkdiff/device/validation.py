"""``--validate``'s switch and the Khronos validation layer's reports (shared by the context, the raw device and its
queue, which must not import one another in a circle)."""

from __future__ import annotations

import os
from typing import Any

VALIDATE_ENV = "VKDIFF_VALIDATE"
"""Set (by ``--validate``) to check every graph's command stream for hazards (``vkdiff.device.hazards``): ``sync``
(or ``1``), or ``gpu`` to add the layer's GPU-assisted validation; child processes and xdist workers inherit it."""

VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"
LAYER_MESSAGES: list[tuple[int, str, str]] = []
"""(severity, message id, message) of every report of the validation layer, in order."""


def validation_enabled() -> bool:
    return os.environ.get(VALIDATE_ENV, "") not in ("", "0", "false")


def gpu_assisted() -> bool:
    """``--validate gpu``: the layer instruments every shader and reports accesses past a descriptor's range."""
    return os.environ.get(VALIDATE_ENV, "") == "gpu"


def on_message(severity: int, types: int, data: Any, user: Any) -> int:
    """The layer's callback: record, never raise (an exception here would be swallowed by the binding)."""
    from vkdiff.device.raw_vulkan import binding

    ffi = binding().ffi
    name = ffi.string(data.pMessageIdName).decode(errors="replace") if data.pMessageIdName != ffi.NULL else ""
    LAYER_MESSAGES.append((int(severity), name, ffi.string(data.pMessage).decode(errors="replace")))
    return 0
