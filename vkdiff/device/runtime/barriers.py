"""ET-VK's barriers, as ``vTensorStorage::transition`` issues them, for the hazard check (``vkdiff.device.runtime.hazards``).

Ported from ``runtime/api/containers/Tensor.cpp`` (``vTensorStorage::transition``) and ``runtime/vk_api/Pipeline.cpp``
(``vk_access``, ``vk_stage``, ``vk_layout``). Each tensor handle keeps its last access; before a dispatch, every
tensor it binds transitions to the dispatch's access, and the dispatch's one ``vkCmdPipelineBarrier`` gathers the
stage masks of every transition and one buffer or image barrier per transition.

Two fixes changed the logic, and the port follows whichever the user's tree has (read from its ``Tensor.cpp``, as
launchers follow their C++):

- ``6ebaa05a27`` (*first-use writes on aliased tensors*): a tensor handle's first access being a write waited on
  nothing (``TOP_OF_PIPE``, no access), though another handle of the same ``SharedObject`` memory may have just
  written it; since, it waits on compute writes;
- ``e500fee673`` (*widen WAR barrier*): a write after a read widens to a full memory dependency.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

TENSOR_CPP = "runtime/api/containers/Tensor.cpp"

FIRST_WRITE_FIX = re.compile(r"if\s*\(\s*cur_written\s*\)\s*\{[^}]*src_stage\s*=\s*VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT")
WAR_WIDENING = re.compile(r"prev_read\s*&&\s*!prev_written\s*&&\s*cur_written")

NONE, COMPUTE, HOST, TRANSFER = 0, 1, 2, 4
"""``vkapi::PipelineStage`` (``NO_STAGE`` is 0)."""
READ, WRITE = 1, 2
"""``vkapi::MemoryAccessType``."""

TOP_OF_PIPE, COMPUTE_SHADER, TRANSFER_STAGE, BOTTOM_OF_PIPE, HOST_STAGE, ALL_COMMANDS = (
    0x1, 0x800, 0x1000, 0x2000, 0x4000, 0x10000)
"""``VkPipelineStageFlagBits``."""
SHADER_READ, SHADER_WRITE, TRANSFER_READ, TRANSFER_WRITE, HOST_READ, HOST_WRITE, MEMORY_READ, MEMORY_WRITE = (
    0x20, 0x40, 0x800, 0x1000, 0x2000, 0x4000, 0x8000, 0x10000)
"""``VkAccessFlagBits``."""
UNDEFINED, GENERAL, SHADER_READ_ONLY = "UNDEFINED", "GENERAL", "SHADER_READ_ONLY_OPTIMAL"


@dataclasses.dataclass(frozen=True)
class BarrierPort:
    """Which version of ``transition`` the tree has."""

    first_write_fix: bool
    """6ebaa05a27: a first-use write waits on prior compute writes."""
    war_widening: bool
    """e500fee673: a write after a read is a full memory dependency."""

    @property
    def name(self) -> str:
        return ("main" if self.first_write_fix and self.war_widening else
                "6ebaa05a27" if self.first_write_fix else "before-6ebaa05a27")


MAIN = BarrierPort(first_write_fix=True, war_widening=True)
BEFORE_6EBAA05A27 = BarrierPort(first_write_fix=False, war_widening=False)


def port_for(tree: Path | None) -> BarrierPort:
    """The version of ``transition`` in ``tree``'s ``Tensor.cpp`` (main's when there is no tree or no file)."""
    path = None if tree is None else next((p for p in (tree / "backends" / "vulkan" / TENSOR_CPP, tree / TENSOR_CPP)
                                           if p.is_file()), None)
    if path is None:
        return MAIN
    text = path.read_text(errors="replace")
    return BarrierPort(first_write_fix=FIRST_WRITE_FIX.search(text) is not None,
                       war_widening=WAR_WIDENING.search(text) is not None)


def vk_stage(stage: int) -> int:
    return ((COMPUTE_SHADER if stage & COMPUTE else 0) | (HOST_STAGE if stage & HOST else 0)
            | (TRANSFER_STAGE if stage & TRANSFER else 0))


def vk_access(stage: int, access: int) -> int:
    flags = 0
    for kind, (compute, host, transfer) in ((READ, (SHADER_READ, HOST_READ, TRANSFER_READ)),
                                            (WRITE, (SHADER_WRITE, HOST_WRITE, TRANSFER_WRITE))):
        if access & kind:
            flags |= ((compute if stage & COMPUTE else 0) | (host if stage & HOST else 0)
                      | (transfer if stage & TRANSFER else 0))
    return flags


def vk_layout(stage: int, access: int) -> str:
    """``vk_layout`` for the compute stage (the only one dispatches use)."""
    return SHADER_READ_ONLY if access == READ else GENERAL


@dataclasses.dataclass(frozen=True)
class ResourceBarrier:
    """One buffer or image barrier."""

    memory: object
    """The memory it covers (a ``SharedObject``'s, or the tensor's own)."""
    tensor: str
    src_access: int
    dst_access: int
    old_layout: str = ""
    new_layout: str = ""
    handle: object = None
    """The tensor's buffer or image (what a recorded barrier names)."""


@dataclasses.dataclass
class PipelineBarrier:
    """``vkapi::PipelineBarrier``: stage masks gathered over a dispatch's transitions, and its resource barriers."""

    src: int = 0
    dst: int = 0
    resources: list[ResourceBarrier] = dataclasses.field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.resources or self.src or self.dst)


@dataclasses.dataclass
class TensorState:
    """A tensor handle's ``last_access_`` and, for images, its layout."""

    memory: object
    label: str
    image: bool
    handle: object = None
    stage: int = NONE
    access: int = 0
    layout: str = UNDEFINED


def transition(port: BarrierPort, state: TensorState, barrier: PipelineBarrier, cur_stage: int,
               cur_access: int) -> None:
    """``vTensorStorage::transition``: add what this access needs to ``barrier``; update ``state``."""
    prev_stage, prev_access = state.stage, state.access
    prev_written, cur_written = bool(prev_access & WRITE), bool(cur_access & WRITE)
    new_layout = vk_layout(cur_stage, cur_access) if state.image else ""
    layout_changed = state.image and state.layout != new_layout
    if prev_written or cur_written or layout_changed:
        src_stage, src_access = vk_stage(prev_stage), vk_access(prev_stage, prev_access)
        if src_stage == 0:
            if cur_written and port.first_write_fix:
                src_stage, src_access = COMPUTE_SHADER, SHADER_WRITE
            else:
                src_stage = TOP_OF_PIPE
        dst_stage = vk_stage(cur_stage) or BOTTOM_OF_PIPE
        dst_access = vk_access(cur_stage, cur_access)
        if port.war_widening and prev_access & READ and not prev_written and cur_written:
            src_stage = dst_stage = ALL_COMMANDS
            src_access = dst_access = MEMORY_READ | MEMORY_WRITE
        barrier.src |= src_stage
        barrier.dst |= dst_stage
        barrier.resources.append(ResourceBarrier(state.memory, state.label, src_access, dst_access,
                                                 state.layout if state.image else "", new_layout, state.handle))
        if state.image:
            state.layout = new_layout
    state.stage, state.access = cur_stage, cur_access
