"""Launcher for ``et_vk.rms_norm.default`` through ``rms_norm_{buffer|texture3d}_<dtype>``.

Ported from ``runtime/graph/ops/impl/RmsNorm.cpp`` (``rms_norm`` → ``add_rms_norm_node``):

* the weight constant is prepacked like the input (``prepack_standard_like``: the input's
  storage and layout, the constant's own dtype; no prepack cache);
* variant ``rms_norm_<out storage>_<out dtype>`` (``rms_norm_texture3d_float``,
  ``rms_norm_buffer_half``...); the texture path requires input and output to share the
  packed dim and the input to be width packed (the buffer path takes any layout);
* bindings: out, in, weight, then UBOs ``meta_ubo`` of out and in (``BufferMetadata`` or
  ``TextureMetadata`` by storage);
* push constant ``epsilon`` (float, by value: fixed at build);
* spec constant id 3: the input's hashed layout;
* a ``DynamicDispatchNode``: global ``(1, numel / W, 1)`` of the input
  (``rms_norm_global_wg_size``, one workgroup per row), local ``(64, 1, 1)``
  (``rms_norm_local_wg_size``: 64 workers reduce one row through shared memory);
* output sizes are the input's (``resize_rms_norm_node``).

Note on float16: neither shader accumulates in half. The buffer variant loads
``float16_t`` elements and converts each to ``float`` before squaring; the texture
variant reads the ``rgba16f`` image as ``vec4``. The sum of squares, the shared-memory
reduction (``shared float shared_sum[64]``), ``mean``, ``inversesqrt(mean + eps)`` and the
product ``x * rstd * weight`` are all fp32; only the stored result is rounded to half
(``T(...)`` on the buffer path, the ``rgba16f`` image store on the texture path). The
half variants are generated with ``PRECISION`` lowered to ``mediump``, which a driver may
use to relax float arithmetic to 16 bits; SPIR-V through naga keeps it 32-bit.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.staging import SUFFIX, prepack_standard
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.rms_norm.default"

PORTS = (Port(file="runtime/graph/ops/impl/RmsNorm.cpp",
              functions=("rms_norm", "add_rms_norm_node", "rms_norm_global_wg_size", "rms_norm_local_wg_size",
                         "resize_rms_norm_node"),
              sha256="894fb9e64a907d46236a3cf36ce2397637e989e9b471d7f9dbe0def9afcac228",
              tree="executorch main cff6f4dd32"),)

NUM_WORKERS = 64
"""``NUM_WORKERS`` of both shaders: the workgroup's x size, one row per workgroup."""


def resize_rms_norm_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_rms_norm_node`` on numpy arguments: the input's sizes and dtype."""
    x = np.asarray(args["x"])
    return x.shape, x.dtype


def rms_norm_global_wg_size(x: Tensor) -> tuple[int, int, int]:
    """``rms_norm_global_wg_size``: ``(1, rows, 1)``, rows = numel / the last dim of the input."""
    sizes = x.spec.sizes
    return (1, x.spec.numel // int(sizes[-1]), 1)


def rms_norm_local_wg_size() -> tuple[int, int, int]:
    """``rms_norm_local_wg_size``: 64 cooperating workers along x."""
    return (NUM_WORKERS, 1, 1)


def check_rms_norm_args(x: Tensor, out: Tensor) -> None:
    """The texture path's ``VK_CHECK_COND``s: same packed dim, width-packed input.

    Raises:
        ValueError: a texture input or output the shader cannot index.
    """
    if x.spec.storage == "buffer":
        return
    if x.spec.info.packed_dim != out.spec.info.packed_dim:
        raise EtVkRefusal(f"rms_norm: input ({x.spec.layout}) and output ({out.spec.layout}) must share the packed dim")
    if x.spec.info.packed_dim != 0:
        raise EtVkRefusal(f"RmsNorm texture path requires width-packed input, got {x.spec.layout}-packed")


def add_rms_norm_node(graph: ComputeGraph, x: Tensor, weight_data: TensorRef, eps: float, out: Tensor) -> None:
    """``add_rms_norm_node``."""
    weight = prepack_standard(graph, weight_data, x.spec.storage, x.spec.layout)
    name = f"rms_norm_{out.spec.storage}_{SUFFIX[out.spec.dtype]}"
    check_rms_norm_args(x, out)

    def resize_rms_norm_node() -> None:
        graph.virtual_resize(out, x.spec.sizes)

    graph.dispatch(name, global_wg=lambda: rms_norm_global_wg_size(x), local_wg=rms_norm_local_wg_size,
                   resources=[out, x, weight, graph.meta_ubo(out), graph.meta_ubo(x)],
                   spec={3: x.spec.hashed_layout}, immediates=np.array([eps], np.float32).tobytes(),
                   resize=resize_rms_norm_node)


@register_op(OP, output=resize_rms_norm_output, constants=("weight",), ports=PORTS)
def rms_norm(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``rms_norm``: ``et_vk.rms_norm(x, weight, eps) -> out``.

    Args:
        graph (ComputeGraph): the graph the node joins.
        args (Mapping[str, Any]): ``x`` (Tensor), ``weight`` (TensorRef, ``[W]``), ``eps`` (float).
        out (Tensor): the output, allocated at the input's maximal sizes.

    Example::

        rms_norm(graph, {"x": x, "weight": TensorRef(id=3, data=w), "eps": 1e-5}, out)
    """
    add_rms_norm_node(graph, args["x"], args["weight"], float(args["eps"]), out)
