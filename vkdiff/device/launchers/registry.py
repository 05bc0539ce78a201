"""Launchers register by full op name, as each ``ops/impl/*.cpp`` ends with ``VK_REGISTER_OP(name, fn)``.

A launcher is an op function (``add_node``: device tensors and constants in, its nodes
added to a ``ComputeGraph``, the output tensor written, nothing read back), how the
op sizes its output (the port of its resize function), which arguments are constants
(prepacked, not uploaded as inputs), and the C++ it ports. ``run_op`` is the thin
numpy wrapper kernel cases use: one small graph per call.

An op may have several launchers, one per C++ implementation ET-VK has had (since
v1.4.0 ``et_vk.linear_q4gsw`` is registered in ``Q4gswLinear.cpp``, before in
``QuantizedLinear.cpp``). ``launcher_for(op, tree)`` takes the one whose ``registered_in``
file registers the op in the given tree; ``stale_ports`` names the ported files whose
source in that tree differs from the one the port was written against (``port-stale``).
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from vkdiff.device.boundary import BindingKindError, DeviceLimitError, EtVkRefusal
from vkdiff.device.context import DeviceContext, VariantMissingError
from vkdiff.device.graph import ComputeGraph, Launch, TensorRef
from vkdiff.device.graph.staging import RUNTIME_PORTS, element_index, graph_input, read_nchw
from vkdiff.device.graph.vtensor import INT8X4, Layout
from vkdiff.device.ports import Port, registers, stale_files
from vkdiff.device.resources import Storage, Tensor
from vkdiff.datamodel.arithmetic import Arithmetic


OutputSpec = Callable[[Mapping[str, Any], Any], Any]
"""(arguments by schema name, requested output dtype or None) → output (shape, dtype), or a list of them for
an op returning a tuple: what the graph would allocate for the op's output values."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class Launcher:
    """One op's launcher."""

    op: str
    """Full op name (``et_vk.linear_q4gsw.default``)."""
    add_node: Callable[..., None]
    """``add_node(graph, args, out, **options)``: args are ``Tensor``/``TensorRef``/scalars by schema name."""
    output: OutputSpec
    """Shape and dtype of the output for given arguments (the port of the op's resize function)."""
    constants: frozenset[str]
    """Argument names that are constants of the graph (prepacked)."""
    ports: tuple[Port, ...]
    """The C++ this launcher re-hosts."""
    registered_in: str
    """The file (under ``backends/vulkan/``) whose ``VK_REGISTER_OP`` names the op for this implementation."""
    placements: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Storage of tensor arguments (by name) and outputs (``out0``, ``out1``...) whose shaders declare a fixed
    one (dq8ca's activation qparams, choose_qparams' outputs: texture3d); ``storage:layout`` also fixes the layout
    of an input (grid_sampler's grid: ``buffer:width``, a contiguous buffer)."""
    arithmetic: Callable[[str], Arithmetic | None] = lambda variant: None
    """The accumulation of a dispatched variant, ported from its GLSL (None: not declared; the verdict then
    bounds rounding by the tolerance policy alone)."""
    mutates: tuple[str, ...] = ()
    """Tensor arguments the op writes in place and returns (``Tensor(a!)``), in output order (adamw_step's
    ``param, m, v``): a one-op graph reads these inputs back as its outputs, as ET-VK's own op test does."""


LAUNCHERS: dict[str, list[Launcher]] = {}
"""Every launcher by op, in registration order."""


class NoLauncherError(LookupError):
    """No launcher is registered for an op."""


def register_op(op: str, *, output: OutputSpec, constants: tuple[str, ...], ports: tuple[Port, ...],
                registered_in: str | None = None, placements: Mapping[str, str] | None = None,
                arithmetic: Callable[[str], Arithmetic | None] | None = None, mutates: tuple[str, ...] = ()):
    """Register the decorated op function as a launcher of ``op``.

    ``registered_in`` defaults to the first port's file. Registering the same function
    twice is a no-op; a second implementation must name a different ``registered_in``.

    Example::

        @register_op("et_vk.linear_q4gsw.default", output=resize_q4gsw_linear_node,
                     constants=("weights", "weight_scales", "bias"), ports=PORTS)
        def q4gsw_linear(graph, args, out): ...
    """
    def wrap(fn: Callable[..., None]) -> Callable[..., None]:
        where = registered_in or ports[0].file
        found = LAUNCHERS.setdefault(op, [])
        for known in found:
            same = (known.add_node.__module__, known.add_node.__qualname__) == (fn.__module__, fn.__qualname__)
            if known.registered_in == where and not same:
                raise ValueError(f"a launcher for {op} from {where} is already registered ({known.add_node.__module__})")
            if same:
                return fn
        found.append(Launcher(op=op, add_node=fn, output=output, constants=frozenset(constants), ports=ports,
                              registered_in=where, placements=dict(placements or {}), mutates=tuple(mutates),
                              **({"arithmetic": arithmetic} if arithmetic else {})))
        return fn
    return wrap


def launcher_for(op: str, tree: Path | None = None) -> Launcher:
    """The launcher of ``op`` for the tree's implementation (import ``vkdiff.device.launchers`` first).

    Without a tree (or when no launcher's file registers the op there) the first
    registered is taken.

    Raises:
        NoLauncherError: none is registered (names the registered ops).
    """
    if op not in LAUNCHERS:
        raise NoLauncherError(f"no launcher for {op} (launchers exist for {', '.join(sorted(LAUNCHERS)) or 'none'})")
    for launcher in LAUNCHERS[op]:
        if tree is not None and registers(tree, launcher.registered_in, op):
            return launcher
    return LAUNCHERS[op][0]


def stale_ports(launcher: Launcher, tree: Path | None) -> list[str]:
    """Ported files of ``launcher`` whose source in ``tree`` differs from the one the port was written against."""
    return stale_files(launcher.ports, tree)


def run_op(ctx: DeviceContext, op: str, args: Mapping[str, Any], *, storage: Storage, layout: Layout = "width",
           dtype: Any = None, **options: Any) -> Launch:
    """Run ``op`` once on numpy arguments: a one-op graph, inputs in ``storage``, the output read back.

    Args:
        ctx (DeviceContext): device and shader tree.
        op (str): full op name.
        args (Mapping[str, Any]): the op's arguments by schema name (arrays, scalars, None).
        storage (str): storage of the inputs and the output (``buffer``, ``texture3d``).
        layout (str): memory layout of the inputs and the output (``width``, ``height``, ``channels``).
        dtype: the output's dtype where the arguments do not decide it (an embedding's table
            may be float16 while the graph computes in float32); None lets the op decide.
        **options: launcher options (e.g. ``weight_storage``) passed to its op function; ``impl`` (a C++
            file name such as ``QuantizedLinear.cpp``) picks that implementation instead of the tree's;
            ``out_storage`` / ``out_layout`` place the outputs apart from the inputs (a clone from a texture
            to a buffer: the C++ picks its shader by both placements).

    Returns:
        Launch: the output and the dispatches that produced it.
    """
    return OpGraph(ctx, op, args, storage=storage, layout=layout, dtype=dtype, **options).launch()


class ResizeError(ValueError):
    """Arguments for a smaller run change what a built graph fixes (a constant, a scalar, a tensor's rank)."""


STORAGE_OF = "storage."
"""Option prefix giving one graph input its own storage (``storage.k=texture3d``: ``k`` on a texture, the others on
the case's storage), as the partitioner may place an op's inputs."""


class OpGraph:
    """A one-op graph built once for its arguments' sizes (the upper bound), then run again at smaller sizes
    as ``VulkanBackend::execute`` does: inputs ``virtual_resize``-d and re-staged, ``propagate_resize``, execute."""

    def __init__(self, ctx: DeviceContext, op: str, args: Mapping[str, Any], *, storage: Storage,
                 layout: Layout = "width", dtype: Any = None, **options: Any):
        self.ctx, self.op, self.layout = ctx, op, layout
        self.launcher = launcher = _pick(op, ctx.builder.et_src, options.pop("impl", None))
        out_storage, self.out_layout = options.pop("out_storage", storage), options.pop("out_layout", layout)
        own = {key.removeprefix(STORAGE_OF): options.pop(key) for key in list(options) if key.startswith(STORAGE_OF)}
        self.graph = graph = ComputeGraph(ctx)
        halves = [name for name, v in args.items() if isinstance(v, np.ndarray) and v.dtype == np.float16]
        if (halves or np.dtype(dtype or np.float32) == np.float16) and not graph.route.float16_buffers:
            raise DeviceLimitError(f"{op}: float16 kernel case on a device without shader-f16: ET-VK would run it "
                                   f"in float32 (get_effective_scalar_type), so the half kernel cannot be exercised")
        self.args = dict(args)
        self.inputs: dict[str, Tensor] = {}
        values: dict[str, Tensor | TensorRef | Any] = {}
        for name, value in args.items():
            if isinstance(value, (list, tuple)) and any(isinstance(v, np.ndarray) for v in value):
                values[name] = [graph_input(graph, v, storage, layout, label=f"{name}{i}")
                                if isinstance(v, np.ndarray) else v for i, v in enumerate(value)]
                self.inputs.update({f"{name}[{i}]": t for i, t in enumerate(values[name]) if isinstance(t, Tensor)})
            elif not isinstance(value, np.ndarray):
                values[name] = value
            elif name in launcher.constants:
                values[name] = TensorRef(id=name, data=value)
            else:
                where, _, packed = own.get(name, launcher.placements.get(name, storage)).partition(":")
                values[name] = self.inputs[name] = graph_input(graph, value, where, packed or layout, label=name)
        spec = launcher.output(args, dtype)
        self.tuple_output = isinstance(spec, list)
        self.outs = tuple(self.inputs[name] for name in launcher.mutates) or tuple(
            graph.add_tensor(shape, np.dtype(out_dtype).name, launcher.placements.get(f"out{i}", out_storage),
                             self.out_layout, label=f"output{i}")
            for i, (shape, out_dtype) in enumerate(spec if self.tuple_output else [spec]))
        with self._variants_named_by_the_port():
            launcher.add_node(graph, values, self.outs if self.tuple_output else self.outs[0], **options)
        for out in self.outs:
            if out.spec.dtype == INT8X4:
                read_nchw(graph, out)

    @contextlib.contextmanager
    def _variants_named_by_the_port(self) -> Iterator[None]:
        """A shader variant the tree lacks, named by a port whose C++ the tree still has while the tree builds other
        variants of that shader, is ET-VK's own bug (its graph build throws: ``EtVkRefusal``); with a stale port,
        or a tree without that shader at all, it stays ``VariantMissingError`` (``NOT_RUN``). Likewise a buffer
        bound to an image binding (or the reverse) by a current port is ET-VK's invalid Vulkan usage, not
        vkdiff's launcher bug."""
        try:
            yield
        except VariantMissingError as exc:
            if not self.ctx.defines_family_of(exc.name) or not self._port_is_current():
                raise
            raise EtVkRefusal(f"{exc}, yet the tree's own C++ ({self._ported()}, as ported) asks for it: ET-VK's "
                              f"graph build throws (no such shader)") from None
        except BindingKindError as exc:
            if not self._port_is_current():
                raise
            raise EtVkRefusal(f"{exc}, as the tree's own C++ ({self._ported()}, as ported) binds it: invalid Vulkan "
                              f"usage (a descriptor of the wrong type)") from None

    def _port_is_current(self) -> bool:
        tree = self.ctx.builder.et_src
        return tree is not None and not stale_files(RUNTIME_PORTS, tree) and not stale_ports(self.launcher, tree)

    def _ported(self) -> str:
        return ", ".join(port.file.rsplit("/", 1)[-1] for port in self.launcher.ports if port.file.endswith(".cpp"))

    def launch(self) -> Launch:
        """Execute and read the outputs back at their current sizes, raw (unwritten elements stay poisoned)."""
        with self._variants_named_by_the_port():
            return self._launch()

    def _launch(self) -> Launch:
        graph, ctx = self.graph, self.ctx
        resized = any(tuple(t.spec.sizes) != tuple(t.allocated.sizes) for t in self.outs)
        raw = (self.out_layout != "width" or (resized and any(t.storage != "buffer" for t in self.outs))) and not any(
            t.spec.dtype == INT8X4 for t in self.outs)
        launched = graph.launch(self.outs if self.tuple_output else self.outs[0],
                                tuple(element_index(graph, t) for t in self.outs) if raw else None)
        stale = {"runtime": stale_files(RUNTIME_PORTS, ctx.builder.et_src),
                 self.op: stale_ports(self.launcher, ctx.builder.et_src)}
        launched.stale = {name: files for name, files in stale.items() if files}
        launched.arithmetic = self.launcher.arithmetic(launched.variant)
        return launched

    def resize(self, args: Mapping[str, Any]) -> None:
        """New input sizes and data for the next ``launch``; constants and scalars must be the built ones.

        Raises:
            ResizeError: ``args`` change a constant, a scalar or a tensor's rank, or exceed an input's allocation.
        """
        for name, value in _flat_inputs(args, self.inputs):
            built = self.args.get(name)
            if name in self.inputs:
                tensor = self.inputs[name]
                if np.ndim(value) != len(tensor.allocated.sizes) or any(
                        a > b for a, b in zip(np.shape(value), tensor.allocated.sizes)):
                    raise ResizeError(f"{self.op}: input {name} of sizes {list(np.shape(value))} does not fit the "
                                      f"graph's {list(tensor.allocated.sizes)}")
                staging = self.graph.input_stagings[id(tensor)]
                if tuple(np.shape(value)) != tuple(tensor.spec.sizes):
                    self.graph.virtual_resize(tensor, np.shape(value))
                    self.graph.mark_updated(staging)
                staging.copy_in(value)
            elif not _same_value(built, value):
                raise ResizeError(f"{self.op}: argument {name} differs from the built graph's; only graph inputs "
                                  f"may change below the bound")
        self.graph.propagate_resize()

    @property
    def output_sizes(self) -> list[tuple[int, ...]]:
        """The outputs' sizes as the graph's resize functions left them."""
        return [tuple(t.spec.sizes) for t in self.outs]


def _flat_inputs(args: Mapping[str, Any], inputs: Mapping[str, Tensor]) -> list[tuple[str, Any]]:
    """``args`` with each tensor of a list input (``cat``'s ``tensors``) under its own name (``tensors[1]``)."""
    flat = []
    for name, value in args.items():
        if isinstance(value, (list, tuple)) and f"{name}[0]" in inputs:
            flat += [(f"{name}[{i}]", v) for i, v in enumerate(value)]
        else:
            flat.append((name, value))
    return flat


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape and bool(
            np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    return a == b or (a != a and b != b)


def _pick(op: str, tree: Path | None, impl: str | None) -> Launcher:
    """The tree's launcher, or the one ported from file ``impl`` (``QuantizedLinear.cpp``) when a case asks."""
    if impl is None:
        return launcher_for(op, tree)
    launcher_for(op)
    for launcher in LAUNCHERS[op]:
        if launcher.registered_in.rsplit("/", 1)[-1] == impl:
            return launcher
    raise NoLauncherError(f"no launcher for {op} ported from {impl}")
