"""The local workgroup size as a knob: ET-VK picks it by shape (``create_local_wg_size`` or the op's own picker);
vkdiff overrides it for every dispatch, or for one delegate node's dispatches.

Some ET-VK bugs show only under particular workgroup shapes (a race between the threads of a tile, a barrier a
shape lets invocations skip), so ``bisect knob`` and ``bisect device`` sweep ``CHOICES``. A shader whose shared
memory or reductions assume its own local size may legitimately break under another: the bisect's answer then
says which sizes it needs.
"""

from __future__ import annotations

import dataclasses
import re

DEFAULT = "default"
"""ET-VK's own pick."""
CHOICES = ("8x8x1", "4x16x1", "16x4x1", "64x1x1", "1x64x1", "32x2x1", "4x4x4", "1x1x64")
"""Overrides a sweep tries: the shapes ET-VK's picker and ops use, and their transposes."""

_FORMAT = re.compile(r"^(\d+)x(\d+)x(\d+)(?:@(\d+))?$")


@dataclasses.dataclass(frozen=True)
class LocalWgOverride:
    size: tuple[int, int, int]
    node: int | None = None
    """The delegate node whose dispatches take it (None: every dispatch)."""

    def applies_to(self, node: int | None) -> bool:
        return self.node is None or node == self.node

    def __str__(self) -> str:
        return "x".join(map(str, self.size)) + ("" if self.node is None else f"@{self.node}")


def parse(text: str | None) -> LocalWgOverride | None:
    """``8x8x1`` (every dispatch) or ``8x8x1@12`` (node 12's dispatches); None or ``default``: ET-VK's pick.

    Raises:
        ValueError: not of that form, or a zero size.
    """
    if not text or text == DEFAULT:
        return None
    found = _FORMAT.match(text.strip())
    if found is None or 0 in (int(found.group(i)) for i in (1, 2, 3)):
        raise ValueError(f"local workgroup size {text!r}: give XxYxZ (positive), optionally @NODE, e.g. 8x8x1@12")
    size = (int(found.group(1)), int(found.group(2)), int(found.group(3)))
    return LocalWgOverride(size, None if found.group(4) is None else int(found.group(4)))
