"""Launcher for ``aten.scalar_tensor.default`` through ``scalar_tensor_<out dtype>_<storage>_<scalar dtype>``.

Ported from ``runtime/graph/ops/impl/ScalarTensor.cpp`` (``scalar_tensor``): the scalar is read with
``extract_scalar<float>`` and written to a params buffer as a 32-bit float, whatever its type; the variant's
last suffix is ``dtype_of(scalar)`` (``ComputeGraph::dtype_of``: a Double is Float, an Int is Int, a Bool is
Bool, whose suffix ``add_dtype_suffix`` writes as ``uint8``), and that variant declares its params block of
that type. One plain ``DispatchNode`` (no resize function): global ``create_global_wg_size(out)``, local
``create_local_wg_size(out)``; the single binding besides the output is the params buffer.
A variant the tree does not define fails as ``VK_KERNEL_FROM_STR`` does (the shader registry throws).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.permute import TREE
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "aten.scalar_tensor.default"
PORTS = (Port(file="runtime/graph/ops/impl/ScalarTensor.cpp", functions=("scalar_tensor",),
              sha256="4b3c16e7d7166ec653d3e0cf540527f67d1ba495e7afa3e7722f32eb306bbdde", tree=TREE),)


def scalar_suffix(value: Any) -> str:
    """``add_dtype_suffix(dtype_of(scalar))``: Bool → ``uint8``, Int → ``int32``, Double → ``float``."""
    if isinstance(value, (bool, np.bool_)):
        return "uint8"
    if isinstance(value, (int, np.integer)):
        return "int32"
    return "float"


def scalar_tensor_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """A 0-dim tensor of the ``dtype`` argument (ATen's default, float32, when None)."""
    return (), np.dtype(args["dtype"]) if args.get("dtype") is not None else np.dtype(np.float32)


@register_op(OP, output=scalar_tensor_output, constants=(), ports=PORTS)
def scalar_tensor(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``scalar_tensor``: a 0-dim tensor holding ``s``.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``s`` (bool, int or float; its Python type is the ET-VK value type) and ``dtype``.
        out (Tensor): the 0-dim output.

    Raises:
        ValueError: the tree defines no variant for the scalar's type (``VK_KERNEL_FROM_STR`` throws).

    Example::

        scalar_tensor(graph, {"s": 2.5, "dtype": "float16"}, out)
    """
    value = args["s"]
    name = f"scalar_tensor_{SUFFIX[out.spec.dtype]}_{out.spec.storage}_{scalar_suffix(value)}"
    if not graph.ctx.has(name):
        raise EtVkRefusal(f"Could not find ShaderInfo with name {name} (VK_KERNEL_FROM_STR)")
    block = np.array([float(value)], np.float32).tobytes()
    graph.dispatch(name, global_wg=default_global_wg(out), resources=[out, graph.uniform(block, "scalar_value")])
