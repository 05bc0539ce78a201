"""The hazard check of ``--validate`` for one graph: each dispatch's transitions as ET-VK issues them, recorded per
submission, then checked (``vkdiff.device.runtime.hazards``).

Tensors (``vTensor``s: graph tensors with metadata) transition at every dispatch that binds them, with the access
the shader itself declares for that binding; staging buffers and params buffers do not (ET-VK binds them without a
transition). Tensors with one serialized ``mem_obj_id`` are one memory, as ET-VK's ``SharedObject`` makes them.
A tensor's last access survives from one execute to the next, as ``last_access_`` does; each execute is one
submission, so hazards are looked for within it.
"""

from __future__ import annotations

from typing import Any, Sequence

from vkdiff.device.shaders import spirv
from vkdiff.device.runtime.barriers import COMPUTE, READ, WRITE, BarrierPort, PipelineBarrier, TensorState, transition
from vkdiff.device.boundary import SyncHazardError
from vkdiff.device.runtime.hazards import Access, Dispatch, find_hazards
from vkdiff.device.runtime.resources import Tensor

_ACCESS = {"read-only": READ, "write-only": WRITE, "read-write": READ | WRITE, "": READ | WRITE}


def binding_access(binding: spirv.Binding) -> int:
    """What a shader binding does to its tensor (a sampled texture is read)."""
    return READ if binding.kind == "sampled-texture" else _ACCESS[binding.access]


def memory_of(tensor: Tensor) -> object:
    return ("shared", tensor.memory) if tensor.memory >= 0 else ("own", id(tensor))


class SyncRecorder:
    """ET-VK's tensor states and barriers for one graph, and the stream of its latest submission."""

    def __init__(self, port: BarrierPort):
        self.port = port
        self.states: dict[int, tuple[Tensor, TensorState]] = {}
        self.stream: list[Dispatch | PipelineBarrier] = []

    def begin_submission(self) -> None:
        self.stream = []

    def _state(self, tensor: Tensor) -> TensorState:
        if id(tensor) not in self.states:
            label = f"{tensor.storage} {list(tensor.allocated.sizes)} {tensor.spec.dtype}" + (
                f" mem_obj {tensor.memory}" if tensor.memory >= 0 else "")
            self.states[id(tensor)] = (tensor, TensorState(memory=memory_of(tensor), label=label,
                                                           image=tensor.storage != "buffer", handle=tensor.handle))
        return self.states[id(tensor)][1]

    def record(self, reflection: spirv.Reflection, resources: Sequence[Any], shader: str,
               node: int | None) -> PipelineBarrier:
        """The dispatch's pipeline barrier (returned; empty when it needs none) and the dispatch, as
        ``DispatchNode::encode`` records them."""
        barrier, accesses = PipelineBarrier(), []
        for item in reflection.bindings:
            if item.group or item.binding >= len(resources):
                continue
            tensor = resources[item.binding]
            if not isinstance(tensor, Tensor) or tensor.spec is None or item.kind == "uniform-buffer":
                continue
            access = binding_access(item)
            state = self._state(tensor)
            transition(self.port, state, barrier, COMPUTE, access)
            accesses.append(Access(state.memory, state.label, item.binding, bool(access & WRITE),
                                   bool(access & READ)))
        if barrier:
            self.stream.append(barrier)
        self.stream.append(Dispatch(shader, node, tuple(accesses)))
        return barrier

    def check(self) -> None:
        """Raise ``SyncHazardError`` for the latest submission's first hazard (naming how many there are)."""
        hazards = find_hazards(self.stream)
        if hazards:
            first = hazards[0]
            more = f" ({len(hazards) - 1} more in this submission)" if len(hazards) > 1 else ""
            error = SyncHazardError(f"{first.describe()}, with the {self.port.name} barriers of "
                                    f"vTensorStorage::transition{more}")
            error.node_index, error.shader = first.second.node, first.second.label
            raise error
