"""Launcher for ``et_vk.q8ta_add.default``: the requantized sum of two int8x4 buffers.

Ported from ``runtime/graph/ops/impl/Q8taBinary.cpp`` (``q8ta_add`` → ``add_q8ta_binary_node``,
``resize_q8ta_binary_node``) and ``utils/TensorUtils.cpp`` (``calculate_broadcasted_output_size``), with
``BlockConfig`` from ``Common.cpp`` (``launchers/utils/block_config.py``):

* checks: both inputs share the output's packed dim and its block size (``VK_CHECK_COND``, four of them); the
  three tensors may differ in layout within a group (the resnet/DeiT residual add reads ``4w4c`` + ``4c1w``);
  nothing checks that the inputs' sizes agree;
* variant ``q8ta_add_<output storage>`` (``q8ta_add_buffer``);
* bindings out, a, b, then ``buffer_meta_ubo`` of out, a, b;
* push constants ``(a_scale, a_zp, b_scale, b_zp, 1.0f / output_scale, output_zp, alpha)`` (28 bytes; ``alpha``
  is 1 unless a float is given); ``q8ta_binary.glsl`` declares the first six only and computes ``X + Y``;
* block config ``create_block_config_for_tensor(out)``; spec constants from id 3: out, a, b layouts, block config;
* global size ``pick_linear_global_wg_with_block_config`` over the output's sizes, local
  ``pick_square_local_wg_with_block_config``;
* resize (``resize_q8ta_binary_node``): the output takes ``calculate_broadcasted_output_size(a, b)``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.launchers.utils import block_config as bc
from vkdiff.device.launchers.utils.common import val_at
from vkdiff.device.launchers.q8ta_unary import check_same_packing
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.q8ta_add.default"
TREE = "executorch main cff6f4dd32"

PORTS = (Port(file="runtime/graph/ops/impl/Q8taBinary.cpp",
              functions=("q8ta_add", "add_q8ta_binary_node", "resize_q8ta_binary_node"),
              sha256="a7a05f3e1eb6782fd09c22bfd08cde7b2bf5d3fcad8a432806152319cc94e757", tree=TREE),
         Port(file="runtime/graph/ops/impl/utils/TensorUtils.cpp", functions=("calculate_broadcasted_output_size",),
              sha256="eed02688f7eb24a8014ca15c3afc68f599f84d748655a7889f426f0471a7357e", tree=TREE),
         bc.COMMON)


def calculate_broadcasted_output_size(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """``calculate_broadcasted_output_size``: the larger size of each dim, aligned from the right."""
    rank = max(len(a), len(b))
    return tuple(max(val_at(i, a), val_at(i, b)) for i in range(-rank, 0))


def add_q8ta_binary_node(graph: ComputeGraph, a: Tensor, b: Tensor, qparams: Sequence[float], alpha: Any,
                         out: Tensor, op_name: str) -> None:
    """``add_q8ta_binary_node``: ``qparams`` = (a scale, a zp, b scale, b zp, output scale, output zp)."""
    check_same_packing(a, out, "input_a")
    check_same_packing(b, out, "input_b")
    a_scale, a_zp, b_scale, b_zp, out_scale, out_zp = qparams
    alpha_val = np.float32(alpha) if alpha is not None and not isinstance(alpha, str) else np.float32(1.0)
    immediates = b"".join([np.float32(a_scale).tobytes(), np.int32(a_zp).tobytes(), np.float32(b_scale).tobytes(),
                           np.int32(b_zp).tobytes(), (np.float32(1.0) / np.float32(out_scale)).tobytes(),
                           np.int32(out_zp).tobytes(), alpha_val.tobytes()])
    packed = bc.create_block_config_for_tensor(out.spec).as_packed_int()
    name = f"q8ta_{op_name}_{out.spec.storage}"

    def global_wg() -> tuple[int, int, int]:
        return bc.pick_linear_global_wg_with_block_config(out.spec.sizes, packed)

    graph.dispatch(lambda: name, global_wg=global_wg,
                   local_wg=lambda: bc.pick_square_local_wg_with_block_config(global_wg(), packed),
                   resources=[out, a, b, graph.meta_ubo(out), graph.meta_ubo(a), graph.meta_ubo(b)],
                   spec={3: out.spec.hashed_layout, 4: a.spec.hashed_layout, 5: b.spec.hashed_layout, 6: packed},
                   immediates=immediates,
                   resize=lambda: graph.virtual_resize(out, calculate_broadcasted_output_size(a.spec.sizes,
                                                                                              b.spec.sizes)))


def q8ta_binary_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_q8ta_binary_node``: the broadcast sizes of the two inputs, int8 codes."""
    return calculate_broadcasted_output_size(np.shape(args["input_a"]), np.shape(args["input_b"])), np.int8


@register_op(OP, output=q8ta_binary_output, constants=(), ports=PORTS)
def q8ta_add(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``q8ta_add``: ``out = quantize(dequantize(a) + alpha * dequantize(b))`` between int8x4 buffers.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``input_a``, ``input_b`` (int8x4 Tensors), ``input_a_scale``, ``input_a_zero_point``,
            ``input_b_scale``, ``input_b_zero_point``, ``output_scale``, ``output_zero_point``, ``alpha``.
        out (Tensor): the int8x4 output.

    Example::

        q8ta_add(graph, {"input_a": a, "input_b": b, "input_a_scale": 0.05, "input_a_zero_point": 3,
                         "input_b_scale": 0.02, "input_b_zero_point": -7, "output_scale": 0.06,
                         "output_zero_point": 0, "alpha": 1.0}, out)
    """
    qparams = (float(args["input_a_scale"]), int(args["input_a_zero_point"]), float(args["input_b_scale"]),
               int(args["input_b_zero_point"]), float(args["output_scale"]), int(args["output_zero_point"]))
    add_q8ta_binary_node(graph, args["input_a"], args["input_b"], qparams, args.get("alpha"), out, "add")
