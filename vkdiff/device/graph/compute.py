"""The part of ET-VK's ``ComputeGraph`` that launchers compose on: tensors, constants, prepack cache, dispatches.

A launcher's op function adds nodes to a ``ComputeGraph`` the way an ``ops/impl/*.cpp``
function does: it prepacks constants (``TensorRef`` → device tensor, once per
(constant, packing kernel) through the prepack cache, as ``ComputeGraph::
get_cached_prepack`` / ``cache_prepack`` key it) and dispatches shaders on device
tensors. Nothing is read back inside the graph; ``read`` is for the graph's outputs.
Dispatches run as they are added (wgpu orders them); each is logged with its
shader, workgroup sizes and spec constants. Tensors the graph allocates carry their
``TensorSpec`` (``vTensor`` metadata), from which the UBOs and push constants shaders
read are built; a dispatch whose global size is zero on some axis (ET-VK's gated
GEMM/GEMV pairs) is logged and neither built nor run, as no invocation would execute.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

from vkdiff.device import layouts, resources
from vkdiff.device.boundary import DtypeMismatchError
from vkdiff.device.context import DeviceContext
from vkdiff.device.dispatch import dispatch as dispatch_pipeline
from vkdiff.device.graph.vtensor import Layout, TensorSpec
from vkdiff.device.resources import Storage, Tensor
from vkdiff.device.routing import Route, route_for


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
    node: int | None = None
    """Index of the delegate's op that added it (None outside a delegate, e.g. staging)."""
    skipped: bool = False
    """Global size was zero on some axis: logged, not built, not run."""


@dataclasses.dataclass(kw_only=True)
class Launch:
    """What running one op returns: the output read back and how it was produced."""

    output: Any
    """Output tensor read back to numpy in its logical shape (a tuple of them for tuple-returning ops)."""
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
        outputs = self.output if isinstance(self.output, tuple) else (self.output,)
        return sum(int(layouts.unwritten_mask(o).sum()) for o in outputs)


class ComputeGraph:
    """Device tensors, the prepack cache and the dispatch log of one graph on one device."""

    def __init__(self, ctx: DeviceContext, route: Route | None = None):
        self.ctx = ctx
        self.device = ctx.device
        self.route = route or route_for("native", ctx.info)
        """Device properties ET-VK's host code routes on (see ``vkdiff.device.routing``)."""
        self.dispatches: list[DispatchRecord] = []
        self.polyfilled = False
        self.node: int | None = None
        """The delegate op being added (recorded on each dispatch)."""
        self._prepack_cache: dict[tuple[int | str, str], Tensor] = {}

    def add_tensor(self, sizes: Sequence[int], dtype: str, storage: Storage, layout: Layout = "width",
                   label: str = "tensor") -> Tensor:
        """``ComputeGraph::add_tensor``: a poisoned tensor with ET-VK's metadata (also ``TmpTensor``)."""
        if dtype == "float16" and not self.route.float16_buffers:
            dtype = "float32"
        spec = TensorSpec(tuple(int(s) for s in sizes), dtype, storage, layout)
        return resources.allocate(self.device, spec, label)

    def uniform(self, data: bytes, label: str = "ubo") -> Any:
        """A params buffer (``ParamsBuffer``) holding ``data``."""
        return resources.uniform(self.device, data, label)

    def meta_ubo(self, tensor: Tensor) -> Any:
        """``meta_ubo``: ``BufferMetadata`` or ``TextureMetadata`` of a graph tensor."""
        return self.uniform(tensor.spec.meta_block(), "meta")

    def sizes_ubo(self, tensor: Tensor) -> Any:
        """``sizes_ubo``: WHCN ``ivec4`` sizes."""
        return self.uniform(tensor.spec.sizes_block(), "sizes")

    def get_cached_prepack(self, ref: TensorRef, kernel_name: str) -> Tensor | None:
        """``ComputeGraph::get_cached_prepack``: the tensor ``ref`` was already packed into by ``kernel_name``."""
        return self._prepack_cache.get((ref.id, kernel_name))

    def cache_prepack(self, ref: TensorRef, kernel_name: str, packed: Tensor) -> None:
        """``ComputeGraph::cache_prepack``."""
        self._prepack_cache[(ref.id, kernel_name)] = packed

    def dispatch(self, shader: str, *, global_wg: tuple[int, int, int], local_wg: tuple[int, int, int],
                 resources: Sequence[Any], spec: Mapping[int, int | float | bool] | None = None,
                 immediates: bytes = b"", prepack: bool = False) -> None:
        """Build (cached) and dispatch one shader variant; ``resources[i]`` is bound to binding ``i``."""
        spec = dict(spec or {})
        if min(global_wg) == 0:
            self.dispatches.append(DispatchRecord(shader=shader, global_wg=tuple(global_wg), local_wg=tuple(local_wg),
                                                  spec=spec, prepack=prepack, node=self.node, skipped=True))
            return
        try:
            pipeline, built = self.ctx.kernel(shader, spec, local_wg)
            self.polyfilled |= built.polyfilled
            dispatch_pipeline(self.device, pipeline, resources, global_wg, immediates, label=shader)
        except DtypeMismatchError as exc:
            raise _named_binding(exc, self.ctx, shader) from None
        except Exception as exc:
            exc.shader = shader
            raise
        self.dispatches.append(DispatchRecord(shader=shader, global_wg=tuple(global_wg), local_wg=tuple(local_wg),
                                              spec=spec, prepack=prepack, node=self.node))

    def log_copy(self, shader: str, prepack: bool = True) -> None:
        """Record a staging step done as a byte copy (see ``staging``)."""
        self.dispatches.append(DispatchRecord(shader=f"copy:{shader}", global_wg=(0, 0, 0), local_wg=(0, 0, 0),
                                              spec={}, prepack=prepack, node=self.node, skipped=True))

    def read(self, tensor: Tensor) -> np.ndarray:
        """A width-packed tensor's raw contents in its logical shape (poison kept: no shader in between)."""
        if tensor.spec.layout != "width":
            raise ValueError(f"raw read of a {tensor.spec.layout}-packed tensor: read it through staging.read_nchw")
        raw = resources.read(self.device, tensor)
        if tensor.storage == "buffer":
            return np.ascontiguousarray(raw.reshape(-1)[: tensor.spec.numel]).reshape(tensor.spec.sizes)
        return raw

    def launch(self, out: Tensor | tuple[Tensor, ...]) -> Launch:
        """Read ``out`` (or each output of a tuple) back and summarise what produced it."""
        output = tuple(self.read(t) for t in out) if isinstance(out, tuple) else self.read(out)
        main = [d for d in self.dispatches if not d.prepack and not d.skipped][-1]
        shaders = tuple(d.shader for d in self.dispatches if d.prepack) + tuple(
            d.shader for d in self.dispatches if not d.prepack)
        return Launch(output=output, variant=main.shader, polyfilled=self.polyfilled, shaders=shaders,
                      dispatch={"global": main.global_wg, "local": main.local_wg, "spec": main.spec})


def create_local_wg_size(global_wg: tuple[int, int, int]) -> tuple[int, int, int]:
    """``ComputeGraph::create_local_wg_size`` (no override configured)."""
    order = sorted(range(3), key=lambda axis: -global_wg[axis])
    largest, middle, smallest = (global_wg[a] for a in order)
    local = [8, max(1, min(4, middle)), max(1, min(2, smallest))]
    if smallest == 1:
        if middle == 1:
            local[0], local[1] = 64, 1
        elif middle % 4 == 0:
            local[0], local[1] = 16, 4
        else:
            local[0], local[1] = 32, 2
    out = [0, 0, 0]
    for rank, axis in enumerate(order):
        out[axis] = local[rank]
    return tuple(out)  # type: ignore[return-value]


def _named_binding(exc: DtypeMismatchError, ctx: DeviceContext, shader: str) -> DtypeMismatchError:
    """The mismatch with the binding's GLSL name (reflection of optimized SPIR-V has none)."""
    import re

    text = str(exc)
    found = re.search(r"binding (\d+) ", text)
    try:
        name = ctx.builder.binding_names(shader).get(int(found.group(1))) if found else None
    except Exception:  # the name is a courtesy; the mismatch stands without it
        name = None
    renamed = DtypeMismatchError(text.replace(found.group(0), f"binding {found.group(1)} ({name}) ", 1)
                                 if name and found else text)
    renamed.shader = shader
    return renamed
