"""The part of ET-VK's ``ComputeGraph`` that launchers compose on: constants, prepack cache, dispatch log.

A launcher's op function adds nodes to a ``ComputeGraph`` the way an ``ops/impl/*.cpp``
function does: it prepacks constants (``TensorRef`` → device tensor, once per
(constant, packing kernel) through the prepack cache, as ``ComputeGraph::
get_cached_prepack`` / ``cache_prepack`` key it) and dispatches shaders on device
tensors. Nothing is read back inside the graph; ``read`` is for the graph's outputs.
Dispatches run as they are added (wgpu orders them); each is logged with its
shader, workgroup sizes and spec constants.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

from vkdiff.device import layouts, resources
from vkdiff.device.context import DeviceContext
from vkdiff.device.dispatch import dispatch as dispatch_pipeline
from vkdiff.device.resources import Storage, Tensor


@dataclasses.dataclass(kw_only=True, frozen=True)
class TensorRef:
    """A constant of the graph: host data that prepack nodes move to the device (ET-VK ``TensorRef``)."""

    id: int | str
    """Its ``ValueRef`` in a delegate, or the argument name in a kernel case: the prepack cache key."""
    data: np.ndarray
    """The constant's bytes in its declared dtype and sizes."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class DispatchRecord:
    """One dispatch as it was issued."""

    shader: str
    """ET-VK shader variant."""
    global_wg: tuple[int, int, int]
    """Global workgroup size (invocations)."""
    local_wg: tuple[int, int, int]
    """Local workgroup size."""
    spec: dict[int, int | float | bool]
    """Specialization constants by SpecId (workgroup ids 0–2 excluded)."""
    prepack: bool
    """A prepack node (runs once per constant) rather than an execute node."""


@dataclasses.dataclass(kw_only=True)
class Launch:
    """What running one op returns: the output read back and how it was produced."""

    output: Any
    """Output tensor read back to numpy in its logical shape."""
    variant: str
    """ET-VK shader variant that computed the output (the last execute dispatch)."""
    polyfilled: bool = False
    """True when any shader used had ``dotPacked4x8AccSatEXT`` emulated."""
    shaders: tuple[str, ...] = ()
    """Every variant dispatched (prepack shaders first)."""
    dispatch: dict = dataclasses.field(default_factory=dict)
    """Global/local workgroup sizes and spec constants of the main dispatch."""

    @property
    def unwritten(self) -> int:
        """Output elements the kernel never wrote (still poisoned)."""
        return int(layouts.unwritten_mask(self.output).sum())


class ComputeGraph:
    """Device tensors, the prepack cache and the dispatch log of one graph on one device."""

    def __init__(self, ctx: DeviceContext):
        self.ctx = ctx
        self.device = ctx.device
        self.dispatches: list[DispatchRecord] = []
        self.polyfilled = False
        self._prepack_cache: dict[tuple[int | str, str], Tensor] = {}

    def get_cached_prepack(self, ref: TensorRef, kernel_name: str) -> Tensor | None:
        """``ComputeGraph::get_cached_prepack``: the tensor ``ref`` was already packed into by ``kernel_name``."""
        return self._prepack_cache.get((ref.id, kernel_name))

    def cache_prepack(self, ref: TensorRef, kernel_name: str, packed: Tensor) -> None:
        """``ComputeGraph::cache_prepack``."""
        self._prepack_cache[(ref.id, kernel_name)] = packed

    def add_input(self, array: np.ndarray, storage: Storage, label: str = "input") -> Tensor:
        """An input tensor holding ``array``."""
        return resources.tensor(self.device, np.ascontiguousarray(array), storage, label)

    def add_output(self, shape: Sequence[int], dtype, storage: Storage, label: str = "output") -> Tensor:
        """An output tensor, poisoned so that unwritten elements show."""
        return resources.poisoned(self.device, tuple(shape), dtype, storage, label)

    def dispatch(self, shader: str, *, global_wg: tuple[int, int, int], local_wg: tuple[int, int, int],
                 resources: Sequence[Any], spec: Mapping[int, int | float | bool] | None = None,
                 immediates: bytes = b"", prepack: bool = False) -> None:
        """Build (cached) and dispatch one shader variant; ``resources[i]`` is bound to binding ``i``."""
        spec = dict(spec or {})
        pipeline, built = self.ctx.kernel(shader, spec, local_wg)
        self.polyfilled |= built.polyfilled
        dispatch_pipeline(self.device, pipeline, resources, global_wg, immediates, label=shader)
        self.dispatches.append(DispatchRecord(shader=shader, global_wg=tuple(global_wg), local_wg=tuple(local_wg),
                                              spec=spec, prepack=prepack))

    def read(self, tensor: Tensor) -> np.ndarray:
        """A graph output, read back whole."""
        return resources.read(self.device, tensor)

    def launch(self, out: Tensor) -> Launch:
        """Read ``out`` back and summarise what produced it."""
        output = self.read(out)
        main = [d for d in self.dispatches if not d.prepack][-1]
        shaders = tuple(d.shader for d in self.dispatches if d.prepack) + tuple(
            d.shader for d in self.dispatches if not d.prepack)
        return Launch(output=output, variant=main.shader, polyfilled=self.polyfilled, shaders=shaders,
                      dispatch={"global": main.global_wg, "local": main.local_wg, "spec": main.spec})
