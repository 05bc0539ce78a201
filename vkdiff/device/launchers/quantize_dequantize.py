"""Launchers for ``quantized_decomposed.{quantize,dequantize}_per_tensor.default``: the float ↔ int8x4 boundary.

Ported from ``runtime/graph/ops/impl/QuantizeDequantize.cpp`` (``quantize_per_tensor_impl``,
``dequantize_per_tensor_impl``) and ``Q8taQuantizeDequantize.cpp`` (``add_q8ta_quantize_node``,
``add_q8ta_dequantize_node``, ``resize_q8ta_qdq_node``), with ``BlockConfig`` from ``Common.cpp``
(``launchers/utils/block_config.py``):

* checks: the int8 side is an int8x4 tensor (``VK_CHECK_COND(graph.dtype_of(...) == vkapi::kInt8x4)``);
  ``quant_min``, ``quant_max`` and ``dtype`` are read and ignored (the shaders clamp to [-128, 127]);
* variant ``q8ta_quantize_<fp input storage>_<fp dtype>`` / ``q8ta_dequantize_<fp output storage>_<fp dtype>``
  (the yaml builds ``float`` only: a half float side names a variant the tree lacks);
* bindings out, in, then the output's metadata UBO and the input's (``BufferMetadata`` for the int8x4 buffer,
  ``meta_ubo`` of the float tensor: ``TextureMetadata`` on a texture);
* push constants ``(1.0f / float(scale), zero_point)`` for quantize, ``(float(scale), zero_point)`` for
  dequantize (float32, int32);
* block configs: ``outp = create_block_config_from_io_packed_dims(out, in)``,
  ``inp = create_block_config_from_other(in, outp)``; spec constants from id 3: quantize ``(in layout, out layout,
  inp, outp)``, dequantize ``(out layout, in layout, outp, inp)``;
* global size over the output's sizes with ``inp``: ``pick_linear_global_wg_with_block_config`` when the float
  tensor is a buffer, ``pick_extents_global_wg_with_block_config`` when it is a texture; local size
  ``pick_square_local_wg_with_block_config``;
* resize (``resize_q8ta_qdq_node``): the output takes the input's sizes.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.graph.vtensor import INT8X4
from vkdiff.device.launchers.utils import block_config as bc
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

QUANTIZE = "quantized_decomposed.quantize_per_tensor.default"
DEQUANTIZE = "quantized_decomposed.dequantize_per_tensor.default"
TREE = "executorch main cff6f4dd32"

PORTS = (Port(file="runtime/graph/ops/impl/QuantizeDequantize.cpp",
              functions=("quantize_per_tensor_impl", "dequantize_per_tensor_impl"),
              sha256="fd71fd02a608fb31fc8533e519743cadfbe26874a43a983e7ac61052ddd125d4", tree=TREE),
         Port(file="runtime/graph/ops/impl/Q8taQuantizeDequantize.cpp",
              functions=("add_q8ta_quantize_node", "add_q8ta_dequantize_node", "resize_q8ta_qdq_node"),
              sha256="520ff45047c1dbb635dd5ba06ca8aea4259c493981a47a58c2377f0c49ff80ed", tree=TREE),
         bc.COMMON)


def _check_int8x4(tensor: Tensor, role: str) -> None:
    """``VK_CHECK_COND(graph.dtype_of(<role>) == vkapi::kInt8x4)``."""
    if tensor.spec.dtype != INT8X4:
        raise EtVkRefusal(f"VK_CHECK_COND(graph.dtype_of({role}) == vkapi::kInt8x4): {role} is "
                          f"{tensor.spec.dtype} {tensor.spec.storage} {tensor.spec.layout}")


def _global_wg(fp: Tensor, out: Tensor, packed: int):
    """Linear dispatch for a float buffer, extents dispatch for a float texture (over the output's sizes)."""
    pick = (bc.pick_linear_global_wg_with_block_config if fp.spec.storage == "buffer"
            else bc.pick_extents_global_wg_with_block_config)
    return lambda: pick(out.spec.sizes, packed)


def _add_qdq_dispatch(graph: ComputeGraph, name: str, fp: Tensor, out: Tensor, x: Tensor, immediates: bytes,
                      spec: dict[int, int], packed: int) -> None:
    """The ``DynamicDispatchNode`` both nodes add: bindings out, in, their metadata; ``resize_q8ta_qdq_node``."""
    global_wg = _global_wg(fp, out, packed)
    graph.dispatch(lambda: name, global_wg=global_wg,
                   local_wg=lambda: bc.pick_square_local_wg_with_block_config(global_wg(), packed),
                   resources=[out, x, graph.meta_ubo(out), graph.meta_ubo(x)], spec=spec, immediates=immediates,
                   resize=lambda: graph.virtual_resize(out, x.spec.sizes))


def add_q8ta_quantize_node(graph: ComputeGraph, x: Tensor, scale: float, zero_point: int, out: Tensor) -> None:
    """``add_q8ta_quantize_node``: ``clamp(int(round(x * inv_scale)) + zp, -128, 127)`` into an int8x4 buffer."""
    inv_scale = np.float32(1.0) / np.float32(scale)
    outp = bc.create_block_config_from_io_packed_dims(out.spec, x.spec)
    inp = bc.create_block_config_from_other(x.spec, outp)
    name = f"q8ta_quantize_{x.spec.storage}_{SUFFIX[x.spec.dtype]}"
    spec = {3: x.spec.hashed_layout, 4: out.spec.hashed_layout, 5: inp.as_packed_int(), 6: outp.as_packed_int()}
    immediates = np.float32(inv_scale).tobytes() + np.int32(zero_point).tobytes()
    _add_qdq_dispatch(graph, name, x, out, x, immediates, spec, inp.as_packed_int())


def add_q8ta_dequantize_node(graph: ComputeGraph, x: Tensor, scale: float, zero_point: int, out: Tensor) -> None:
    """``add_q8ta_dequantize_node``: ``float(q - zp) * scale`` from an int8x4 buffer."""
    outp = bc.create_block_config_from_io_packed_dims(out.spec, x.spec)
    inp = bc.create_block_config_from_other(x.spec, outp)
    name = f"q8ta_dequantize_{out.spec.storage}_{SUFFIX[out.spec.dtype]}"
    spec = {3: out.spec.hashed_layout, 4: x.spec.hashed_layout, 5: outp.as_packed_int(), 6: inp.as_packed_int()}
    immediates = np.float32(scale).tobytes() + np.int32(zero_point).tobytes()
    _add_qdq_dispatch(graph, name, out, out, x, immediates, spec, inp.as_packed_int())


def quantize_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_q8ta_qdq_node``: the input's sizes, int8 codes."""
    return np.shape(args["input"]), np.int8


def dequantize_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_q8ta_qdq_node``: the input's sizes, in ``out_dtype`` (float32 when None) or the case's dtype."""
    return np.shape(args["input"]), np.dtype(dtype or args.get("out_dtype") or np.float32)


@register_op(QUANTIZE, output=quantize_output, constants=(), ports=PORTS)
def quantize_per_tensor_impl(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``quantize_per_tensor_impl``: a float tensor (buffer or texture) to an int8x4 buffer.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``input`` (Tensor), ``scale``, ``zero_point``, ``quant_min``, ``quant_max``, ``dtype``
            by schema name (the last three are read and ignored, as in the C++).
        out (Tensor): the int8x4 output (any packed-int8 layout).

    Example::

        quantize_per_tensor_impl(graph, {"input": x, "scale": 0.05, "zero_point": 3, "quant_min": -128,
                                         "quant_max": 127, "dtype": "int8"}, out_4w4c)
    """
    _check_int8x4(out, "int8_output")
    add_q8ta_quantize_node(graph, args["input"], float(args["scale"]), int(args["zero_point"]), out)


@register_op(DEQUANTIZE, output=dequantize_output, constants=(), ports=PORTS)
def dequantize_per_tensor_impl(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``dequantize_per_tensor_impl``: an int8x4 buffer to a float tensor (buffer or texture).

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``input`` (int8x4 Tensor), ``scale``, ``zero_point``, ``quant_min``, ``quant_max``,
            ``dtype``, ``out_dtype`` by schema name (only scale and zero point are used).
        out (Tensor): the float output.

    Example::

        dequantize_per_tensor_impl(graph, {"input": q_4c1w, "scale": 0.05, "zero_point": 3, "quant_min": -128,
                                           "quant_max": 127, "dtype": "int8", "out_dtype": None}, out_texture)
    """
    x = args["input"]
    _check_int8x4(x, "int8_input")
    add_q8ta_dequantize_node(graph, x, float(args["scale"]), int(args["zero_point"]), out)
