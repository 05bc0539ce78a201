"""Launchers for ``aten.max_pool2d.default``, ``aten.max_pool2d_with_indices.default`` and
``aten.avg_pool2d.default`` (``Pool.cpp``).

Ported from ``runtime/graph/ops/impl/Pool.cpp`` (``max_pool2d``, ``add_max_pool2d_node``, ``avg_pool2d``,
``add_avg_pool2d_node``, ``create_divisor_params``, ``check_pool2d_args``, ``resize_pool2d_node``) and
``utils/KernelUtils.cpp`` (``create_kernel2d_params``, ``calc_out_sizes_hw``, ``calc_out_size``):

* texture3d only (the shaders have no storage suffix), input and output channels packed;
* variants ``max_pool2d_<dtype>`` and ``avg_pool2d_<dtype>`` (dtype of the output);
* max: bindings out, indices, in, then UBOs ``logical_limits`` of out, ``sizes`` of in, and a
  params buffer ``Kernel2dParams`` (``ivec2`` kernel, stride, padding, dilation, each reversed to
  (w, h)); spec constant id 3 ``write_indices`` (1 for ``max_pool2d_with_indices``). For
  ``max_pool2d`` the indices binding gets a 0-dim ``TmpTensor`` with the *input's* dtype and storage;
* avg: bindings out, in, UBOs ``logical_limits`` of out, ``sizes`` of in, ``Kernel2dParams`` (dilation
  zero) and ``DivisorParams`` (``divisor_override`` or 0, ``count_include_pad``); no spec constants;
* global ``default_pick_global_wg_size`` (the output's logical limits), local default;
* output: batch and channels of the input, H and W by ``calc_out_size`` (dilation 1 for avg, ``ceil_mode``);
  the indices tensor is resized with the output unless it is 0-dim (``resize_pool2d_node``).

Params buffers are filled at build (``create_params_buffer``), as in the C++.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

TREE = "executorch main cff6f4dd32"
PORTS = (
    Port(file="runtime/graph/ops/impl/Pool.cpp",
         functions=("max_pool2d", "add_max_pool2d_node", "avg_pool2d", "add_avg_pool2d_node", "create_divisor_params",
                    "check_pool2d_args", "resize_pool2d_node"),
         sha256="5a5af624777a3d3e469118638c1936b6e89f4ae7123fd23e820425aec185da41", tree=TREE),
    Port(file="runtime/graph/ops/impl/utils/KernelUtils.cpp",
         functions=("create_kernel2d_params", "calc_out_sizes_hw", "calc_out_size", "make_ivec2_from_list"),
         sha256="0d240ee8cf66ce0d7ae33e8ea2c6ead47dde57847f303e166bb696617326a297", tree=TREE),
)


def make_ivec2_from_list(values: Sequence[int]) -> tuple[int, int]:
    """``make_ivec2_from_list`` (reversed): ``[h, w]`` → ``(w, h)``.

    Raises:
        ValueError: not two values (``utils::make_ivec2`` checks the size).
    """
    values = [int(v) for v in values]
    if len(values) != 2:
        raise EtVkRefusal(f"make_ivec2: expected 2 values, got {values}")
    return values[1], values[0]


def calc_out_size(size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool) -> int:
    """``calc_out_size``.

    Raises:
        ValueError: the output would be empty (``VK_CHECK_COND(out_size >= 1)``).
    """
    c = stride - 1 if ceil_mode else 0
    num = size + 2 * padding - dilation * (kernel - 1) - 1 + c
    out = (abs(num) // stride) * (1 if num >= 0 else -1) + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    if out < 1:
        raise EtVkRefusal(f"calc_out_size: output size {out} < 1")
    return out


def calc_out_sizes_hw(sizes: Sequence[int], kernel, stride, padding, dilation, ceil_mode: bool) -> tuple[int, int]:
    """``calc_out_sizes_hw`` (kernel size only; ``dilation`` None is ``{1, 1}``): ``(H, W)``."""
    k, s, p = make_ivec2_from_list(kernel), make_ivec2_from_list(stride), make_ivec2_from_list(padding)
    d = (1, 1) if dilation is None else make_ivec2_from_list(dilation)
    return (calc_out_size(sizes[-2], k[1], s[1], p[1], d[1], bool(ceil_mode)),
            calc_out_size(sizes[-1], k[0], s[0], p[0], d[0], bool(ceil_mode)))


def pool_out_sizes(sizes: Sequence[int], kernel, stride, padding, dilation, ceil_mode: bool) -> tuple[int, ...]:
    """``resize_pool2d_node``'s output sizes: leading dims kept, H and W computed."""
    return (*sizes[:-2], *calc_out_sizes_hw(sizes, kernel, stride, padding, dilation, ceil_mode))


def kernel2d_params(kernel, stride, padding, dilation) -> bytes:
    """``Kernel2dParams``: four ``ivec2`` (w, h); avg pool leaves dilation zero."""
    dil = (0, 0) if dilation is None else make_ivec2_from_list(dilation)
    values = [*make_ivec2_from_list(kernel), *make_ivec2_from_list(stride), *make_ivec2_from_list(padding), *dil]
    return np.array(values, np.int32).tobytes()


def check_pool2d_args(x: Tensor, out: Tensor) -> None:
    """``check_pool2d_args``: channels-packed input and output."""
    if x.spec.info.packed_dim != 2 or out.spec.info.packed_dim != 2:
        raise EtVkRefusal(f"pool2d: input ({x.spec.layout}) and output ({out.spec.layout}) must be channels packed")


def _stride(args: Mapping[str, Any]):
    """The stride as serialized: ET-VK reads the list given; an empty one (ATen's default) has no ivec2."""
    return args.get("stride")


def add_max_pool2d_node(graph: ComputeGraph, x: Tensor, args: Mapping[str, Any], out: Tensor,
                        indices: Tensor | None) -> None:
    """``add_max_pool2d_node``: ``indices`` None for ``max_pool2d`` (a 0-dim TmpTensor fills the binding)."""
    kernel, stride, padding = args["kernel_size"], _stride(args), args.get("padding", [0, 0])
    dilation, ceil_mode = args.get("dilation", [1, 1]), bool(args.get("ceil_mode", False))
    write_indices = int(indices is not None)
    if indices is None:
        indices = graph.add_tensor((), x.spec.dtype, x.spec.storage, "width", temporary=True, label="tmp_indices")
    check_pool2d_args(x, out)
    params = graph.uniform(kernel2d_params(kernel, stride, padding, dilation), "kernel2d_params")

    def resize_pool2d_node() -> None:
        new = pool_out_sizes(x.spec.sizes, kernel, stride, padding, dilation, ceil_mode)
        graph.virtual_resize(out, new)
        if len(indices.spec.sizes) > 0:
            graph.virtual_resize(indices, new)

    graph.dispatch(f"max_pool2d_{SUFFIX[out.spec.dtype]}", global_wg=lambda: default_global_wg(out),
                   resources=[out, indices, x, graph.logical_limits_ubo(out), graph.sizes_ubo(x), params],
                   spec={3: write_indices}, resize=resize_pool2d_node)


def add_avg_pool2d_node(graph: ComputeGraph, x: Tensor, args: Mapping[str, Any], out: Tensor) -> None:
    """``add_avg_pool2d_node``."""
    kernel, stride, padding = args["kernel_size"], _stride(args), args.get("padding", [0, 0])
    ceil_mode = bool(args.get("ceil_mode", False))
    divisor = args.get("divisor_override")
    check_pool2d_args(x, out)
    params = graph.uniform(kernel2d_params(kernel, stride, padding, None), "kernel2d_params")
    divisor_params = graph.uniform(np.array([int(divisor) if isinstance(divisor, int) else 0,
                                             int(bool(args.get("count_include_pad", True)))], np.int32).tobytes(),
                                   "divisor_params")
    graph.dispatch(f"avg_pool2d_{SUFFIX[out.spec.dtype]}", global_wg=lambda: default_global_wg(out),
                   resources=[out, x, graph.logical_limits_ubo(out), graph.sizes_ubo(x), params, divisor_params],
                   resize=lambda: graph.virtual_resize(
                       out, pool_out_sizes(x.spec.sizes, kernel, stride, padding, None, ceil_mode)))


def _output_of(with_dilation: bool, with_indices: bool):
    def resize_pool2d_output(args: Mapping[str, Any], dtype: Any = None):
        """The output(s) the graph allocates: ``resize_pool2d_node``'s sizes (int32 indices)."""
        x = np.asarray(args["self"])
        sizes = pool_out_sizes(x.shape, args["kernel_size"], _stride(args), args.get("padding", [0, 0]),
                               args.get("dilation", [1, 1]) if with_dilation else None,
                               bool(args.get("ceil_mode", False)))
        return [(sizes, x.dtype), (sizes, np.dtype(np.int32))] if with_indices else (sizes, x.dtype)

    return resize_pool2d_output


@register_op("aten.max_pool2d.default", output=_output_of(True, False), constants=(), ports=PORTS)
def max_pool2d(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``max_pool2d``: the window maxima; the indices binding gets a 0-dim temporary.

    Example::

        max_pool2d(graph, {"self": x, "kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]}, out)
    """
    add_max_pool2d_node(graph, args["self"], args, out, None)


@register_op("aten.max_pool2d_with_indices.default", output=_output_of(True, True), constants=(), ports=PORTS)
def max_pool2d_with_indices(graph: ComputeGraph, args: Mapping[str, Any], out: tuple[Tensor, Tensor]) -> None:
    """``max_pool2d`` on a value list: writes values and ``h * W + w`` indices (``write_indices`` = 1)."""
    add_max_pool2d_node(graph, args["self"], args, out[0], out[1])


@register_op("aten.avg_pool2d.default", output=_output_of(False, False), constants=(), ports=PORTS)
def avg_pool2d(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``avg_pool2d``: window sums over the divisor ``DivisorParams`` selects."""
    add_avg_pool2d_node(graph, args["self"], args, out)
