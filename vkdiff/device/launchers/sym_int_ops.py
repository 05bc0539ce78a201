"""Host-side SymInt ops: ``sym_size.int``, SymInt ``add``/``sub``/``mul``/``floordiv``, ``et_vk.select_as_symint``.

Ported from ``runtime/graph/ops/impl/SymIntOps.cpp``. None dispatches a shader: each
computes its SymInt once at build and adds an ``ExecuteNode`` whose resize function
computes it again (``set_symint``, which marks the SymInt updated only when its value
changes, so the nodes reading it re-derive their sizes and parameters).
``select_as_symint`` reads an element of its input's *staging* data on the host (the
graph input's latest copy) and is data dependent: it runs at every execution.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph, SymInt
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

PORTS = (Port(file="runtime/graph/ops/impl/SymIntOps.cpp",
              functions=("sym_size_int", "sym_add", "sym_sub", "sym_mul", "sym_floordiv", "select_as_symint_impl"),
              sha256="45e3c16fe9c57546f94ce04bfe1459eded9105943bd0559020367a204dbf7ec9",
              tree="executorch main cff6f4dd32"),)


def symint_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """A SymInt is a host integer (no device tensor)."""
    return (), np.dtype(np.int32)


def floordiv(a: int, b: int) -> int:
    """``sym_floordiv_impl``: rounds towards negative infinity."""
    return a // b


BINARY: dict[str, Callable[[int, int], int]] = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b,
                                                "mul": lambda a, b: a * b, "floordiv": floordiv}


@register_op("sym_size.int", output=symint_output, constants=(), ports=PORTS)
def sym_size_int(graph: ComputeGraph, args: Mapping[str, Any], out: SymInt) -> None:
    """``sym_size_int``: the input's current size at ``dim``."""
    x, dim = args["self"], int(args["dim"])
    graph.host_node(args=(x,), resize=lambda: graph.set_symint(out, x.spec.sizes[dim]))


def _register_binary(name: str, fn: Callable[[int, int], int]) -> None:
    @register_op(name, output=symint_output, constants=(), ports=PORTS)
    def binary(graph: ComputeGraph, args: Mapping[str, Any], out: SymInt) -> None:
        a, b = args["a"], args["b"]
        graph.host_node(args=(a, b), resize=lambda: graph.set_symint(
            out, fn(graph.read_symint(a), graph.read_symint(b))))

    binary.__qualname__ = f"sym_{name}"


for _name, _fn in BINARY.items():
    _register_binary(_name, _fn)


def select_element_at_dim(data: np.ndarray, dim: int, index: int) -> int:
    """``StagingBuffer::select_element_at_dim``: the first element of the slice at ``index`` along ``dim``."""
    return int(np.take(data, index, axis=dim).reshape(-1)[0])


@register_op("et_vk.select_as_symint.default", output=symint_output, constants=(), ports=PORTS)
def select_as_symint(graph: ComputeGraph, args: Mapping[str, Any], out: SymInt) -> None:
    """``select_as_symint``: reads the input's staging data, so it re-runs at every execution."""
    x: Tensor = args["x"]
    dim, index = int(args["dim"]), int(args["index"])
    staging = graph.input_stagings.get(id(x))
    if staging is None:
        raise EtVkRefusal("select_as_symint: the input must be a graph input with a staging buffer "
                         "(ET-VK reads graph->get_staging(graph->staging_of(x)))")

    def resize() -> None:
        if staging.data is None:
            return
        sizes = x.spec.sizes
        position = index + sizes[dim] if index < 0 else index
        graph.set_symint(out, select_element_at_dim(np.asarray(staging.data).reshape(sizes), dim, position))

    graph.host_node(args=(x,), resize=resize, data_dependent=True)
