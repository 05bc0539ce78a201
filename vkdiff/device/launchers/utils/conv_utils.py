"""What every convolution launcher shares: kernel parameters, output sizes, bias prepacking, prepack nodes.

Ported from ``runtime/graph/ops/impl/utils/KernelUtils.cpp`` (``create_kernel2d_params``,
``calc_out_size``, ``calc_out_sizes_hw``, ``calc_transpose_out_size``), ``Convolution.cpp``
(``prepack_biases``, ``check_conv_args``) and ``PrepackNode.cpp`` (a constant's NCHW bytes in a
staging buffer bound after the packed output; an absent constant stages zeros). Host lists
arrive NCHW ordered (``[stride_h, stride_w]``); ``Kernel2dParams`` holds them reversed (x = W).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.compute import create_local_wg_size
from vkdiff.device.graph.staging import SUFFIX, staging_buffer, staging_dtype, write_nchw
from vkdiff.device.launchers.registry import Port
from vkdiff.device.runtime.resources import Tensor

TREE = "executorch main cff6f4dd32"
KERNEL_UTILS = Port(file="runtime/graph/ops/impl/utils/KernelUtils.cpp",
                    functions=("create_kernel2d_params", "calc_out_size", "calc_out_sizes_hw",
                               "calc_transpose_out_size"),
                    sha256="0d240ee8cf66ce0d7ae33e8ea2c6ead47dde57847f303e166bb696617326a297", tree=TREE)
CONVOLUTION = Port(file="runtime/graph/ops/impl/Convolution.cpp",
                   functions=("conv", "add_conv2d_node", "add_conv1d_node", "get_conv2d_method", "get_conv2d_shader",
                              "prepack_weights", "prepack_biases", "conv2d_global_wg_size", "conv2d_local_wg_size",
                              "should_use_conv2d_im2col", "resize_conv2d_node", "resize_conv1d_node"),
                   sha256="599f6502b860bb4f0c5c0b8efb734a8be82f9a063289a507a056712e0f586fed", tree=TREE)
PREPACK_NODE = Port(file="runtime/graph/ops/PrepackNode.cpp", functions=("PrepackNode::create_staging_buffer",),
                    sha256="a843440a3aa59d13832158b6dedb09d1c0994723b050262caceb31ef029126e7", tree=TREE)
FLOAT_MAX = float(np.finfo(np.float32).max)
"""``std::numeric_limits<float>::max()`` (``lowest()`` is its negative)."""


class ConvRouteError(EtVkRefusal):
    """A ``VK_CHECK_COND`` / ``VK_THROW`` of the convolution C++ refused the arguments at graph build."""


@dataclasses.dataclass(frozen=True)
class Kernel2dParams:
    """``Kernel2dParams``: four ``ivec2`` in (W, H) order, the layout of the shaders' ``kernel`` UBO."""

    kernel_size: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]

    def block(self) -> bytes:
        return np.array([*self.kernel_size, *self.stride, *self.padding, *self.dilation], np.int32).tobytes()


def ivec2_from_list(values: Sequence[int]) -> tuple[int, int]:
    """``make_ivec2_from_list`` (``make_ivec2(list, reverse=true)``): a 2-entry list, reversed."""
    values = [int(v) for v in values]
    if len(values) != 2:
        raise ConvRouteError(f"make_ivec2: expected a 2-entry list, got {values}")
    return values[1], values[0]


def create_kernel2d_params(weight_sizes: Sequence[int], stride, padding, dilation) -> Kernel2dParams:
    """``create_kernel2d_params`` with ``kernel_size_only = false``: the kernel size from the weight."""
    return Kernel2dParams((int(weight_sizes[3]), int(weight_sizes[2])), ivec2_from_list(stride),
                          ivec2_from_list(padding), ivec2_from_list(dilation))


def calc_out_size(in_size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """``calc_out_size`` (``ceil_mode = false``), C++ integer division."""
    numerator = in_size + 2 * padding - dilation * (kernel - 1) - 1
    out = int(np.trunc(numerator / stride)) + 1
    if out < 1:
        raise ConvRouteError(f"calc_out_size: output size {out} < 1 (in {in_size}, kernel {kernel})")
    return out


def calc_transpose_out_size(in_size: int, kernel: int, stride: int, padding: int, dilation: int,
                            output_padding: int) -> int:
    """``calc_transpose_out_size``."""
    out = (in_size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1
    if out < 1:
        raise ConvRouteError(f"calc_transpose_out_size: output size {out} < 1")
    return out


def calc_out_sizes_hw(in_sizes: Sequence[int], weight_sizes: Sequence[int], stride, padding, dilation,
                      output_padding=None, transposed: bool = False) -> tuple[int, int]:
    """``calc_out_sizes_hw`` (graph form): (H, W) of the output."""
    p = create_kernel2d_params(weight_sizes, stride, padding, dilation)
    h, w = int(in_sizes[-2]), int(in_sizes[-1])
    if transposed:
        op = ivec2_from_list(output_padding)
        return (calc_transpose_out_size(h, p.kernel_size[1], p.stride[1], p.padding[1], p.dilation[1], op[1]),
                calc_transpose_out_size(w, p.kernel_size[0], p.stride[0], p.padding[0], p.dilation[0], op[0]))
    return (calc_out_size(h, p.kernel_size[1], p.stride[1], p.padding[1], p.dilation[1]),
            calc_out_size(w, p.kernel_size[0], p.stride[0], p.padding[0], p.dilation[0]))


def check_conv_args(x: Tensor, out: Tensor) -> None:
    """``check_conv_args``: input and output channels packed."""
    if x.spec.layout != "channels" or out.spec.layout != "channels":
        raise ConvRouteError(f"check_conv_args: input and output must be channels packed, got {x.spec.layout} and "
                             f"{out.spec.layout}")


def check_batch_1(x: Tensor) -> None:
    """``VK_THROW("conv2d: input batch size > 1 is not supported yet!")``."""
    if x.spec.sizes[0] > 1:
        raise ConvRouteError("conv2d: input batch size > 1 is not supported yet!")


def constant_data(ref: TensorRef | None, sizes: Sequence[int], dtype: str) -> np.ndarray:
    """A constant's NCHW data, or the zeros ``PrepackNode`` stages for an absent one (a None bias)."""
    if ref is None:
        return np.zeros(tuple(sizes), dtype)
    return np.asarray(ref.data)


def prepack_node(graph: ComputeGraph, shader: str, data: np.ndarray, out: Tensor, global_wg: tuple[int, int, int],
                 *, spec: dict[int, int] | None = None, immediates: Sequence[bytes] = (),
                 local_wg: tuple[int, int, int] | None = None) -> None:
    """``PrepackNode``: ``out`` at binding 0, the constant's staging buffer (staging dtype) at 1, then params."""
    staged = np.asarray(data).astype(staging_dtype(graph, np.asarray(data).dtype.name), copy=False)
    staging = staging_buffer(graph, staged, "staging_prepack")
    graph.dispatch(shader, global_wg=global_wg, local_wg=local_wg or create_local_wg_size(global_wg),
                   resources=[out, staging], spec=spec or {}, immediates=list(immediates), prepack=True)


def staging_suffix(graph: ComputeGraph, data: np.ndarray) -> str:
    """``add_dtype_suffix(name, get_staging_dtype_for(weight))``."""
    return SUFFIX[staging_dtype(graph, np.asarray(data).dtype.name)]


def prepack_biases(graph: ComputeGraph, bias: TensorRef | None, weight: TensorRef, transposed: bool,
                   storage: str, layout: str) -> Tensor:
    """``prepack_biases``: ``[C_out]`` in the weight's dtype, NCHW staging (zeros without a bias)."""
    sizes = np.shape(weight.data)
    out_channels = sizes[1] if transposed else sizes[0]
    dtype = np.asarray(weight.data).dtype.name
    tensor = graph.add_tensor((out_channels,), dtype, storage, layout, label="prepacked_bias")
    data = constant_data(bias, (out_channels,), dtype)
    write_nchw(graph, tensor, data.astype(dtype, copy=False) if bias is None else data, prepack=True)
    return tensor


def params(*values: Any, dtype=np.int32) -> bytes:
    """A by-value params block (``create_params_buffer`` / ``PushConstantDataInfo``) of 4-byte fields; a double
    past float's range (relu's ``DBL_MAX`` bound) becomes ±inf, as ``static_cast<float>`` gives it."""
    with np.errstate(over="ignore"):
        return np.array(values, dtype).tobytes()


def scalar_or(value: Any, default: float) -> float:
    """``extract_scalar<float>`` of an optional scalar, else the default."""
    return default if value is None else float(value)
