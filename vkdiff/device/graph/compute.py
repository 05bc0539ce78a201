"""The part of ET-VK's ``ComputeGraph`` that launchers compose on: tensors, SymInts, prepack cache, nodes.

A launcher's op function adds nodes to a ``ComputeGraph`` the way an ``ops/impl/*.cpp``
function does. Prepack nodes (constants: ``TensorRef`` → device tensor, once per
(constant, packing kernel) through the prepack cache, as ``get_cached_prepack`` /
``cache_prepack`` key it) run as they are added. Execute nodes are kept and run, in
order, by every ``execute()``, as the C++ graph re-runs its command buffer.

Dynamic shapes follow ``ComputeGraph::propagate_resize``: ``resize_input`` and
``virtual_resize`` change a tensor's sizes (its storage keeps the serialized,
maximal size) and mark it updated; ``set_symint`` marks a SymInt updated when its
value changes. ``propagate_resize`` then visits every node: a node any of whose
arguments was updated (or whose shape is data dependent) runs its resize function,
and a dynamic dispatch node (``DynamicDispatchNode``: shader, global or local size
given as callables) re-picks them. Tensor metadata UBOs (``meta_ubo``, ``sizes_ubo``…)
belong to the tensor and follow its resizes; push constants given as callables
are read at each encode (``sizes_pc_of``); bytes and ``uniform`` buffers are fixed at
build (by-value ``PushConstantDataInfo``, ``create_params_buffer``), so a resize
function that forgets one leaves it stale, as on a phone.

Each dispatch is logged with its shader, workgroup sizes and spec constants; one
whose global size is zero on some axis (ET-VK's gated GEMM/GEMV pairs) is logged
and neither built nor run, as no invocation would execute.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar, Union

import numpy as np

from vkdiff.device.runtime import layouts, resources
from vkdiff.device.transports import watchdog
from vkdiff.device.runtime.barriers import port_for
from vkdiff.device.boundary import DispatchError, DtypeMismatchError, EtVkRefusal, OutOfBoundsError, SyncHazardError
from vkdiff.device.runtime.context import DeviceContext
from vkdiff.device.shaders.dispatch import Batch
from vkdiff.device.shaders.dispatch import dispatch as dispatch_pipeline
from vkdiff.device.shaders.spirv import relaxed_precision
from vkdiff.device.graph.sync import SyncRecorder
from vkdiff.device.graph.vtensor import INT8X4, Layout, TensorSpec
from vkdiff.device.runtime.resources import Storage, Tensor
from vkdiff.datamodel.arithmetic import Arithmetic
from vkdiff.device.runtime.routing import Route, route_for


@dataclasses.dataclass(kw_only=True, frozen=True)
class TensorRef:
    """A constant of the graph: host data that prepack nodes move to the device (ET-VK ``TensorRef``)."""

    id: int | str
    """Its ``ValueRef`` in a delegate, or the argument name in a kernel case: the prepack cache key."""
    data: np.ndarray
    """The constant's bytes in its declared dtype and sizes."""

    def __getattr__(self, name: str):
        """A constant used where only a tensor will do: ET-VK's ``Value::toTensor`` refuses a ``TensorRef`` the same
        way (``VK_CHECK_COND`` on the value's tag), so the delegate would not load."""
        if name.startswith("__"):
            raise AttributeError(name)
        raise EtVkRefusal(f"value {self.id} is a constant (TensorRef) where ET-VK's graph wants a tensor "
                          f"({name}): ComputeGraph's toTensor() refuses it, the delegate does not load")


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
    execution: int = 0
    """Which ``execute()`` issued it (0: the build, where prepack nodes run)."""


class SymInt:
    """ET-VK ``SymInt``: a host integer with its own params buffer, set by host nodes (``set_symint``)."""

    def __init__(self, value: int):
        self.value = int(value)
        self.ubo: Any = None
        """The ``int`` params buffer (``get_or_create_int_param_buffer``), made on first use."""

    def __repr__(self) -> str:
        return f"SymInt({self.value})"


T = TypeVar("T")
E = TypeVar("E", bound=Exception)
Picked = Union[T, Callable[[], T]]
"""A dispatch parameter fixed at build, or picked by a callable after each resize (``DynamicDispatchNode``)."""
PushConstant = Union[bytes, Callable[[], bytes]]
"""By-value bytes, or a callable read at each encode (a ``*_pc_of`` of a tensor)."""


@dataclasses.dataclass(eq=False, kw_only=True)
class ExecuteNode:
    """One node of the execute chain: a dispatch, or host work (SymInt ops) with a resize function."""

    node: int | None
    """Delegate op that added it (None: staging and probes)."""
    args: tuple
    """Tensors and SymInts whose update makes the node resize (``ArgGroup`` refs and resize args)."""
    resize: Callable[[], None] | None = None
    """The op's resize function (``virtual_resize`` of its outputs, updates of its own params)."""
    data_dependent: bool = False
    """Resize on every execution (``select_as_symint`` reads input data)."""
    run: Callable[[], None] | None = None
    """Host work at execute time (reads and writes during it dispatch at once)."""
    shader: Picked[str] | None = None
    global_wg: Picked[tuple[int, int, int]] | None = None
    local_wg: Picked[tuple[int, int, int]] | None = None
    """None: ``create_local_wg_size`` of the global size (``default_pick_local_wg_size``)."""
    resources: Sequence[Any] = ()
    spec: Mapping[int, int | float | bool] = dataclasses.field(default_factory=dict)
    immediates: Sequence[PushConstant] = ()
    probe: bool = False
    """vkdiff's own readback of an intermediate (node by node): not in ET-VK's command stream, so no barrier of it
    enters the hazard check."""
    picked: tuple[str, tuple[int, int, int], tuple[int, int, int]] | None = None
    """Shader, global and local size as last picked."""

    def pick(self) -> None:
        """Evaluate shader, global and local size (fixed values evaluate to themselves)."""
        shader = self.shader() if callable(self.shader) else self.shader
        global_wg = tuple(self.global_wg() if callable(self.global_wg) else self.global_wg)
        if self.local_wg is None:
            local_wg = create_local_wg_size(global_wg)
        else:
            local_wg = self.local_wg() if callable(self.local_wg) else self.local_wg
        self.picked = (shader, global_wg, tuple(local_wg))

    @property
    def dynamic(self) -> bool:
        return any(callable(p) for p in (self.shader, self.global_wg, self.local_wg))


@dataclasses.dataclass(kw_only=True)
class Launch:
    """What running one op returns: the output read back and how it was produced."""

    output: Any
    """Output tensor read back to numpy in its logical shape (a tuple of them for tuple-returning ops)."""
    variant: str
    """ET-VK shader variant that computed the output (the last execute dispatch)."""
    polyfilled: bool = False
    """True when any shader used had ``dotPacked4x8AccSatEXT`` emulated."""
    clamped: tuple[str, ...] = ()
    """Shaders whose infinite float literals were clamped to the largest finite value for naga."""
    relaxed: tuple[str, ...] = ()
    """Shaders whose SPIR-V has ``RelaxedPrecision`` values (GLSL ``mediump``), which a device may compute in
    float16."""
    shaders: tuple[str, ...] = ()
    """Every variant dispatched (prepack shaders first)."""
    dispatch: dict = dataclasses.field(default_factory=dict)
    """Global/local workgroup sizes and spec constants of the main dispatch."""
    index: tuple[np.ndarray, ...] | None = None
    """Per output, where each element sits in its raw storage (non-width layouts; None: width-packed)."""
    stale: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    """Op (or ``runtime``) → ported C++ files whose source in the tree differs from the port's (``port-stale``)."""
    arithmetic: Arithmetic | None = None
    """How the variant accumulates, where its launcher declares it (``vkdiff.datamodel.arithmetic``)."""

    @property
    def unwritten(self) -> int:
        """Output elements the kernel never wrote (still poisoned)."""
        outputs = self.output if isinstance(self.output, tuple) else (self.output,)
        return sum(int(layouts.unwritten_mask(o).sum()) for o in outputs)


class ComputeGraph:
    """Device tensors, SymInts, the prepack cache and the execute chain of one graph on one device."""

    def __init__(self, ctx: DeviceContext, route: Route | None = None, exact: bool = False, alias: bool = False):
        self.ctx = ctx
        self._batch: Batch | None = None
        self.device = ctx.device
        self.route = route or route_for("native", ctx.info)
        """Device properties ET-VK's host code routes on (see ``vkdiff.device.runtime.routing``)."""
        self.dispatches: list[DispatchRecord] = []
        """Prepack dispatches of the build, then those of the latest ``execute()``."""
        self.execute_nodes: list[ExecuteNode] = []
        self.executions = 0
        self.polyfilled = False
        self.clamped: set[str] = set()
        """Shaders run with infinite literals clamped (``spirv.clamp_infinite_constants``)."""
        self.relaxed: set[str] = set()
        """Shaders whose modules have ``RelaxedPrecision`` values (``spirv.relaxed_precision``)."""
        self.node: int | None = None
        """The delegate op being added (recorded on each node)."""
        self.node_seconds: dict[int | None, float] = {}
        """Host time per op in the latest resize + execute (picking, encoding, submitting)."""
        self._executing = False
        self._updated: set[int] = set()
        self._live_ubos: dict[int, dict[str, Any]] = {}
        self._ubo_owners: dict[int, Tensor] = {}
        """Every tensor with live UBOs, kept alive: ``_live_ubos`` is keyed by ``id``, which a freed tensor's
        successor (a layout probe) may reuse."""
        self._prepack_cache: dict[tuple[int | str, str], Tensor] = {}
        self.input_stagings: dict[int, Any] = {}
        self.readbacks: dict[int, Any] = {}
        """``staging.Readback`` of each tensor read out through a staging node, by ``id``."""
        """Staging of each graph input, by ``id`` of its tensor (``staging_of``)."""
        self.states: dict[int | str, Tensor] = {}
        """Device tensors standing for constants an op mutates (KV caches), by constant id."""
        self.guarded: list[Tensor] = []
        """Every buffer the graph allocated, each with a canary guard band checked after each execute."""
        self._bound: list[tuple[DispatchRecord, tuple]] = []
        """The build's and the latest execute's dispatches with what they bound (to name a guard band's writer)."""
        self._probing = False
        self._bind_groups: dict = {}
        """Bind groups by (pipeline, bound resources), reused at every execute (``dispatch``)."""
        self.sync = SyncRecorder(port_for(ctx.builder.et_src)) if getattr(ctx, "validate", False) or exact else None
        """With ``--validate`` (or ``exact``): ET-VK's barriers for every dispatch, and the latest execute's stream
        (``hazards``)."""
        self.hazard: SyncHazardError | None = None
        """Without ``--validate``, in whole-graph mode: the first hazard of the recorded stream, kept (not raised) so
        the replays show what the device makes of it (the caller reports it)."""
        self.exact = exact and self.device.own_barriers
        """Record ET-VK's own barriers between dispatches instead of the transport's full ones (whole-graph mode on
        a transport that runs only the barriers it is given; wgpu inserts its own)."""
        self.alias = alias and self.device.aliases
        """Tensors of one ``SharedObject`` are bound to one allocation (where the transport can alias resources;
        through wgpu each keeps its own storage)."""
        self.shared: dict[int, list[Tensor]] = {}
        """Users of each shared object by index, in the order they were added."""
        self.shared_count = 0
        """``shared_objects_.size()``: one past the largest shared object index so far."""
        self._tmp_free: list[int] = []
        """``tmp_shared_object_idxs_``: shared objects a released ``TmpTensor`` gave back (a stack)."""
        self._tmp_scopes: list[list[int]] = []
        self._unallocated: set[int] = set()
        """Shared objects whose users await ``prepare`` (aliasing defers storage until every user is known)."""
        self._read_along: tuple[Tensor, ...] = ()
        """Buffer outputs read back with the guard bands, in the same copy (``launch``)."""
        self._read_bytes: dict[int, np.ndarray] = {}
        """Their raw bytes from the latest execute, by ``id``."""
        self._recorded: Any = None
        """The command buffer of the latest execute, resubmitted as ET-VK resubmits ``deferred_cmd_list_`` until a
        resize re-encodes (raw Vulkan, exact barriers, no host work in the chain)."""

    @property
    def executing(self) -> bool:
        """Inside ``execute()`` (host work of a node): dispatches run at once."""
        return self._executing

    # -- values --------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def probing(self, on: bool = True) -> Iterator[None]:
        """Nodes added inside are vkdiff's readbacks (``ExecuteNode.probe``)."""
        was, self._probing = self._probing, on
        try:
            yield
        finally:
            self._probing = was

    def add_tensor(self, sizes: Sequence[int], dtype: str, storage: Storage, layout: Layout = "width",
                   label: str = "tensor", memory: int = -1, temporary: bool = False) -> Tensor:
        """``ComputeGraph::add_tensor``: a poisoned tensor with ET-VK's metadata.

        ``memory``: the shared object it is a user of (the serialized ``mem_obj_id``; -1: its own memory).
        ``temporary``: a ``TmpTensor``, whose shared object comes from the released ones (``get_sobj_idx``) and goes
        back when the innermost ``tmp_scope`` ends. With ``alias``, a shared object's users get their storage at
        ``prepare``."""
        if dtype == "float16" and not self.route.float16_buffers:
            dtype = "float32"
        if dtype == "int8" and str(layout).startswith(INT8X4):
            dtype = INT8X4
        if temporary:
            memory = self._tmp_free.pop() if self._tmp_free else self.shared_count
            if self._tmp_scopes:
                self._tmp_scopes[-1].append(memory)
        spec = TensorSpec(tuple(int(s) for s in sizes), dtype, storage, layout)
        if memory >= 0:
            self.shared_count = max(self.shared_count, memory + 1)
            if self.alias:
                tensor = Tensor(shape=spec.sizes, dtype=spec.element_dtype, storage=storage, handle=None, spec=spec,
                                allocated=spec, memory=memory)
                self.shared.setdefault(memory, []).append(tensor)
                self._unallocated.add(memory)
                return tensor
        tensor = resources.allocate(self.device, spec, label)
        tensor.memory = memory
        if memory >= 0:
            self.shared.setdefault(memory, []).append(tensor)
        if tensor.guard:
            self.guarded.append(tensor)
        return tensor

    @contextlib.contextmanager
    def tmp_scope(self) -> Iterator[None]:
        """The C++ scope of ``TmpTensor``s: those added inside give their shared objects back at its end, last
        first, as their destructors run."""
        self._tmp_scopes.append([])
        try:
            yield
        finally:
            self._tmp_free.extend(reversed(self._tmp_scopes.pop()))

    @property
    def memory_plan(self) -> dict[str, Any]:
        """How the shared objects were backed: objects with more than one user, their users, whether bound to one
        allocation (``alias``), and whether a recorded command buffer is kept for resubmission."""
        shared = {m: users for m, users in self.shared.items() if len(users) > 1}
        return {"shared_objects": len(shared), "users": sum(len(u) for u in shared.values()),
                "aliased": self.alias, "recorded": self._recorded is not None}

    def prepare(self) -> None:
        """``SharedObject::allocate`` and ``bind_users`` for every shared object still unallocated (after the
        build, as ``ComputeGraph::prepack`` does once every node is added)."""
        for memory in sorted(self._unallocated):
            users = self.shared[memory]
            self.device.allocate_shared(users, f"shared object {memory} ({len(users)} users)")
            self.guarded.extend(t for t in users if t.guard)
        self._unallocated.clear()

    def virtual_resize(self, tensor: Tensor, sizes: Sequence[int]) -> None:
        """``ComputeGraph::virtual_resize``: new sizes within the allocation; its metadata UBOs follow."""
        sizes = tuple(int(s) for s in sizes)
        if sizes == tuple(tensor.spec.sizes):
            return
        if len(sizes) != len(tensor.spec.sizes):
            raise EtVkRefusal(f"virtual_resize of {list(tensor.spec.sizes)} to {list(sizes)}: new sizes cannot modify "
                              f"the dimensionality of the tensor (vTensor::virtual_resize)")
        spec = dataclasses.replace(tensor.spec, sizes=sizes)
        if spec.storage == "buffer" and spec.physical_numel > max(tensor.buffer_shape or (0,)):
            raise ValueError(f"virtual_resize of {list(tensor.spec.sizes)} to {list(sizes)} exceeds its buffer")
        if spec.storage != "buffer" and any(a > b for a, b in zip(spec.extents, tensor.allocated.extents)):
            raise ValueError(f"virtual_resize of {list(tensor.spec.sizes)} to {list(sizes)} exceeds its image")
        tensor.spec = spec
        for kind, ubo in self._live_ubos.get(id(tensor), {}).items():
            self.device.queue.write_buffer(ubo, 0, _BLOCKS[kind](spec))
        self._updated.add(id(tensor))

    def set_symint(self, symint: SymInt, value: int) -> None:
        """``ComputeGraph::set_symint``: a changed value marks it updated and rewrites its params buffer."""
        if symint.value == int(value):
            return
        symint.value = int(value)
        if symint.ubo is not None:
            self.device.queue.write_buffer(symint.ubo, 0, np.array([symint.value], np.int32).tobytes())
        self._updated.add(id(symint))

    @staticmethod
    def read_symint(value: SymInt | int) -> int:
        """``ComputeGraph::read_symint``: a SymInt's value, or a plain int."""
        return value.value if isinstance(value, SymInt) else int(value)

    def was_value_updated(self, value: Any) -> bool:
        """Updated in this resize pass (lists: any element)."""
        if isinstance(value, (list, tuple)):
            return any(self.was_value_updated(v) for v in value)
        return id(value) in self._updated

    def mark_updated(self, value: Any) -> None:
        """``resize_input`` marks the input's staging updated (nodes reading the input then resize)."""
        self._updated.add(id(value))

    def bind_state(self, ref: TensorRef, tensor: Tensor) -> None:
        """Record that ``tensor`` holds the state of the mutable constant ``ref`` (a KV cache), for probing."""
        self.states[ref.id] = tensor

    # -- params --------------------------------------------------------------------------------------------------

    def uniform(self, data: bytes, label: str = "ubo") -> Any:
        """A params buffer holding ``data``, fixed at build (``create_params_buffer``)."""
        return resources.uniform(self.device, data, label)

    def update_uniform(self, ubo: Any, data: bytes) -> None:
        """``ParamsBuffer::update`` (a resize function refreshing a params buffer it owns)."""
        self.device.queue.write_buffer(ubo, 0, data)

    def _live(self, tensor: Tensor, kind: str) -> Any:
        self._ubo_owners[id(tensor)] = tensor
        owned = self._live_ubos.setdefault(id(tensor), {})
        if kind not in owned:
            owned[kind] = self.uniform(_BLOCKS[kind](tensor.spec), kind)
        return owned[kind]

    def meta_ubo(self, tensor: Tensor) -> Any:
        """``meta_ubo``: ``BufferMetadata`` or ``TextureMetadata`` of a graph tensor (follows resizes)."""
        return self._live(tensor, "meta")

    def sizes_ubo(self, tensor: Tensor) -> Any:
        """``sizes_ubo``: WHCN ``ivec4`` sizes (follows resizes)."""
        return self._live(tensor, "sizes")

    def strides_ubo(self, tensor: Tensor) -> Any:
        return self._live(tensor, "strides")

    def numel_ubo(self, tensor: Tensor) -> Any:
        return self._live(tensor, "numel")

    def logical_limits_ubo(self, tensor: Tensor) -> Any:
        return self._live(tensor, "logical_limits")

    def symint_ubo(self, value: SymInt | int) -> Any:
        """``get_or_create_int_param_buffer``: a SymInt's own buffer (follows ``set_symint``), or a fixed int."""
        if not isinstance(value, SymInt):
            return self.uniform(np.array([int(value)], np.int32).tobytes(), "int")
        if value.ubo is None:
            value.ubo = self.uniform(np.array([value.value], np.int32).tobytes(), "symint")
        return value.ubo

    @staticmethod
    def pc(tensor: Tensor, kind: str) -> Callable[[], bytes]:
        """``sizes_pc_of`` / ``strides_pc_of`` / ``numel_pc_of`` / ``logical_limits_pc_of``: read at encode."""
        block = _BLOCKS[kind]
        return lambda: block(tensor.spec)

    # -- prepack -------------------------------------------------------------------------------------------------

    def get_cached_prepack(self, ref: TensorRef, kernel_name: str) -> Tensor | None:
        """``ComputeGraph::get_cached_prepack``: the tensor ``ref`` was already packed into by ``kernel_name``."""
        return self._prepack_cache.get((ref.id, kernel_name))

    def cache_prepack(self, ref: TensorRef, kernel_name: str, packed: Tensor) -> None:
        """``ComputeGraph::cache_prepack``."""
        self._prepack_cache[(ref.id, kernel_name)] = packed

    # -- nodes ---------------------------------------------------------------------------------------------------

    def dispatch(self, shader: Picked[str], *, global_wg: Picked[tuple[int, int, int]],
                 local_wg: Picked[tuple[int, int, int]] | None = None, resources: Sequence[Any],
                 spec: Mapping[int, int | float | bool] | None = None,
                 immediates: bytes | Sequence[PushConstant] = b"", prepack: bool = False,
                 resize: Callable[[], None] | None = None, resize_args: Sequence[Any] = ()) -> None:
        """Add a dispatch: ``resources[i]`` is bound to binding ``i``.

        Prepack dispatches (and any issued while ``execute`` runs host work) run at once;
        others join the execute chain. ``shader``, ``global_wg`` and ``local_wg`` may be
        callables (re-picked after a resize touching the node); ``immediates`` is bytes or
        a sequence of bytes and callables (read at encode). ``resize`` runs in
        ``propagate_resize`` when a tensor among ``resources`` or a value in
        ``resize_args`` was updated.
        """
        parts = [immediates] if isinstance(immediates, (bytes, bytearray)) else list(immediates)
        args = tuple(r for r in resources if isinstance(r, Tensor)) + tuple(resize_args)
        node = ExecuteNode(node=self.node, args=args, resize=resize, shader=shader, global_wg=global_wg,
                           local_wg=local_wg, resources=tuple(resources), spec=dict(spec or {}), immediates=parts,
                           probe=self._probing)
        node.pick()
        if prepack or self._executing:
            self._encode(node, prepack=prepack)
            return
        self.execute_nodes.append(node)

    def host_node(self, *, args: Sequence[Any] = (), resize: Callable[[], None] | None = None,
                  run: Callable[[], None] | None = None, data_dependent: bool = False) -> None:
        """A node without a dispatch: a SymInt op's resize function, or host work at execute time."""
        if resize is not None:
            resize()
        self.execute_nodes.append(ExecuteNode(node=self.node, args=tuple(args), resize=resize, run=run,
                                              data_dependent=data_dependent))

    def propagate_resize(self) -> None:
        """``ComputeGraph::propagate_resize``: every node, in order, re-derives what its updated arguments change;
        any change drops the recorded command buffer (``requires_reencode_``)."""
        for node in self.execute_nodes:
            tick = time.perf_counter()
            updated = any(self.was_value_updated(a) for a in node.args)
            if node.resize is not None and (updated or node.data_dependent):
                node.resize()
                updated = True
            if updated:
                self._recorded = None
            if updated and node.shader is not None and node.dynamic:
                node.pick()
            self.node_seconds[node.node] = self.node_seconds.get(node.node, 0.0) + time.perf_counter() - tick

    def execute(self) -> None:
        """``ComputeGraph::execute``: encode and submit every execute node with current parameters; where ET-VK
        would resubmit its recorded command buffer, resubmit the one recorded."""
        self.prepare()
        self.executions += 1
        self._read_bytes = {}
        if self._recorded is not None:
            self._resubmit()
            return
        self.dispatches = [d for d in self.dispatches if d.execution == 0]
        self._bound = [(d, bound) for d, bound in self._bound if d.execution == 0]
        if self.sync is not None:
            self.sync.begin_submission()
        self._executing = True
        recordable = self.exact and not any(node.run is not None for node in self.execute_nodes)
        self._batch = (Batch(self.device, exact=self.exact, keep=recordable)
                       if not hasattr(self.device, "record_dispatch") else None)
        try:
            for node in self.execute_nodes:
                tick = time.perf_counter()
                try:
                    if node.run is not None:
                        self._host_work(node.run)
                    if node.shader is not None:
                        self._encode(node)
                except Exception as exc:
                    if node.node is not None and getattr(exc, "node_index", None) is None:
                        exc.node_index = node.node
                    raise
                self.node_seconds[node.node] = self.node_seconds.get(node.node, 0.0) + time.perf_counter() - tick
            along = self._guards_along() if not recordable else None
            self._flush()
            self._recorded = self._batch.recorded if recordable else None
            self.check_guards(along)
            if self.sync is not None:
                self._check_sync()
        finally:
            self._executing = False
            self._batch = None
            self._updated.clear()

    def _check_sync(self) -> None:
        """The stream's hazards: raised with ``--validate``, else kept in ``hazard``."""
        try:
            self.sync.check()
        except SyncHazardError as exc:
            if getattr(self.ctx, "validate", False):
                raise
            self.hazard = self.hazard or exc

    def _resubmit(self) -> None:
        """``submit_deferred_cmds_and_wait``: the recorded stream again, its dispatches logged as this execute's
        (its barriers were checked when it was recorded, and are the same)."""
        recorded = [d for d in self.dispatches if d.execution != 0]
        self.dispatches = [d for d in self.dispatches if d.execution == 0] + [
            dataclasses.replace(d, execution=self.executions) for d in recorded]
        self._executing = True
        try:
            for d in recorded:
                watchdog.note_dispatch(d.shader)
            self.device.call(DispatchError, f"resubmitting {len(recorded)} dispatches", self.device.queue.resubmit,
                     self._recorded, "graph replay")
            self.check_guards()
        finally:
            self._executing = False
            self._updated.clear()

    def _host_work(self, run: Callable[[], None]) -> None:
        """Host work sees every dispatch before it done, and what it dispatches itself runs at once."""
        self._flush()
        batch, self._batch = self._batch, None
        try:
            run()
        finally:
            self._batch = batch

    def _flush(self) -> None:
        """Submit the dispatches encoded so far (host work reads and writes after them, as ET-VK's does)."""
        if self._batch is not None:
            try:
                self._batch.flush()
            except OutOfBoundsError as exc:
                if getattr(exc, "shader", None) is None:
                    raise
                raise _named_binding(exc, self.ctx, exc.shader) from None

    def _guard_ranges(self) -> list[tuple[Tensor, int, int]]:
        """The guard bands, then the buffer outputs read along with them (nothing on a tracing device, whose replay
        reads what it recorded)."""
        if hasattr(self.device, "record_dispatch"):
            return []
        return [(t, t.guard, resources.GUARD_BYTES) for t in self.guarded] + [
            (t, 0, int(t.handle.size)) for t in self._read_along if t.storage == "buffer"]

    def _guards_along(self) -> resources.CopyOut | None:
        """The guard bands' and the outputs' copies recorded as the last commands of the execute's own submission
        (one fence wait for all, where the transport puts its barriers between commands: not with ET-VK's exact
        barriers, where texture outputs are read apart)."""
        if hasattr(self.device, "record_dispatch") or self._batch is None or self._batch.exact:
            return None
        ranges = self._guard_ranges()
        images = [t for t in self._read_along if t.storage != "buffer"]
        if not (ranges or images):
            return None
        along = resources.CopyOut(self.device, ranges, images)
        self._batch.add("reading the outputs and guard bands", along.record, noted=False)
        return along

    def check_guards(self, along: resources.CopyOut | None = None) -> None:
        """Every guard band still holds its canaries (read by ``along`` when the execute's submission copied them).

        Raises:
            OutOfBoundsError: a band changed; names the tensor, where, and the dispatches that bound it (the
                first one's node and shader are set on the exception).
        """
        ranges = self._guard_ranges()
        if not ranges and along is None:
            return
        outputs = len(self._read_along)
        what = ((f"reading back {outputs} output{'s' * (outputs != 1)} with " if outputs else "reading ")
                + f"the guard bands of {len(self.guarded)} buffers")
        if along is None:
            raws = resources.copy_out(self.device, ranges, what)
        else:
            with watchdog.waiting(what):
                raws = self.device.call(DispatchError, what, along.read)
        read = [t for t in self._read_along if t.storage == "buffer"] + ([] if along is None else along.images)
        self._read_bytes = {id(t): raw for t, raw in zip(read, raws[len(self.guarded):])}
        for tensor, band in zip(self.guarded, raws):
            changed = np.flatnonzero(band != resources.CANARY)
            if changed.size:
                raise self._out_of_bounds(tensor, changed)

    def _out_of_bounds(self, tensor: Tensor, changed: np.ndarray) -> OutOfBoundsError:
        users = self.shared[tensor.memory] if self.alias and tensor.memory >= 0 else [tensor]
        writers = [(d, i) for d, bound in self._bound for i, r in enumerate(bound) if any(r is u for u in users)]
        named = "; ".join(f"{d.shader} binding {i}" + (f" (node {d.node})" if d.node is not None else "")
                          for d, i in writers[:4]) or "no dispatch bound it"
        error = OutOfBoundsError(
            f"{changed.size} of {resources.GUARD_BYTES} canary bytes after {tensor.spec.storage} tensor "
            f"{list(tensor.allocated.sizes)} {tensor.spec.dtype}"
            f"{f' (shared object {tensor.memory}, {len(users)} users)' if len(users) > 1 else ''} changed (first at byte {int(changed[0])} past its "
            f"storage): written out of bounds by one of: {named}")
        if writers:
            error.node_index, error.shader = writers[0][0].node, writers[0][0].shader
        return error

    def _encode(self, node: ExecuteNode, prepack: bool = False) -> None:
        shader, global_wg, local_wg = node.picked
        override = getattr(self.ctx, "local_wg", None)
        if override is not None and not prepack and not node.probe and override.applies_to(node.node):
            local_wg = override.size
        record = DispatchRecord(shader=shader, global_wg=global_wg, local_wg=local_wg, spec=dict(node.spec),
                                prepack=prepack, node=node.node, skipped=min(global_wg) == 0,
                                execution=0 if prepack else self.executions)
        if not record.skipped:
            immediates = b"".join(p() if callable(p) else bytes(p) for p in node.immediates)
            try:
                pipeline, built = self.ctx.kernel(shader, node.spec, local_wg)
                self.polyfilled |= built.polyfilled
                if pipeline.infinities_clamped:
                    self.clamped.add(shader)
                if relaxed_precision(built.spv):
                    self.relaxed.add(shader)
                if self._batch is not None:
                    self._batch.node = node.node
                if self.sync is not None and not node.probe:
                    barrier = self.sync.record(pipeline.reflection, node.resources, shader, node.node)
                    if self.exact and barrier and self._batch is not None:
                        self._batch.add(f"barrier before {shader}", lambda encoder, b=barrier: encoder.pipeline_barrier(b))
                dispatch_pipeline(self.device, pipeline, node.resources, global_wg, immediates, label=shader,
                                  batch=self._batch, bind_groups=None if prepack else self._bind_groups)
            except DtypeMismatchError as exc:
                raise _named_binding(exc, self.ctx, shader) from None
            except Exception as exc:
                exc.shader = shader
                raise
        self.dispatches.append(record)
        self._bound.append((record, tuple(node.resources)))

    def log_copy(self, shader: str, prepack: bool = True) -> None:
        """Record a staging step done as a byte copy (see ``staging``)."""
        self.dispatches.append(DispatchRecord(shader=f"copy:{shader}", global_wg=(0, 0, 0), local_wg=(0, 0, 0),
                                              spec={}, prepack=prepack, node=self.node, skipped=True,
                                              execution=0 if prepack else self.executions))

    # -- results -------------------------------------------------------------------------------------------------

    def read(self, tensor: Tensor, index: np.ndarray | None = None) -> np.ndarray:
        """A tensor's raw contents in its logical shape (poison kept: no shader in between); any layout but width
        needs ``index``, where each element sits in the raw storage (``staging.element_index``). An int8x4 tensor
        comes back through its staging node (``staging.read_nchw``): every int8 value is a valid one, so no
        poison could show in its raw words anyway."""
        along = self._read_bytes.pop(id(tensor), None)
        if along is not None and tensor.storage != "buffer":  # the whole image, from the execute's submission
            if index is not None:
                return along[index]
            width, height, depth = resources.image_extent(tensor)
            width4, rows, layers = layouts.texture_extent(tensor.shape)
            texels = along.reshape(depth, height, width, 4)[:layers, :rows, :width4]
            return layouts.from_texels(np.ascontiguousarray(texels), tensor.shape)
        if along is not None:
            along = np.frombuffer(along[: int(np.prod(tensor.buffer_shape)) * tensor.dtype.itemsize].tobytes(),
                                  tensor.dtype)
        if index is not None:
            return (resources.read_raw(self.device, tensor) if along is None else along)[index]
        if tensor.spec.dtype == INT8X4:
            return self.readbacks[id(tensor)].get()
        if tensor.spec.layout != "width":
            raise ValueError(f"raw read of a {tensor.spec.layout}-packed tensor: give its staging.element_index")
        raw = resources.read(self.device, tensor) if along is None else along
        if tensor.storage == "buffer":
            return np.ascontiguousarray(raw.reshape(-1)[: tensor.spec.numel]).reshape(tensor.spec.sizes)
        return raw

    def launch(self, out: Tensor | tuple[Tensor, ...], index: tuple[np.ndarray, ...] | None = None) -> Launch:
        """Execute the graph once, read ``out`` (or each output of a tuple) back and summarise what produced it.

        ``index`` (one per output) places non-width-packed outputs' elements in their raw storage. The outputs (a
        buffer's bytes, a texture's whole image) come back with the guard bands in the execute's own submission
        (``_guards_along``; one round trip for all), else in the copy that reads the guard bands."""
        outs = out if isinstance(out, tuple) else (out,)
        self._read_along = tuple(t for t in outs if t.spec.dtype != INT8X4)
        try:
            self.execute()
        finally:
            self._read_along = ()
        read = tuple(self.read(t, None if index is None else index[i]) for i, t in enumerate(outs))
        output = read if isinstance(out, tuple) else read[0]
        main = [d for d in self.dispatches if not d.prepack and not d.skipped and d.shader not in OUTPUT_STAGING][-1]
        shaders = tuple(d.shader for d in self.dispatches if d.prepack) + tuple(
            d.shader for d in self.dispatches if not d.prepack)
        return Launch(output=output, variant=main.shader, polyfilled=self.polyfilled, clamped=tuple(sorted(self.clamped)),
                      relaxed=tuple(sorted(self.relaxed)), shaders=shaders, index=index,
                      dispatch={"global": main.global_wg, "local": main.local_wg, "spec": main.spec})


OUTPUT_STAGING = frozenset({"int8x4_buffer_to_nchw"})
"""Shaders that copy a graph output out to staging (``add_int8x4_buffer_to_staging_node``): never the variant
that computed it."""

_BLOCKS: dict[str, Callable[[TensorSpec], bytes]] = {
    "meta": TensorSpec.meta_block, "sizes": TensorSpec.sizes_block, "strides": TensorSpec.strides_block,
    "numel": TensorSpec.numel_block, "logical_limits": TensorSpec.logical_limits_block}
"""Tensor metadata blocks by UBO / push-constant kind."""

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


def _named_binding(exc: E, ctx: DeviceContext, shader: str) -> E:
    """The error (a dtype mismatch, an out-of-bounds access) with the binding's GLSL name (reflection of optimized
    SPIR-V has none); its node is kept."""
    import re

    text = str(exc)
    found = re.search(r"binding (\d+)\b", text)
    try:
        name = ctx.builder.binding_names(shader).get(int(found.group(1))) if found else None
    except Exception:  # the name is a courtesy; the mismatch stands without it
        name = None
    renamed = type(exc)(text.replace(found.group(0), f"{found.group(0)} ({name})", 1) if name and found else text)
    renamed.shader = shader
    if getattr(exc, "node_index", None) is not None:
        renamed.node_index = exc.node_index
    return renamed
