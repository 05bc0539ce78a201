"""Launcher for ``et_vk.q8ta_pixel_shuffle.default``: pixel shuffle of a channels-packed int8x4 buffer.

Ported from ``runtime/graph/ops/impl/Q8taPixelShuffle.cpp`` (``q8ta_pixel_shuffle`` →
``add_q8ta_pixel_shuffle_node``, ``resize_q8ta_pixel_shuffle_node``, ``pick_q8ta_pixel_shuffle_global_wg``,
``pick_q8ta_pixel_shuffle_local_wg``):

* checks (``VK_CHECK_COND``, in the C++ order): both tensors int8x4, buffers, 4-D, packed along channels with
  block size 4 (``4c``, ``4c1w``, ``4w4c``); ``upscale_factor == 2``; ``out = [N, C / r², H·r, W·r]``;
* variant ``q8ta_pixel_shuffle``; bindings out, in, ``buffer_meta_ubo`` of out and in;
* push constants ``(scale_in, inv_scale_out, zp_in, zp_out, r, passthrough)``: ``inv_scale_out`` is the op's
  ``output_inv_scale`` as given; ``passthrough = 1`` (a pure byte shuffle) when the zero points agree and
  ``|scale_in - 1.0f / inv_scale_out| <= 1e-7f * max(|scale_in|, 1e-7f)`` in float32;
* spec constants from id 3: in layout, out layout;
* global size ``(N · div_up(C_out, 4) · H_out · W_out, 1, 1)`` (one thread per output word), local (64, 1, 1);
* resize (``resize_q8ta_pixel_shuffle_node``): ``[N, C / r², H·r, W·r]`` of the input's sizes (r from the
  resize args).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.vtensor import INT8X4
from vkdiff.device.launchers.utils.common import div_up
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.q8ta_pixel_shuffle.default"

PORTS = (Port(file="runtime/graph/ops/impl/Q8taPixelShuffle.cpp",
              functions=("q8ta_pixel_shuffle", "add_q8ta_pixel_shuffle_node", "resize_q8ta_pixel_shuffle_node",
                         "pick_q8ta_pixel_shuffle_global_wg", "pick_q8ta_pixel_shuffle_local_wg"),
              sha256="6250d5738b82011ee6d13dd66dcdcbd5b03296dbd0b526c9b29137dd0cf5efc7",
              tree="executorch main cff6f4dd32"),)


def pixel_shuffle_sizes(sizes: Sequence[int], r: int) -> tuple[int, ...]:
    """``resize_q8ta_pixel_shuffle_node``: ``[N, C / (r·r), H·r, W·r]`` (``VK_CHECK_COND(in_sizes.size() == 4)``)."""
    if len(sizes) != 4:
        raise EtVkRefusal(f"VK_CHECK_COND(in_sizes.size() == 4): sizes {list(sizes)}")
    n, c, h, w = (int(s) for s in sizes)
    return (n, c // (r * r), h * r, w * r)


def _check(cond: bool, text: str) -> None:
    if not cond:
        raise EtVkRefusal(f"VK_CHECK_COND({text})")


def _check_tensors(x: Tensor, out: Tensor, r: int) -> None:
    """The ``VK_CHECK_COND``s of ``add_q8ta_pixel_shuffle_node``, in order."""
    for tensor, role in ((x, "packed_int8_input"), (out, "packed_int8_output")):
        _check(tensor.spec.dtype == INT8X4, f"graph.dtype_of({role}) == vkapi::kInt8x4")
    for tensor, role in ((x, "packed_int8_input"), (out, "packed_int8_output")):
        _check(tensor.spec.storage == "buffer", f"graph.is_buffer_storage({role})")
    for tensor, role in ((x, "packed_int8_input"), (out, "packed_int8_output")):
        _check(len(tensor.spec.sizes) == 4, f"graph.dim_of({role}) == 4")
    _check(x.spec.info.packed_dim_block_size == 4, "in_info.packed_dim_block_size == 4")
    _check(out.spec.info.packed_dim_block_size == 4, "out_info.packed_dim_block_size == 4")
    _check(x.spec.info.packed_dim == 2, "in_info.packed_dim == WHCN::kChannelsDim")
    _check(out.spec.info.packed_dim == 2, "out_info.packed_dim == WHCN::kChannelsDim")
    _check(r == 2, f"r == 2 (r = {r})")
    ins, outs = x.spec.sizes, out.spec.sizes
    _check(ins[0] == outs[0], "in_sizes[0] == out_sizes[0]")
    _check(ins[1] == outs[1] * r * r, "in_sizes[1] == out_sizes[1] * r * r")
    _check(ins[2] * r == outs[2], "in_sizes[2] * r == out_sizes[2]")
    _check(ins[3] * r == outs[3], "in_sizes[3] * r == out_sizes[3]")


def passthrough(scale_in: np.float32, inv_scale_out: np.float32, zp_in: int, zp_out: int) -> int:
    """Same scale (within 1e-7 relative, in float32) and the same zero point: the shader copies bytes."""
    scale_out = np.float32(1.0) / inv_scale_out
    diff = np.abs(scale_in - scale_out)
    thresh = np.float32(1e-7) * max(np.abs(scale_in), np.float32(1e-7))
    return int(bool(diff <= thresh) and zp_in == zp_out)


def add_q8ta_pixel_shuffle_node(graph: ComputeGraph, x: Tensor, input_scale: float, input_zp: int,
                                output_inv_scale: float, output_zp: int, r: int, out: Tensor) -> None:
    """``add_q8ta_pixel_shuffle_node``: one thread per output word (4 channels at one position)."""
    _check_tensors(x, out, r)
    scale_in, inv_out = np.float32(input_scale), np.float32(output_inv_scale)
    immediates = b"".join([scale_in.tobytes(), inv_out.tobytes(), np.int32(input_zp).tobytes(),
                           np.int32(output_zp).tobytes(), np.int32(r).tobytes(),
                           np.int32(passthrough(scale_in, inv_out, input_zp, output_zp)).tobytes()])

    def global_wg() -> tuple[int, int, int]:
        n, c, h, w = out.spec.sizes
        return (n * div_up(c, 4) * h * w, 1, 1)

    graph.dispatch(lambda: "q8ta_pixel_shuffle", global_wg=global_wg, local_wg=lambda: (64, 1, 1),
                   resources=[out, x, graph.meta_ubo(out), graph.meta_ubo(x)],
                   spec={3: x.spec.hashed_layout, 4: out.spec.hashed_layout}, immediates=immediates,
                   resize=lambda: graph.virtual_resize(out, pixel_shuffle_sizes(x.spec.sizes, r)))


def q8ta_pixel_shuffle_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """The eager op's sizes ``[*, C / r², H·r, W·r]`` (as the graph serializes them; the node checks the rank)."""
    *batch, c, h, w = np.shape(args["input"])
    r = int(args["upscale_factor"])
    return (*batch, c // (r * r), h * r, w * r), np.int8


@register_op(OP, output=q8ta_pixel_shuffle_output, constants=(), ports=PORTS)
def q8ta_pixel_shuffle(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``q8ta_pixel_shuffle``: ``[N, 4C, H, W] → [N, C, 2H, 2W]`` of int8 codes, requantized unless passthrough.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``input`` (int8x4 Tensor), ``input_scale``, ``input_zero_point``, ``output_inv_scale``
            (1 / output scale), ``output_zero_point``, ``upscale_factor``, by schema name.
        out (Tensor): the int8x4 output.

    Example::

        q8ta_pixel_shuffle(graph, {"input": q, "input_scale": 0.05, "input_zero_point": 3,
                                   "output_inv_scale": 20.0, "output_zero_point": 3, "upscale_factor": 2}, out)
    """
    add_q8ta_pixel_shuffle_node(graph, args["input"], float(args["input_scale"]), int(args["input_zero_point"]),
                                float(args["output_inv_scale"]), int(args["output_zero_point"]),
                                int(args["upscale_factor"]), out)
