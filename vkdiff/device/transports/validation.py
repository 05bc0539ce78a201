"""The Khronos validation layer's reports (shared by the raw device and its queue, which must not import one another
in a circle); whether a run validates is its ``RunSettings.validate``."""

from __future__ import annotations

from typing import Any

VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"
LAYER_MESSAGES: list[tuple[int, str, str]] = []
"""(severity, message id, message) of every report of the validation layer, in order."""


def on_message(severity: int, types: int, data: Any, user: Any) -> int:
    """The layer's callback: record, never raise (an exception here would be swallowed by the binding)."""
    from vkdiff.device.transports.raw_vulkan import binding

    ffi = binding().ffi
    name = ffi.string(data.pMessageIdName).decode(errors="replace") if data.pMessageIdName != ffi.NULL else ""
    LAYER_MESSAGES.append((int(severity), name, ffi.string(data.pMessage).decode(errors="replace")))
    return 0
