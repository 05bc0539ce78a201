"""Launcher for ``et_vk.q8ta_relu.default``: relu between two int8x4 buffers, requantized.

Ported from ``runtime/graph/ops/impl/Q8taUnary.cpp`` (``q8ta_relu`` → ``add_q8ta_unary_node``,
``resize_q8ta_unary_node``), with ``BlockConfig`` from ``Common.cpp`` (``launchers/utils/block_config.py``):

* checks: input and output share the packed dim and its block size (``VK_CHECK_COND``); so ``4w`` / ``4h4w``
  (W, 4) and ``4c`` / ``4c1w`` / ``4w4c`` (C, 4) may be mixed within a group;
* variant ``q8ta_relu_<output storage>`` (``q8ta_relu_buffer``, the one the yaml builds);
* bindings out, in, ``buffer_meta_ubo`` of out and in;
* push constants ``(input_scale, input_zp, 1.0f / output_scale, output_zp)`` (float32, int32, float32, int32);
* block config ``create_block_config_for_tensor(out)``; spec constants from id 3: out layout, in layout, block
  config;
* global size ``pick_linear_global_wg_with_block_config`` over the output's sizes, local
  ``pick_square_local_wg_with_block_config`` (64, 1, 1);
* resize (``resize_q8ta_unary_node``): the output takes the input's sizes.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.launchers.utils import block_config as bc
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.q8ta_relu.default"

PORTS = (Port(file="runtime/graph/ops/impl/Q8taUnary.cpp",
              functions=("q8ta_relu", "add_q8ta_unary_node", "resize_q8ta_unary_node"),
              sha256="81bc5dcd580b13e4779a0aaee489bcbed585634223bc04a3c9aabc8dd1006e45",
              tree="executorch main cff6f4dd32"),
         bc.COMMON)


def check_same_packing(x: Tensor, out: Tensor, role: str) -> None:
    """``VK_CHECK_COND(<role>_info.packed_dim == output_info.packed_dim)`` and the same for the block size."""
    a, b = x.spec.info, out.spec.info
    if a.packed_dim != b.packed_dim:
        raise EtVkRefusal(f"VK_CHECK_COND({role}_info.packed_dim == output_info.packed_dim): {x.spec.layout} packs "
                          f"WHCN dim {a.packed_dim}, {out.spec.layout} dim {b.packed_dim}")
    if a.packed_dim_block_size != b.packed_dim_block_size:
        raise EtVkRefusal(f"VK_CHECK_COND({role}_info.packed_dim_block_size == output_info.packed_dim_block_size): "
                          f"{a.packed_dim_block_size} != {b.packed_dim_block_size}")


def add_q8ta_unary_node(graph: ComputeGraph, x: Tensor, input_scale: float, input_zp: int, output_scale: float,
                        output_zp: int, out: Tensor, op_name: str) -> None:
    """``add_q8ta_unary_node``: dequantize, ``op``, requantize, one 4×4 block per thread."""
    check_same_packing(x, out, "input")
    immediates = (np.float32(input_scale).tobytes() + np.int32(input_zp).tobytes()
                  + (np.float32(1.0) / np.float32(output_scale)).tobytes() + np.int32(output_zp).tobytes())
    packed = bc.create_block_config_for_tensor(out.spec).as_packed_int()
    name = f"q8ta_{op_name}_{out.spec.storage}"

    def global_wg() -> tuple[int, int, int]:
        return bc.pick_linear_global_wg_with_block_config(out.spec.sizes, packed)

    graph.dispatch(lambda: name, global_wg=global_wg,
                   local_wg=lambda: bc.pick_square_local_wg_with_block_config(global_wg(), packed),
                   resources=[out, x, graph.meta_ubo(out), graph.meta_ubo(x)],
                   spec={3: out.spec.hashed_layout, 4: x.spec.hashed_layout, 5: packed}, immediates=immediates,
                   resize=lambda: graph.virtual_resize(out, x.spec.sizes))


def q8ta_unary_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_q8ta_unary_node``: the input's sizes, int8 codes."""
    return np.shape(args["input"]), np.int8


@register_op(OP, output=q8ta_unary_output, constants=(), ports=PORTS)
def q8ta_relu(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``q8ta_relu``: ``out = quantize(relu(dequantize(input)))`` between int8x4 buffers.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``input`` (int8x4 Tensor), ``input_scale``, ``input_zero_point``, ``output_scale``,
            ``output_zero_point``, by schema name.
        out (Tensor): the int8x4 output (same packed dim and block size as the input).

    Example::

        q8ta_relu(graph, {"input": q, "input_scale": 0.05, "input_zero_point": 3, "output_scale": 0.03,
                          "output_zero_point": -128}, out)
    """
    add_q8ta_unary_node(graph, args["input"], float(args["input_scale"]), int(args["input_zero_point"]),
                        float(args["output_scale"]), int(args["output_zero_point"]), out, "relu")
