"""Launchers register by full op name, as each ``ops/impl/*.cpp`` ends with ``VK_REGISTER_OP(name, fn)``.

A launcher is an op function (``add_node``: device tensors and constants in, its nodes
added to a ``ComputeGraph``, the output tensor written, nothing read back), how the
op sizes its output (the port of its resize function), which arguments are constants
(prepacked, not uploaded as inputs), and the C++ it ports. ``run_op`` is the thin
numpy wrapper kernel cases use: one small graph per call.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import numpy as np

from vkdiff.device.context import DeviceContext
from vkdiff.device.graph import ComputeGraph, Launch, TensorRef
from vkdiff.device.resources import Storage, Tensor


@dataclasses.dataclass(kw_only=True, frozen=True)
class Port:
    """C++ of ET-VK that a launcher re-hosts, and the source it was written against."""

    file: str
    """Path under ``backends/vulkan/`` (``runtime/graph/ops/impl/QuantizedLinear.cpp``)."""
    functions: tuple[str, ...]
    """The functions ported."""
    sha256: str
    """sha256 of that file in the tree the port was written against."""
    tree: str
    """That tree (``executorch main cff6f4dd32``)."""


OutputSpec = Callable[[Mapping[str, Any], Any], tuple[tuple[int, ...], Any]]
"""(arguments by schema name, requested output dtype or None) → output (shape, dtype): what the graph
would allocate for the op's output value."""


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


LAUNCHERS: dict[str, Launcher] = {}


class NoLauncherError(LookupError):
    """No launcher is registered for an op."""


def register_op(op: str, *, output: OutputSpec, constants: tuple[str, ...], ports: tuple[Port, ...]):
    """Register the decorated op function as ``op``'s launcher.

    Example::

        @register_op("et_vk.linear_q4gsw.default", output=resize_linear_qw_node,
                     constants=("weights", "weight_scales", "bias"), ports=PORTS)
        def quantized_linear_impl(graph, args, out, *, weight_storage=None): ...
    """
    def wrap(fn: Callable[..., None]) -> Callable[..., None]:
        known = LAUNCHERS.get(op)
        if known is not None and (known.add_node.__module__, known.add_node.__qualname__) != (
                fn.__module__, fn.__qualname__):
            raise ValueError(f"a launcher for {op} is already registered ({LAUNCHERS[op].add_node.__module__})")
        LAUNCHERS[op] = Launcher(op=op, add_node=fn, output=output, constants=frozenset(constants), ports=ports)
        return fn
    return wrap


def launcher_for(op: str) -> Launcher:
    """The launcher of ``op`` (import ``vkdiff.device.launchers``, which loads every launcher module).

    Raises:
        NoLauncherError: none is registered (names the registered ops).
    """
    if op not in LAUNCHERS:
        raise NoLauncherError(f"no launcher for {op} (launchers exist for {', '.join(sorted(LAUNCHERS)) or 'none'})")
    return LAUNCHERS[op]


def run_op(ctx: DeviceContext, op: str, args: Mapping[str, Any], *, storage: Storage, dtype: Any = None,
           **options: Any) -> Launch:
    """Run ``op`` once on numpy arguments: a one-op graph, inputs in ``storage``, the output read back.

    Args:
        ctx (DeviceContext): device and shader tree.
        op (str): full op name.
        args (Mapping[str, Any]): the op's arguments by schema name (arrays, scalars, None).
        storage (str): storage of the inputs and the output (``buffer``, ``texture3d``).
        dtype: the output's dtype where the arguments do not decide it (an embedding's table
            may be float16 while the graph computes in float32); None lets the op decide.
        **options: launcher options (e.g. ``weight_storage``) passed to its op function.

    Returns:
        Launch: the output and the dispatches that produced it.
    """
    launcher = launcher_for(op)
    graph = ComputeGraph(ctx)
    values: dict[str, Tensor | TensorRef | Any] = {}
    for name, value in args.items():
        if not isinstance(value, np.ndarray):
            values[name] = value
        elif name in launcher.constants:
            values[name] = TensorRef(id=name, data=value)
        else:
            values[name] = graph.add_input(value, storage, label=name)
    shape, out_dtype = launcher.output(args, dtype)
    out = graph.add_output(shape, out_dtype, storage)
    launcher.add_node(graph, values, out, **options)
    return graph.launch(out)
