"""A one-op graph: how kernel cases execute an op (``run_op``), built once for its arguments and run again smaller.

``OpGraph`` builds the graph ET-VK's backend would build for one node of the op: its
inputs staged in, its constants prepacked, the launcher registered for the op in the
run's tree adding its dispatches; ``launch`` reads the outputs back raw (unwritten
elements stay poisoned). ``resize`` re-runs it at smaller sizes as
``VulkanBackend::execute`` does.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping

import numpy as np

from vkdiff.device.boundary import BindingKindError, DeviceLimitError, EtVkRefusal
from vkdiff.device.runtime.context import DeviceContext, VariantMissingError
from vkdiff.device.graph import ComputeGraph, Launch, TensorRef
from vkdiff.device.graph.staging import RUNTIME_PORTS, element_index, graph_input, read_nchw
from vkdiff.device.graph.vtensor import INT8X4, Layout
from vkdiff.device.launchers.registry import pick, stale_ports
from vkdiff.device.shaders.ports import stale_files
from vkdiff.device.runtime.resources import Storage, Tensor


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
        self.launcher = launcher = pick(op, ctx.builder.et_src, options.pop("impl", None))
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
