"""The depthwise route of ``aten.convolution`` (``conv2d_dw_impl``; registers no op of its own).

Ported from ``runtime/graph/ops/impl/Conv2dDW.cpp``:

* weight: ``prepack_dw_weights``: ``[4, align4(C_out)/4, KH·KW]`` channels-packed texture2d through
  ``conv2d_dw_prepack_weights_<dtype>_<staging dtype>`` (spec constant ``packed_dim``, push constants the
  packed sizes and the original sizes WHCN); bias ``prepack_biases`` (texture2d, width packed);
* variant (``pick_conv2d_dw_shader``): ``conv2d_dw`` + ``_sned`` when stride ≠ dilation, + ``_output_tile_3x3``
  (``_b1x1`` on Mali when stride = dilation) or ``_output_tile_5x5`` for those kernels, + ``_clamp``, + dtype.
  A ``_sned`` kernel that is neither 3×3 nor 5×5 names ``conv2d_dw_sned_<dtype>``, which no yaml generates;
* output-tile variants take push constants (out limits, in sizes, kernel size/stride, padding/dilation,
  overlay region + in group size padded to 16 bytes, clamp); the base variant the same as UBOs; no spec
  constants (``ngroups`` keeps its default 1);
* global size: output-tile ``(ceil(X/bx)·ceil(Y/by), Z, 1)`` with ``(bx, by) = (4, 2)`` (``_b1x1``: 1×1),
  ``_sned`` ``(X·Y, Z, 1)``; base ``(X·Y·Z, 1, 1)`` over the output's logical limits; local ``(64, 1, 1)``;
* resize: ``resize_conv2d_node``.
"""

from __future__ import annotations

from typing import Callable

from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import div_up
from vkdiff.device.launchers.utils.conv_utils import (Kernel2dParams, check_batch_1, check_conv_args, create_kernel2d_params,
                                                params, prepack_biases, prepack_node, staging_suffix)
from vkdiff.device.launchers.registry import Port
from vkdiff.device.runtime.resources import Tensor

PORT = Port(file="runtime/graph/ops/impl/Conv2dDW.cpp",
            functions=("conv2d_dw_impl", "prepack_dw_weights", "pick_conv2d_dw_shader", "conv2d_dw_global_wg_size",
                       "conv2d_dw_local_wg_size", "add_conv2d_dw_node"),
            sha256="f01d404828758bee48b31f918a3e18f1d31df247b1217d91ceee241916adfdd9",
            tree="executorch main cff6f4dd32")


def prepack_dw_weights(graph: ComputeGraph, weight: TensorRef) -> Tensor:
    """``prepack_dw_weights``."""
    data = weight.data
    c_out, _, k_h, k_w = data.shape
    sizes = (4, div_up(c_out, 4), k_h * k_w)
    packed = graph.add_tensor(sizes, data.dtype.name, "texture2d", "channels", label="dw_weight")
    name = f"conv2d_dw_prepack_weights_{SUFFIX[packed.spec.dtype]}_{staging_suffix(graph, data)}"
    prepack_node(graph, name, data, packed, tuple(packed.spec.logical_limits), spec={3: packed.spec.info.packed_dim},
                 immediates=[packed.spec.sizes_block(), params(*reversed(data.shape))])
    return packed


def pick_conv2d_dw_shader(graph: ComputeGraph, weight_sizes, out: Tensor, stride_equals_dilation: bool,
                          clamp_out: bool) -> str:
    """``pick_conv2d_dw_shader``."""
    name = "conv2d_dw"
    if not stride_equals_dilation:
        name += "_sned"
    if tuple(weight_sizes[2:]) == (3, 3):
        name += "_output_tile_3x3"
        if stride_equals_dilation and graph.route.vendor == "arm":
            name += "_b1x1"
    elif tuple(weight_sizes[2:]) == (5, 5):
        name += "_output_tile_5x5"
    if clamp_out:
        name += "_clamp"
    return f"{name}_{SUFFIX[out.spec.dtype]}"


def conv2d_dw_global_wg_size(name: str, out: Tensor) -> tuple[int, int, int]:
    """``conv2d_dw_global_wg_size``."""
    x, y, z = out.spec.logical_limits
    if "_output_tile" in name:
        if "_sned" in name:
            return (x * y, z, 1)
        bx, by = (1, 1) if "_b1x1" in name else (4, 2)
        return (div_up(x, bx) * div_up(y, by), z, 1)
    return (x * y * z, 1, 1)


def conv2d_dw_impl(graph: ComputeGraph, x: Tensor, weight: TensorRef, bias: TensorRef | None, stride, padding,
                   dilation, out: Tensor, clamp_out: bool, out_min: float, out_max: float,
                   resize: Callable[[], None]) -> None:
    """``conv2d_dw_impl`` + ``add_conv2d_dw_node``."""
    packed_weight = prepack_dw_weights(graph, weight)
    packed_bias = prepack_biases(graph, bias, weight, False, "texture2d", "width")
    check_batch_1(x)
    check_conv_args(x, out)
    wsizes = weight.data.shape
    p: Kernel2dParams = create_kernel2d_params(wsizes, stride, padding, dilation)
    same = p.stride == p.dilation
    overlay = tuple(k + (k - 1) * (d - 1) for k, d in zip(p.kernel_size, p.dilation))
    in_group_size = -(-wsizes[1] // 4) * 4
    name = pick_conv2d_dw_shader(graph, wsizes, out, same, clamp_out)
    clamp = params(out_min, out_max, dtype="float32")
    tensors = [out, x, packed_weight, packed_bias]
    if "_output_tile" in name:
        immediates = [graph.pc(out, "logical_limits"), graph.pc(x, "sizes"),
                      params(*p.kernel_size, *p.stride), params(*p.padding, *p.dilation),
                      params(*overlay, in_group_size, 0), clamp]
        ubos = []
    else:
        immediates = []
        ubos = [graph.logical_limits_ubo(out), graph.sizes_ubo(x), graph.uniform(p.block(), "kernel"),
                graph.uniform(params(*overlay, in_group_size, 0), "extra"), graph.uniform(clamp, "out_params")]
    graph.dispatch(name, global_wg=lambda: conv2d_dw_global_wg_size(name, out), local_wg=(64, 1, 1),
                   resources=tensors + ubos, immediates=immediates, resize=resize)
