"""Launchers register by full op name, as each ``ops/impl/*.cpp`` ends with ``VK_REGISTER_OP(name, fn)``.

A launcher is an op function (``add_node``: device tensors and constants in, its nodes
added to a ``ComputeGraph``, the output tensor written, nothing read back), how the
op sizes its output (the port of its resize function), which arguments are constants
(prepacked, not uploaded as inputs), and the C++ it ports. Kernel cases run one
op in a graph of its own (``vkdiff.executors.op_graph``).

An op may have several launchers, one per C++ implementation ET-VK has had (since
v1.4.0 ``et_vk.linear_q4gsw`` is registered in ``Q4gswLinear.cpp``, before in
``QuantizedLinear.cpp``). ``launcher_for(op, tree)`` takes the one whose ``registered_in``
file registers the op in the given tree; ``stale_ports`` names the ported files whose
source in that tree differs from the one the port was written against (``port-stale``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Mapping

from vkdiff.device.shaders.ports import Port, registers, stale_files
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


def pick(op: str, tree: Path | None, impl: str | None) -> Launcher:
    """The tree's launcher, or the one ported from file ``impl`` (``QuantizedLinear.cpp``) when a case asks."""
    if impl is None:
        return launcher_for(op, tree)
    launcher_for(op)
    for launcher in LAUNCHERS[op]:
        if launcher.registered_in.rsplit("/", 1)[-1] == impl:
            return launcher
    raise NoLauncherError(f"no launcher for {op} ported from {impl}")
