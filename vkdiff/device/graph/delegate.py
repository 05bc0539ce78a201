"""A whole decoded Vulkan delegate on one device, node by node (``VulkanBackend.cpp`` + ``ComputeGraph``).

``DelegateGraph`` builds the graph once, as ``VulkanBackend::init`` does: every tensor
value is allocated with its serialized (maximal) sizes, storage and layout
(``DEFAULT_STORAGE`` → texture3d, ``DEFAULT_LAYOUT`` → ``suggested_memory_layout``),
constants become ``TensorRef``s keyed by value id (so a tied weight hits the prepack
cache as on a phone), SymInt values become ``SymInt``s, scalars and lists are plain
values. Each input gets its staging buffer and copy node; each op's launcher adds
its prepack nodes (run at once) and execute nodes in chain order; after each op its
outputs are probed (copy nodes into staging buffers) so every node's value can be
compared, and the state of constants it mutates (KV caches) is probed before and
after it.

``execute`` follows ``VulkanBackend::execute``: an input whose sizes differ is
resized (``resize_input``), data is copied into staging, ``propagate_resize`` runs
when an input was resized or a shape is data dependent, then the chain executes. A
graph executes any number of times (prefill, then decode steps) with its KV caches
persisting on the device.

Nothing here judges values: ``vkdiff.harness.device_models`` compares.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from vkdiff.device.runtime.context import DeviceContext
from vkdiff.device.graph.compute import ComputeGraph, DispatchRecord, SymInt, TensorRef
from vkdiff.device.graph.staging import RUNTIME_PORTS, Readback, add_input_staging, read_nchw
from vkdiff.device.graph.vtensor import LAYOUT_NAMES, STORAGE_NAMES, suggested_layout
from vkdiff.device.launchers.registry import LAUNCHERS, Launcher, launcher_for, stale_ports
from vkdiff.device.shaders.ports import stale_files
from vkdiff.device.runtime.resources import Tensor
from vkdiff.device.runtime.routing import Route
from vkdiff.datamodel import DTYPE_FROM_OUTPUT, Call, Delegate


class MissingLaunchersError(LookupError):
    """Ops of the delegate that vkdiff cannot execute (→ ``NOT_RUN`` naming them)."""


@dataclasses.dataclass(kw_only=True)
class NodeRun:
    """One op of the chain as it ran in one execution."""

    index: int
    """Position in the chain."""
    op: str
    """Full op name."""
    call: Call
    """The op bound to its schema (argument value ids by name)."""
    dispatches: list[DispatchRecord]
    """Its execute dispatches in this execution (zero-size ones marked skipped), after its prepack
    dispatches in the first execution."""
    host_seconds: float
    """Host time of this execution spent on its nodes: resize, picking, encoding, submitting."""
    build_seconds: float
    """Host time spent adding its nodes (and running its prepack nodes) at build."""
    launcher: str
    """The C++ file whose port ran it."""
    states_before: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    """Device state of each constant it mutates (KV caches), by value id, before it ran."""
    states_after: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)

    @property
    def shader(self) -> str:
        """The last execute shader that ran (the node's main variant)."""
        ran = [d.shader for d in self.dispatches if not d.prepack and not d.skipped]
        return ran[-1] if ran else ""


@dataclasses.dataclass(kw_only=True)
class DelegateRun:
    """What one execution of a delegate produced: values per node, outputs, how."""

    nodes: list[NodeRun]
    values: dict[int, Any]
    """Every probed value by value id: tensors NCHW at their current sizes in their staging dtype (node outputs
    and graph inputs), SymInts as ints."""
    outputs: list[np.ndarray]
    route: Route
    stale: dict[str, list[str]]
    """Op → ported files whose source in the tree differs from the port's (``port-stale``)."""
    polyfilled: bool
    clamped: tuple[str, ...]
    """Shaders run with infinite literals clamped to the largest finite value (naga rejects infinities)."""
    seconds: float
    """Wall time of this execution (resize, encode, readbacks; plus the build for the first)."""
    resized: bool = False
    """Inputs changed sizes (or a shape is data dependent) and ``propagate_resize`` ran."""


Tamper = Callable[[int, ComputeGraph, dict[int, Tensor]], None]
"""Host work after node ``index`` at every execution, given the graph and its output tensors (tests inject
faults with it)."""


def missing_launchers(delegate: Delegate) -> list[str]:
    """Ops of the delegate no launcher is registered for."""
    import vkdiff.device.launchers  # noqa: F401  (registers every launcher)

    return sorted({op.name for op in delegate.ops if op.name not in LAUNCHERS})


def stale_for(delegate: Delegate, tree: Path | None) -> dict[str, list[str]]:
    """Per op of the delegate (and ``runtime`` for staging and tensor metadata): ported files that differ in ``tree``."""
    stale = {"runtime": stale_files(RUNTIME_PORTS, tree)}
    for name in sorted({op.name for op in delegate.ops}):
        stale[name] = stale_ports(launcher_for(name, tree), tree)
    return {name: files for name, files in stale.items() if files}


def _tensor_placement(info) -> tuple[str, str]:
    storage = STORAGE_NAMES.get(info.storage, "texture3d")
    layout = LAYOUT_NAMES.get(info.layout) or suggested_layout(info.dims)
    return storage, layout


def _scalar(delegate: Delegate, vid: int, values: dict[int, Any]) -> Any:
    """A non-tensor value as launchers take it (lists element-wise, SymInts as graph ``SymInt``s)."""
    if vid in values:
        return values[vid]
    payload = delegate.value(vid)
    if delegate.values[vid].get("kind") == "ValueList":
        return [_scalar(delegate, item, values) for item in payload]
    return payload


def _arguments(delegate: Delegate, call: Call, values: dict[int, Any]) -> dict[str, Any]:
    args = {name: _scalar(delegate, vid, values) for name, vid in call.args.items()}
    for name, index in DTYPE_FROM_OUTPUT.get(call.schema.name, {}).items():
        if args.get(name) is None and index < len(call.outputs) and call.outputs[index] in delegate.tensors:
            args[name] = delegate.tensors[call.outputs[index]].dtype
    return args


def build_values(graph: ComputeGraph, delegate: Delegate) -> dict[int, Any]:
    """``add_tensor_to_graph`` / ``add_tensorref_to_graph`` for every tensor value, ``add_symint`` for SymInts."""
    values: dict[int, Any] = {}
    for vid, info in delegate.tensors.items():
        if vid in delegate.constants:
            values[vid] = TensorRef(id=vid, data=np.asarray(delegate.constants[vid]))
        else:
            storage, layout = _tensor_placement(info)
            values[vid] = graph.add_tensor(info.dims, info.dtype, storage, layout, label=f"%{vid}",
                                           memory=info.mem_obj_id)
    for vid, value in enumerate(delegate.values):
        if value.get("kind") == "SymInt":
            values[vid] = SymInt(int(delegate.value(vid) or 0))
    return values


class DelegateGraph:
    """A delegate built on one device, executed as many times as asked (``VulkanBackend`` init + execute)."""

    def __init__(self, ctx: DeviceContext, delegate: Delegate, *, route: Route, tree: Path | None = None,
                 probe: bool = True, tamper: Tamper | None = None, exact: bool = False, alias: bool = False):
        """Build the graph (prepack nodes run now).

        Raises:
            MissingLaunchersError: an op has no launcher (before any device work).
            DeviceError subclasses: from the node that raised, with ``node_index`` and ``node_op`` set.
        """
        missing = missing_launchers(delegate)
        if missing:
            raise MissingLaunchersError(f"no launcher for {', '.join(missing)}")
        start = time.perf_counter()
        self.delegate, self.route, self.tree = delegate, route, tree
        self.stale = stale_for(delegate, tree)
        self.graph = graph = ComputeGraph(ctx, route, exact=exact, alias=alias)
        self.values = build_values(graph, delegate)
        tensor_inputs = [vid for vid in delegate.input_ids if isinstance(self.values[vid], Tensor)]
        self.stagings = {vid: add_input_staging(graph, self.values[vid]) for vid in tensor_inputs}
        self.readbacks: dict[int, Readback] = {}
        if probe:
            with graph.probing():
                self.readbacks.update({vid: read_nchw(graph, self.values[vid]) for vid in tensor_inputs})
        self.nodes: list[_BuiltNode] = []
        for operation in delegate.ops:
            built = self._add_op(operation, launcher_for(operation.name, tree), tamper)
            self.nodes.append(built)
            wanted = probe or any(vid in delegate.output_ids for vid in built.call.outputs)
            if wanted:
                with graph.probing(probe):
                    self.readbacks.update({vid: read_nchw(graph, self.values[vid]) for vid in built.call.outputs
                                           if isinstance(self.values.get(vid), Tensor)})
        for vid in delegate.output_ids:
            if vid not in self.readbacks:
                self.readbacks[vid] = read_nchw(graph, self.values[vid])
        graph.prepare()
        self.build_seconds = time.perf_counter() - start

    def _add_op(self, operation, launcher: Launcher, tamper: Tamper | None) -> "_BuiltNode":
        graph, delegate = self.graph, self.delegate
        call = delegate.bind(operation)
        index = call.op.index
        graph.node = index
        first, known_states = len(graph.execute_nodes), set(graph.states)
        args = _arguments(delegate, call, self.values)
        outputs = [self.values[vid] for vid in call.outputs]
        out = outputs[0] if len(outputs) == 1 else tuple(outputs)
        tick = time.perf_counter()
        try:
            with graph.tmp_scope():
                launcher.add_node(graph, args, out)
            graph.node = None  # probes, like the output probes, are not the node's work
            mutated = [vid for arg in call.schema.arguments if arg.mutable
                       for vid in [call.args.get(arg.name)] if vid in graph.states]
            with graph.probing():
                before = _probe_states(graph, mutated, first, known_states)
            if tamper is not None:
                tensors = {vid: self.values[vid] for vid in call.outputs if isinstance(self.values[vid], Tensor)}
                graph.host_node(run=lambda: tamper(index, graph, tensors))
            with graph.probing():
                after = {vid: read_nchw(graph, graph.states[vid]) for vid in mutated}
        except Exception as exc:
            exc.node_index, exc.node_op = index, call.op.name
            raise
        finally:
            graph.node = None
        return _BuiltNode(call=call, launcher=launcher.registered_in.rsplit("/", 1)[-1], before=before, after=after,
                          build_seconds=time.perf_counter() - tick)

    @property
    def data_dependent(self) -> bool:
        """``has_data_dependent_shapes``: some node resizes at every execution (``select_as_symint``)."""
        return any(node.data_dependent for node in self.graph.execute_nodes)

    def execute(self, inputs: Sequence[np.ndarray]) -> DelegateRun:
        """One execution for ``inputs`` (in ``input_ids`` order); the caches keep what earlier ones wrote.

        Raises:
            ValueError: an input is larger than its serialized sizes (before any device work).
            DeviceError subclasses: from the node that raised, with ``node_index`` and ``node_op`` set.
        """
        graph, delegate = self.graph, self.delegate
        start = time.perf_counter()
        first = graph.executions == 0
        resized = False
        for vid, array in zip(delegate.input_ids, inputs):
            if isinstance(self.values[vid], SymInt):
                graph.set_symint(self.values[vid], int(np.asarray(array).item()))
                resized = True
                continue
            array = np.asarray(array).astype(delegate.tensors[vid].dtype, copy=False)
            tensor, staging = self.values[vid], self.stagings[vid]
            if tuple(array.shape) != tuple(tensor.spec.sizes):
                graph.virtual_resize(tensor, array.shape)
                graph.mark_updated(staging)
                resized = True
            staging.copy_in(array)
        graph.node_seconds = {}
        try:
            if resized or self.data_dependent:
                graph.propagate_resize()
            graph.execute()
        except Exception as exc:
            index = getattr(exc, "node_index", None)
            if index is not None and getattr(exc, "node_op", None) is None:
                exc.node_op = delegate.ops[index].name if index < len(delegate.ops) else ""
            raise
        read = dict(zip(self.readbacks, Readback.get_all(list(self.readbacks.values()))))
        read.update({vid: value.value for vid, value in self.values.items() if isinstance(value, SymInt)})
        probes = [(built.call.op.index, when, vid, back) for built in self.nodes
                  for when, found in (("before", built.before), ("after", built.after)) for vid, back in found.items()]
        states: dict[tuple[int, str], dict[int, np.ndarray]] = {}
        for (index, when, vid, _), value in zip(probes, Readback.get_all([p[3] for p in probes])):
            states.setdefault((index, when), {})[vid] = value
        nodes = [self._node_run(built, first, states) for built in self.nodes]
        seconds = time.perf_counter() - start + (self.build_seconds if first else 0.0)
        return DelegateRun(nodes=nodes, values=read, outputs=[read[vid] for vid in delegate.output_ids],
                           route=self.route, stale=self.stale, polyfilled=graph.polyfilled,
                           clamped=tuple(sorted(graph.clamped)), seconds=seconds,
                           resized=resized or self.data_dependent)

    def _node_run(self, built: "_BuiltNode", first: bool, states: dict) -> NodeRun:
        index = built.call.op.index
        records = [d for d in self.graph.dispatches if d.node == index and (first or not d.prepack)]
        return NodeRun(index=index, op=built.call.op.name, call=built.call, dispatches=records,
                       host_seconds=self.graph.node_seconds.get(index, 0.0), build_seconds=built.build_seconds,
                       launcher=built.launcher, states_before=states.get((index, "before"), {}),
                       states_after=states.get((index, "after"), {}))


@dataclasses.dataclass(kw_only=True)
class _BuiltNode:
    call: Call
    launcher: str
    before: dict[int, Readback]
    after: dict[int, Readback]
    build_seconds: float


def _probe_states(graph: ComputeGraph, mutated: list[int], first: int, known: set) -> dict[int, Readback]:
    """Copy nodes for the mutated states, moved in front of the op's first execute node."""
    before = {}
    for vid in mutated:
        count = len(graph.execute_nodes)
        before[vid] = read_nchw(graph, graph.states[vid])
        added = graph.execute_nodes[count:]
        del graph.execute_nodes[count:]
        graph.execute_nodes[first:first] = added
        first += len(added)
    return before


def run_delegate(ctx: DeviceContext, delegate: Delegate, inputs: Sequence[np.ndarray], *, route: Route,
                 tree: Path | None = None, probe: bool = True, tamper: Tamper | None = None) -> DelegateRun:
    """Build ``delegate`` on ``ctx`` and execute it once for ``inputs`` (in ``input_ids`` order).

    Raises:
        MissingLaunchersError: an op has no launcher (before any device work).
        DeviceError subclasses (build, load, limits, dtype mismatch, dispatch): from the node that raised,
            with ``node_index`` and ``node_op`` set on the exception.
    """
    return DelegateGraph(ctx, delegate, route=route, tree=tree, probe=probe, tamper=tamper).execute(inputs)
