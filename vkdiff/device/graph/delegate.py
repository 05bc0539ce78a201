"""A whole decoded Vulkan delegate on one device, node by node (``VulkanBackend.cpp`` + ``ComputeGraph``).

``run_delegate`` builds the graph as ``VulkanBackend`` does: every tensor value is
allocated up front with its serialized storage and layout (``DEFAULT_STORAGE`` →
texture3d, ``DEFAULT_LAYOUT`` → ``suggested_memory_layout``), constants become
``TensorRef``s keyed by value id (so a tied weight hits the prepack cache as on a
phone), scalars and lists are plain values. Inputs are staged through the tree's
``nchw_to_*`` shaders; then each op's launcher adds its prepack and execute nodes in
chain order. After each op its outputs are probed (copied out through ``*_to_nchw``),
so every node's value is available to compare, and read back once at the end.

Nothing here judges values: ``vkdiff.harness.device_models`` compares.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from vkdiff.device.context import DeviceContext
from vkdiff.device.graph.compute import ComputeGraph, DispatchRecord, TensorRef
from vkdiff.device.graph.staging import RUNTIME_PORTS, Readback, read_nchw, write_nchw
from vkdiff.device.graph.vtensor import LAYOUT_NAMES, STORAGE_NAMES, suggested_layout
from vkdiff.device.launchers.registry import LAUNCHERS, Launcher, launcher_for, stale_ports
from vkdiff.device.ports import stale_files
from vkdiff.device.resources import Tensor
from vkdiff.device.routing import Route
from vkdiff.harness.datamodel import DTYPE_FROM_OUTPUT, Call, Delegate


class MissingLaunchersError(LookupError):
    """Ops of the delegate that vkdiff cannot execute (→ ``NOT_RUN`` naming them)."""


@dataclasses.dataclass(kw_only=True)
class NodeRun:
    """One op of the chain as it ran."""

    index: int
    """Position in the chain."""
    op: str
    """Full op name."""
    call: Call
    """The op bound to its schema (argument value ids by name)."""
    dispatches: list[DispatchRecord]
    """Prepack and execute dispatches it added (zero-size ones marked skipped)."""
    host_seconds: float
    """Wall time spent adding its nodes (host work; dispatches are submitted, not awaited)."""
    launcher: str
    """The C++ file whose port ran it."""
    probes: dict[int, Readback] = dataclasses.field(default_factory=dict)

    @property
    def shader(self) -> str:
        """The last execute shader that ran (the node's main variant)."""
        ran = [d.shader for d in self.dispatches if not d.prepack and not d.skipped]
        return ran[-1] if ran else ""


@dataclasses.dataclass(kw_only=True)
class DelegateRun:
    """What running a delegate produced: values per node, outputs, how."""

    nodes: list[NodeRun]
    values: dict[int, np.ndarray]
    """Every probed value (node outputs and graph inputs) by value id, NCHW, in its staging dtype."""
    outputs: list[np.ndarray]
    route: Route
    stale: dict[str, list[str]]
    """Op → ported files whose source in the tree differs from the port's (``port-stale``)."""
    polyfilled: bool
    seconds: float
    """Wall time of the whole run, readbacks included."""


Tamper = Callable[[int, ComputeGraph, dict[int, Tensor]], None]
"""Hook called after node ``index`` with the graph and its output tensors (tests inject faults with it)."""


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
    """A non-tensor value as launchers take it (lists element-wise)."""
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
    """``add_tensor_to_graph`` / ``add_tensorref_to_graph`` for every tensor value."""
    values: dict[int, Any] = {}
    for vid, info in delegate.tensors.items():
        if vid in delegate.constants:
            values[vid] = TensorRef(id=vid, data=np.asarray(delegate.constants[vid]))
        else:
            storage, layout = _tensor_placement(info)
            values[vid] = graph.add_tensor(info.dims, info.dtype, storage, layout, label=f"%{vid}")
    return values


def run_delegate(ctx: DeviceContext, delegate: Delegate, inputs: Sequence[np.ndarray], *, route: Route,
                 tree: Path | None = None, probe: bool = True, tamper: Tamper | None = None) -> DelegateRun:
    """Run ``delegate`` on ``ctx`` for ``inputs`` (in ``input_ids`` order).

    Raises:
        MissingLaunchersError: an op has no launcher (before any device work).
        DeviceError subclasses (build, load, limits, dtype mismatch, dispatch): from the node that raised,
            with ``node_index`` and ``node_op`` set on the exception.
    """
    missing = missing_launchers(delegate)
    if missing:
        raise MissingLaunchersError(f"no launcher for {', '.join(missing)}")
    stale = stale_for(delegate, tree)
    start = time.perf_counter()
    graph = ComputeGraph(ctx, route)
    values = build_values(graph, delegate)
    readbacks: dict[int, Readback] = {}
    for vid, array in zip(delegate.input_ids, inputs):
        info = delegate.tensors[vid]
        write_nchw(graph, values[vid], np.asarray(array).astype(info.dtype))
        if probe:
            readbacks[vid] = read_nchw(graph, values[vid])
    nodes = []
    for operation in delegate.ops:
        call = delegate.bind(operation)
        node = _run_node(graph, delegate, call, launcher_for(operation.name, tree), values)
        nodes.append(node)
        if tamper is not None:
            tamper(operation.index, graph, {vid: values[vid] for vid in call.outputs if isinstance(values[vid], Tensor)})
        if probe or any(vid in delegate.output_ids for vid in call.outputs):
            node.probes = {vid: read_nchw(graph, values[vid]) for vid in call.outputs
                           if isinstance(values.get(vid), Tensor)}
            readbacks.update(node.probes)
    for vid in delegate.output_ids:
        if vid not in readbacks:
            readbacks[vid] = read_nchw(graph, values[vid])
    read = {vid: back.get() for vid, back in readbacks.items()}
    return DelegateRun(nodes=nodes, values=read, outputs=[read[vid] for vid in delegate.output_ids], route=route,
                       stale=stale, polyfilled=graph.polyfilled, seconds=time.perf_counter() - start)


def _run_node(graph: ComputeGraph, delegate: Delegate, call: Call, launcher: Launcher,
              values: dict[int, Any]) -> NodeRun:
    index = call.op.index
    graph.node = index
    before = len(graph.dispatches)
    args = _arguments(delegate, call, values)
    outputs = [values[vid] for vid in call.outputs]
    out = outputs[0] if len(outputs) == 1 else tuple(outputs)
    tick = time.perf_counter()
    try:
        launcher.add_node(graph, args, out)
    except Exception as exc:
        exc.node_index, exc.node_op = index, call.op.name
        raise
    finally:
        graph.node = None
    return NodeRun(index=index, op=call.op.name, call=call, dispatches=graph.dispatches[before:],
                   host_seconds=time.perf_counter() - tick, launcher=launcher.registered_in.rsplit("/", 1)[-1])

