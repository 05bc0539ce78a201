"""The pointwise (1×1) route of ``aten.convolution`` (``conv2d_pw_impl``; registers no op of its own).

Ported from ``runtime/graph/ops/impl/Conv2dPW.cpp``:

* weight: ``prepack_conv2d_pw_weight``: ``[K4, N4·16]`` width-packed (N = C_out, K = C_in) texture2d, or a
  buffer when ``N4·4`` or ``K4`` exceeds ``max_texture2d_dim``, through
  ``pack_fp_linear_weight_<storage>_<dtype>_<staging dtype>`` (push constants ``N, K, B = 1,
  is_transposed = 1``; global ``(N4, K4, 1)``); bias ``prepack_biases`` (texture2d, width packed);
* variant ``conv2d_pw_tiled_<dtype>``; UBOs ``sizes(in)``, ``sizes(out)``; push constants
  ``(stride_h, stride_w, padding_h, padding_w)`` and ``(out_min, out_max)``; spec constants
  ``stride_1_padding_0`` and ``activation_type`` (2 = clamp, else 0);
* global size ``(ceil(C_out/4), ceil(H·W/4), 1)`` over the output; local ``pick_hw_square_wg_size``;
* resize ``resize_conv2d_pw_tiled_node``: ``H_out = (H + 2·ph − 1) // sh + 1`` (a 1×1 kernel, dilation 1).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import div_up, pick_hw_square_wg_size
from vkdiff.device.launchers.utils.conv_utils import (check_batch_1, check_conv_args, params, prepack_biases, prepack_node,
                                                staging_suffix)
from vkdiff.device.launchers.registry import Port
from vkdiff.device.runtime.resources import Tensor

PORT = Port(file="runtime/graph/ops/impl/Conv2dPW.cpp",
            functions=("conv2d_pw_impl", "prepack_conv2d_pw_weight", "add_conv2d_pw_tiled_node",
                       "pick_conv2d_pw_tiled_global_wg_size", "resize_conv2d_pw_tiled_node"),
            sha256="34c2b7375b60da0cbf3d85f562470dc6ffd08f01dc10bbd7e7b167af7d3f5816",
            tree="executorch main cff6f4dd32")


def prepack_fp_linear_weight(graph: ComputeGraph, weight: TensorRef, label: str) -> Tensor:
    """``prepack_conv2d_pw_weight`` / ``prepack_conv1d_pw_weight``: ``[C_out, C_in, 1(, 1)]`` as ``[N, K]``."""
    data = np.asarray(weight.data)
    n, k = data.shape[0], data.shape[1]
    n4, k4 = div_up(n, 4), div_up(k, 4)
    limit = graph.device.limits["max-texture-dimension-2d"]
    storage = "buffer" if n4 * 4 > limit or k4 > limit else "texture2d"
    packed = graph.add_tensor((k4, n4 * 16), data.dtype.name, storage, "width", label=label)
    name = f"pack_fp_linear_weight_{storage}_{SUFFIX[packed.spec.dtype]}_{staging_suffix(graph, data)}"
    prepack_node(graph, name, data.reshape(n, k), packed, (n4, k4, 1), immediates=[params(n, k, 1, 1)])
    return packed


def resize_conv2d_pw_tiled_sizes(in_sizes: Sequence[int], weight_sizes: Sequence[int], stride, padding) -> tuple:
    """``resize_conv2d_pw_tiled_node``'s sizes."""
    sizes = list(in_sizes)
    sizes[-3] = int(weight_sizes[0])
    sizes[-2] = (int(in_sizes[-2]) + 2 * int(padding[0]) - 1) // int(stride[0]) + 1
    sizes[-1] = (int(in_sizes[-1]) + 2 * int(padding[1]) - 1) // int(stride[1]) + 1
    return tuple(sizes)


def pick_conv2d_pw_tiled_global_wg_size(out: Tensor) -> tuple[int, int, int]:
    """``pick_conv2d_pw_tiled_global_wg_size``: one thread per 4 output channels × 4 output pixels."""
    w, h, c = (int(s) for s in reversed(out.spec.sizes[-3:]))
    return (div_up(c, 4), div_up(h * w, 4), 1)


def conv2d_pw_impl(graph: ComputeGraph, x: Tensor, weight: TensorRef, bias: TensorRef | None, stride, padding,
                   out: Tensor, transposed: bool, clamp_out: bool, out_min: float, out_max: float) -> None:
    """``conv2d_pw_impl`` + ``add_conv2d_pw_tiled_node``."""
    packed_weight = prepack_fp_linear_weight(graph, weight, "pw_weight")
    packed_bias = prepack_biases(graph, bias, weight, transposed, "texture2d", "width")
    check_conv_args(x, out)
    check_batch_1(x)
    sh, sw = (int(v) for v in stride)
    ph, pw = (int(v) for v in padding)
    s1p0 = (sh, sw, ph, pw) == (1, 1, 0, 0)
    wsizes = np.shape(weight.data)

    def resize() -> None:
        graph.virtual_resize(out, resize_conv2d_pw_tiled_sizes(x.spec.sizes, wsizes, stride, padding))

    graph.dispatch(lambda: f"conv2d_pw_tiled_{SUFFIX[out.spec.dtype]}",
                   global_wg=lambda: pick_conv2d_pw_tiled_global_wg_size(out),
                   local_wg=lambda: pick_hw_square_wg_size(pick_conv2d_pw_tiled_global_wg_size(out)),
                   resources=[out, x, packed_weight, packed_bias, graph.sizes_ubo(x), graph.sizes_ubo(out)],
                   immediates=[params(sh, sw, ph, pw), params(out_min, out_max, dtype="float32")],
                   spec={3: int(s1p0), 4: 2 if clamp_out else 0}, resize=resize)
