"""A user's program as a case: one method of a ``.pte`` (or of a module lowered with a recipe, or of a saved
artifact), prepared, with the identity its results carry (made by ``vkdiff.subjects.programs``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from vkdiff.datamodel import PreparedProgram, Status


@dataclasses.dataclass(kw_only=True)
class ProgramCase:
    """One method of a program to run on devices: what they need and the identity of its results."""

    id: str
    ident: dict[str, Any]
    """Fields every result of the case carries (``case``, ``op``, ``variant``, ``rule``, ``knobs``, ``seed``)."""
    model: PreparedProgram | tuple[Status, str]
    """The prepared program, or the (status, reason) it ended with when it could not be prepared."""
    source: str = ""
    """The artifacts folder it came from (for repro commands), or empty."""
    command: tuple[str, ...] = ()
    """The ``vkdiff check`` command that reruns it (device and profile flags are added per result)."""
    notes: list[str] = dataclasses.field(default_factory=list)
    """What the user should know before reading its results (an ETRecord that maps no sources)."""
