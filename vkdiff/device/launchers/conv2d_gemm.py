"""Launcher for ``et_vk.conv2d_gemm.default``, and the im2col + GEMM route of ``aten.convolution``.

Ported from ``runtime/graph/ops/impl/Conv2dGemm.cpp`` (``conv2d_gemm_op``, ``conv2d_gemm_impl``,
``prepack_conv2d_gemm_weight``, ``add_conv2d_gemm_node``, ``pick_conv2d_gemm_*``, ``resize_conv2d_gemm_node``)
and ``Conv2dIm2Col.cpp`` (``add_conv2d_im2col_node`` and its pickers and resize):

* only batch 1, non-transposed, groups 1 (``VK_CHECK_COND``); ``K_total = KH·KW·align4(C_in)``;
* tiling: ``oh_tile = clamp(16 MiB // (W_out·K_total·elem bytes), 1, H_out)`` output rows per tile,
  ``ceil(H_out / oh_tile)`` tiles, each an (im2col, GEMM) dispatch pair over one shared scratch;
* scratch storage: buffer on Mali; else texture2d ``[oh_tile·W_out, K_total]`` width packed when
  ``K_total/4`` and ``oh_tile·W_out`` fit ``max_texture2d_dim``, else texture3d
  ``[1, K_total, oh_tile, W_out]`` channels packed when those fit ``max_texture3d_dim``, else buffer;
* weight ``pack_conv2d_gemm_weight_texture2d_<dtype>_<staging>``: ``[K_total/4, N4·16]`` width-packed texture2d
  (``VK_CHECK_COND`` that it fits), push constants ``(N, K_total, C_in, Cin_padded)``, ``(KH, KW, 0, 0)``,
  global ``(N4, K4, 1)``; bias ``prepack_biases`` (texture2d, width packed);
* ``conv2d_im2col_<scratch storage>_<dtype>``: bindings scratch, input, ``sizes(in)``; push constants
  ``(KH, KW, sh, sw)``, ``(ph, pw, dh, dw)``, ``(Cin_padded, oh_offset, oh_tile, K_total/4)``; global
  ``(K_total/4, oh_tile·W_out, 1)``, local ``(16, 4, 1)``;
* ``conv2d_gemm_<scratch storage>_<dtype>``: bindings out, scratch, weight, bias, ``sizes(out)``; push
  constants ``(K_total/4, oh_offset, oh_tile, 0)``, ``(out_min, out_max, 0, 0)``; spec ``activation_type``
  (2 = clamp); global ``(ceil(C_out/4), ceil(oh_tile·W_out/4), 1)``, zero for a tile past ``H_out``; local
  ``pick_hw_square_wg_size``;
* resize: ``resize_conv2d_gemm_node`` (out) and ``resize_conv2d_im2col_node`` (scratch width).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import div_up, pick_hw_square_wg_size
from vkdiff.device.launchers.utils.conv_utils import (CONVOLUTION, KERNEL_UTILS, ConvRouteError, calc_out_sizes_hw,
                                                check_conv_args, params, prepack_biases, prepack_node, staging_suffix)
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.conv2d_gemm.default"
TREE = "executorch main cff6f4dd32"
PORTS = (Port(file="runtime/graph/ops/impl/Conv2dGemm.cpp",
              functions=("conv2d_gemm_op", "conv2d_gemm_impl", "prepack_conv2d_gemm_weight", "add_conv2d_gemm_node",
                         "pick_conv2d_gemm_shader", "pick_conv2d_gemm_global_wg_size", "resize_conv2d_gemm_node"),
              sha256="92cc14d3dfae32141e8d464f4d769b9c4543cb3cb9d83eb720916b45cbc56f2f", tree=TREE),
         Port(file="runtime/graph/ops/impl/Conv2dIm2Col.cpp",
              functions=("add_conv2d_im2col_node", "pick_conv2d_im2col_global_wg_size", "resize_conv2d_im2col_node"),
              sha256="fe74cf35749f7e77a004fcd2a6f93baab87895a105c12dade8b71c80d67691b4", tree=TREE),
         KERNEL_UTILS, CONVOLUTION)

SCRATCH_BUDGET_BYTES = 16 * 1024 * 1024
"""``kIm2colScratchBudgetBytes``."""


def resize_conv2d_gemm_sizes(in_sizes, weight_sizes, stride, padding, dilation) -> tuple[int, int, int, int]:
    """``resize_conv2d_gemm_node``'s sizes: batch of the input, ``C_out``, then ``calc_out_sizes_hw``."""
    h, w = calc_out_sizes_hw(in_sizes, weight_sizes, stride, padding, dilation)
    return (int(in_sizes[-4]), int(weight_sizes[0]), h, w)


def output_of(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """The output as ``resize_conv2d_gemm_node`` sizes it, in the input's dtype."""
    x = np.asarray(args["input"])
    sizes = resize_conv2d_gemm_sizes(x.shape, np.shape(args["weight"]), args["stride"], args["padding"],
                                     args["dilation"])
    return sizes, x.dtype


def pick_im2col_storage(graph: ComputeGraph, k4_total: int, m_tile: int, w_out: int, oh_tile: int) -> str:
    """``conv2d_gemm_impl``'s scratch storage choice."""
    if graph.route.vendor == "arm":
        return "buffer"
    limits = graph.device.limits
    max_2d, max_3d = limits["max-texture-dimension-2d"], limits["max-texture-dimension-3d"]
    if k4_total <= max_2d and m_tile <= max_2d:
        return "texture2d"
    if w_out <= max_3d and oh_tile <= max_3d and k4_total <= max_3d:
        return "texture3d"
    return "buffer"


def prepack_conv2d_gemm_weight(graph: ComputeGraph, weight: TensorRef) -> Tensor:
    """``prepack_conv2d_gemm_weight``."""
    data = np.asarray(weight.data)
    c_out, c_in, k_h, k_w = data.shape
    cin_padded = div_up(c_in, 4) * 4
    k_total = k_h * k_w * cin_padded
    n4, k4 = div_up(c_out, 4), div_up(k_total, 4)
    limit = graph.device.limits["max-texture-dimension-2d"]
    if n4 * 4 > limit or k4 > limit:
        raise ConvRouteError(f"prepack_conv2d_gemm_weight: packed weight {k4}x{n4 * 4} texels exceeds {limit}")
    packed = graph.add_tensor((k4, n4 * 16), data.dtype.name, "texture2d", "width", label="gemm_weight")
    name = f"pack_conv2d_gemm_weight_texture2d_{SUFFIX[packed.spec.dtype]}_{staging_suffix(graph, data)}"
    prepack_node(graph, name, data, packed, (n4, k4, 1),
                 immediates=[params(c_out, k_total, c_in, cin_padded), params(k_h, k_w, 0, 0)])
    return packed


def conv2d_gemm_impl(graph: ComputeGraph, x: Tensor, weight: TensorRef, bias: TensorRef | None, stride, padding,
                     dilation, out: Tensor, clamp_out: bool, out_min: float, out_max: float) -> None:
    """``conv2d_gemm_impl``: tiles of (im2col, GEMM) over one scratch tensor."""
    wsizes = np.shape(weight.data)
    if len(x.spec.sizes) != 4 or x.spec.sizes[0] != 1 or len(wsizes) != 4:
        raise ConvRouteError(f"conv2d_gemm_impl: needs a 4-D batch-1 input and 4-D weight, got {x.spec.sizes}")
    c_in, k_h, k_w = wsizes[1:]
    h_out, w_out = out.spec.sizes[2], out.spec.sizes[3]
    cin_padded = div_up(c_in, 4) * 4
    k_total = k_h * k_w * cin_padded
    k4_total = k_total // 4
    elem = np.dtype(x.spec.dtype).itemsize
    oh_tile = min(max(SCRATCH_BUDGET_BYTES // (w_out * k_total * elem), 1), h_out)
    num_tiles = div_up(h_out, oh_tile)
    storage = pick_im2col_storage(graph, k4_total, oh_tile * w_out, w_out, oh_tile)
    if storage == "texture3d":
        scratch = graph.add_tensor((1, k_total, oh_tile, w_out), x.spec.dtype, storage, "channels", temporary=True, label="im2col")
    else:
        scratch = graph.add_tensor((oh_tile * w_out, k_total), x.spec.dtype, storage, "width", temporary=True, label="im2col")
    packed_weight = prepack_conv2d_gemm_weight(graph, weight)
    packed_bias = prepack_biases(graph, bias, weight, False, "texture2d", "width")
    check_conv_args(x, out)
    (sh, sw), (ph, pw), (dh, dw) = ([int(v) for v in values] for values in (stride, padding, dilation))
    for tile in range(num_tiles):
        oh_offset = tile * oh_tile
        add_conv2d_im2col_node(graph, x, scratch, wsizes, stride, padding, dilation,
                               (k_h, k_w, sh, sw), (ph, pw, dh, dw), (cin_padded, oh_offset, oh_tile, k4_total))
        add_conv2d_gemm_node(graph, x, wsizes, stride, padding, dilation, scratch, packed_weight, packed_bias, out,
                             k4_total, clamp_out, out_min, out_max, oh_offset, oh_tile)


def _im2col_m_k4(scratch: Tensor) -> tuple[int, int]:
    """``im2col_extents_of``: (M, K_total/4) of the scratch."""
    sizes = scratch.spec.sizes
    if len(sizes) == 4:
        return sizes[2] * sizes[3], sizes[1] // 4
    return sizes[0], sizes[1] // 4


def add_conv2d_im2col_node(graph: ComputeGraph, x: Tensor, scratch: Tensor, wsizes, stride, padding, dilation,
                           kernel_stride, padding_dil, dims) -> None:
    """``add_conv2d_im2col_node``."""
    oh_tile = dims[2]

    def resize() -> None:
        w_out = calc_out_sizes_hw(x.spec.sizes, wsizes, stride, padding, dilation)[1]
        sizes = list(scratch.spec.sizes)
        if len(sizes) == 4:
            sizes[3] = w_out
        else:
            sizes[0] = oh_tile * w_out
        graph.virtual_resize(scratch, sizes)

    def global_wg() -> tuple[int, int, int]:
        m, k4 = _im2col_m_k4(scratch)
        return (k4, m, 1)

    graph.dispatch(f"conv2d_im2col_{scratch.spec.storage}_{SUFFIX[scratch.spec.dtype]}", global_wg=global_wg,
                   local_wg=(16, 4, 1), resources=[scratch, x, graph.sizes_ubo(x)],
                   immediates=[params(*kernel_stride), params(*padding_dil), params(*dims)], resize=resize,
                   resize_args=(x,))


def add_conv2d_gemm_node(graph: ComputeGraph, x: Tensor, wsizes, stride, padding, dilation, scratch: Tensor,
                         packed_weight: Tensor, packed_bias: Tensor, out: Tensor, k4_total: int, clamp_out: bool,
                         out_min: float, out_max: float, oh_offset: int, oh_tile: int) -> None:
    """``add_conv2d_gemm_node``."""
    def global_wg() -> tuple[int, int, int]:
        c_out, h_out, w_out = out.spec.sizes[-3:]
        if oh_offset >= h_out:
            return (0, 0, 0)
        return (div_up(c_out, 4), div_up(oh_tile * w_out, 4), 1)

    def resize() -> None:
        graph.virtual_resize(out, resize_conv2d_gemm_sizes(x.spec.sizes, wsizes, stride, padding, dilation))

    graph.dispatch(lambda: f"conv2d_gemm_{scratch.spec.storage}_{SUFFIX[out.spec.dtype]}", global_wg=global_wg,
                   local_wg=lambda: pick_hw_square_wg_size(global_wg()),
                   resources=[out, scratch, packed_weight, packed_bias, graph.sizes_ubo(out)],
                   immediates=[params(k4_total, oh_offset, oh_tile, 0), params(out_min, out_max, 0, 0, dtype="float32")],
                   spec={3: 2 if clamp_out else 0}, resize=resize, resize_args=(x,))


@register_op(OP, output=output_of, constants=("weight", "bias"), ports=PORTS)
def conv2d_gemm_op(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``conv2d_gemm_op``: ``aten.convolution``'s arguments, non-transposed, groups 1, no clamp.

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): ``input`` (channels-packed texture), ``weight`` and ``bias`` (TensorRefs), ``stride``,
            ``padding``, ``dilation``, ``transposed``, ``output_padding``, ``groups``, by schema name.
        out (Tensor): the output, channels packed.

    Example::

        conv2d_gemm_op(graph, {"input": x, "weight": TensorRef(id="w", data=w), "bias": None, "stride": [1, 1],
                               "padding": [1, 1], "dilation": [1, 1], "transposed": False,
                               "output_padding": [0, 0], "groups": 1}, out)
    """
    if args["transposed"] or int(args["groups"]) != 1:
        raise ConvRouteError("conv2d_gemm_op: transposed must be false and groups 1 (VK_CHECK_COND)")
    conv2d_gemm_impl(graph, args["input"], args["weight"], args.get("bias"), args["stride"], args["padding"],
                     args["dilation"], out, False, 0.0, 0.0)
