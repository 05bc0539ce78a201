"""Launchers for ``aten.convolution.default`` and ``et_vk.conv_with_clamp.default`` (ET-VK's ``conv``).

Ported from ``runtime/graph/ops/impl/Convolution.cpp`` (``conv``, ``add_conv2d_node``, ``add_conv1d_node``,
``get_conv2d_method``, ``should_use_conv2d_im2col``, ``get_conv2d_shader``, ``prepack_weights``,
``conv2d_{global,local}_wg_size``, ``conv1d_global_wg_size``, ``resize_conv{2,1}d_node``). ``conv_with_clamp``
is registered twice by the C++ (``conv_with_clamp.default`` and ``et_vk.conv_with_clamp.default``); the
un-namespaced name is what ``VkGraphBuilder`` writes for the ``et_vk`` custom op (``node.target.__name__``),
resolved to the same schema by ``schema_of``. Routes, by the input's rank and layout and the weight:

====================  ==========================================================  ==================================
route                 when                                                        shaders
====================  ==========================================================  ==================================
``pw``                4-D, 1×1 kernel, not depthwise                              ``utils/conv2d_pw.py``
``dw*``               4-D, ``weight[0] == groups`` and ``weight[1] == 1``         ``utils/conv2d_dw.py`` (tile variants)
``im2col``            4-D sliding window, groups 1, dilation 1, Mali or C_out≥128  ``conv2d_gemm.py``
``direct``            4-D sliding window otherwise                                ``conv2d[_clamp]_<dtype>``
``transposed``        4-D, ``transposed``                                         ``conv_transpose2d[_clamp]_*``
``conv1d``            3-D, channels packed                                        ``conv1d[_clamp]_<dtype>``
``conv1dpw``/``dw``   3-D, height packed, kernel 1 / depthwise                    ``conv1d_pw.py`` / ``conv1d_dw.py``
====================  ==========================================================  ==================================

* direct / transposed: weight ``prepack_weights`` to a channels-packed texture2d (``get_final_sizes``:
  ``[4, N4·H, C4·4·W]``, transposed ``[4, C4·H, N4·4·W]``) through ``<shader>_prepack_weights_<dtype>_<staging>``
  (spec ``packed_dim``; push constants packed sizes and original sizes WHCN); bias ``prepack_biases``
  (texture2d, width packed); batch must be 1; UBOs ``logical_limits(out)``, ``sizes(in)``,
  ``Kernel2dParams``, ``(overlay_region, in_group_size = align4(weight[transposed ? 0 : 1]))``,
  ``(out_min, out_max)``; spec constant ``groups`` (id 3); global size the output's logical limits; local
  size: shader names containing ``conv2d`` take ``(64/y, y, 1)`` with y the largest of 8, 4, 2 dividing the
  global y, ``conv_transpose2d`` ``create_local_wg_size``; transposed with dilation > 1 is refused;
* conv1d (channels packed): weight ``prepack_standard`` (texture3d, channels), bias ``prepack_biases``
  (texture3d, width); UBOs ``logical_limits(out)``, ``sizes(in)``, ``(K, stride, padding, dilation,
  C_in/groups, C_out/groups)``, ``(out_min, out_max)``; spec constants the hashed layouts of out, in, weight,
  bias; global ``(L_out, C_out, ceil(N/4))``, local ``create_local_wg_size``;
* clamp bounds: ``extract_scalar<float>`` of each (a None bound throws), 0 for plain ``aten.convolution``;
* output sizes: ``resize_conv2d_node`` (transposed: ``C_out = weight[1]``, ``calc_transpose_out_size``) and
  ``resize_conv1d_node`` (``C_out = weight[0]``).

Every case names its expected route (option ``route``); the launcher refuses a case whose arguments take
another, so an id never claims a shader that did not run.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.compute import create_local_wg_size
from vkdiff.device.graph.staging import SUFFIX, prepack_standard
from vkdiff.device.launchers import conv1d_dw, conv1d_pw, conv2d_gemm
from vkdiff.device.launchers.utils import conv2d_dw, conv2d_pw
from vkdiff.device.launchers.utils.common import div_up
from vkdiff.device.launchers.utils.conv_utils import (CONVOLUTION, KERNEL_UTILS, PREPACK_NODE, ConvRouteError,
                                                calc_out_size, calc_out_sizes_hw, check_batch_1, check_conv_args,
                                                create_kernel2d_params, params, prepack_biases, prepack_node,
                                                staging_suffix)
from vkdiff.device.launchers.registry import register_op
from vkdiff.device.runtime.resources import Tensor
from vkdiff.device.runtime.routing import route_for

PORTS = (CONVOLUTION, KERNEL_UTILS, PREPACK_NODE, conv2d_dw.PORT, conv2d_pw.PORT, *conv2d_gemm.PORTS[:2],
         conv1d_dw.PORT, conv1d_pw.PORT)
IM2COL_MIN_C_OUT = 128
"""``kIm2colMinCOut``."""


def get_conv2d_method(weight_sizes, groups: int, transposed: bool) -> str:
    """``get_conv2d_method``: Depthwise, Transposed, Pointwise or SlidingWindow."""
    if not transposed and weight_sizes[0] == groups and weight_sizes[1] == 1:
        return "depthwise"
    if transposed:
        return "transposed"
    if weight_sizes[2] == 1 and weight_sizes[3] == 1:
        return "pointwise"
    return "sliding"


def should_use_conv2d_im2col(graph: ComputeGraph, weight_sizes, groups: int, dilation) -> bool:
    """``should_use_conv2d_im2col``."""
    if groups != 1 or any(int(d) != 1 for d in dilation):
        return False
    return graph.route.vendor == "arm" or weight_sizes[0] >= IM2COL_MIN_C_OUT


def resize_conv_sizes(args: Mapping[str, Any], in_sizes) -> tuple[int, ...]:
    """``resize_conv2d_node`` (4-D input) or ``resize_conv1d_node`` (3-D)."""
    wsizes = np.shape(args["weight"].data if isinstance(args["weight"], TensorRef) else args["weight"])
    if len(in_sizes) == 3:
        length = calc_out_size(in_sizes[2], wsizes[2], int(args["stride"][0]), int(args["padding"][0]),
                               int(args["dilation"][0]))
        return (int(in_sizes[0]), int(wsizes[0]), length)
    transposed = bool(args["transposed"])
    h, w = calc_out_sizes_hw(in_sizes, wsizes, args["stride"], args["padding"], args["dilation"],
                             args.get("output_padding"), transposed)
    return (int(in_sizes[0]), int(wsizes[1] if transposed else wsizes[0]), h, w)


def output_of(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """The output as ``resize_conv2d_node`` / ``resize_conv1d_node`` size it, in the input's dtype."""
    x = np.asarray(args["input"])
    return resize_conv_sizes(args, x.shape), x.dtype


def get_final_sizes(sizes, method: str) -> tuple[int, int, int]:
    """``get_final_sizes``."""
    n4, c4 = div_up(sizes[0], 4) * 4, div_up(sizes[1], 4) * 4
    h, w = sizes[2], sizes[3]
    if method == "transposed":
        return (4, c4 * h // 4, n4 * w)
    return (4, n4 * h // 4, c4 * w)


def prepack_weights(graph: ComputeGraph, weight: TensorRef, method: str) -> Tensor:
    """``prepack_weights`` (direct and transposed)."""
    data = np.asarray(weight.data)
    packed = graph.add_tensor(get_final_sizes(data.shape, method), data.dtype.name, "texture2d", "channels",
                              label="conv_weight")
    stem = "conv_transpose2d" if method == "transposed" else "conv2d"
    name = f"{stem}_prepack_weights_{SUFFIX[packed.spec.dtype]}_{staging_suffix(graph, data)}"
    prepack_node(graph, name, data, packed, tuple(packed.spec.logical_limits), spec={3: packed.spec.info.packed_dim},
                 immediates=[packed.spec.sizes_block(), params(*reversed(data.shape))])
    return packed


def conv2d_local_wg_size(name: str, global_wg: tuple[int, int, int]) -> tuple[int, int, int]:
    """``conv2d_local_wg_size``: every ``conv2d*`` name counts as pointwise."""
    if "conv2d" in name and "conv_transpose2d" not in name:
        y = next((v for v in (8, 4, 2) if global_wg[1] % v == 0), 1)
        return (64 // y, y, 1)
    return create_local_wg_size(global_wg)


def add_conv2d_node(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, clamp_out: bool, out_min: float,
                    out_max: float, resize: Callable[[], None]) -> str:
    """``add_conv2d_node``: picks the route, adds its nodes, returns the route's name."""
    x, weight, bias = args["input"], args["weight"], args.get("bias")
    transposed, groups = bool(args["transposed"]), int(args["groups"])
    wsizes = np.shape(weight.data)
    method = get_conv2d_method(wsizes, groups, transposed)
    if method == "pointwise":
        conv2d_pw.conv2d_pw_impl(graph, x, weight, bias, args["stride"], args["padding"], out, transposed,
                                 clamp_out, out_min, out_max)
        return "pw"
    if method == "depthwise":
        conv2d_dw.conv2d_dw_impl(graph, x, weight, bias, args["stride"], args["padding"], args["dilation"], out,
                                 clamp_out, out_min, out_max, resize)
        return dw_route(graph, wsizes, args)
    kernel = create_kernel2d_params(wsizes, args["stride"], args["padding"], args["dilation"])
    if method == "sliding" and should_use_conv2d_im2col(graph, wsizes, groups, args["dilation"]):
        conv2d_gemm.conv2d_gemm_impl(graph, x, weight, bias, args["stride"], args["padding"], args["dilation"], out,
                                     clamp_out, out_min, out_max)
        return "im2col"
    packed_weight = prepack_weights(graph, weight, method)
    packed_bias = prepack_biases(graph, bias, weight, transposed, "texture2d", "width")
    check_batch_1(x)
    check_conv_args(x, out)
    overlay = tuple(k + (k - 1) * (d - 1) for k, d in zip(kernel.kernel_size, kernel.dilation))
    in_group_size = div_up(wsizes[0] if transposed else wsizes[1], 4) * 4
    if transposed and max(kernel.dilation) > 1:
        raise ConvRouteError("aten.convolution.default: transposed = true, dilation > 1 is not supported yet!")
    stem = "conv_transpose2d" if transposed else "conv2d"
    name = f"{stem}{'_clamp' if clamp_out else ''}_{SUFFIX[out.spec.dtype]}"
    ubos = [graph.logical_limits_ubo(out), graph.sizes_ubo(x), graph.uniform(kernel.block(), "kernel"),
            graph.uniform(params(*overlay, in_group_size, 0), "extra"),
            graph.uniform(params(out_min, out_max, dtype="float32"), "out_params")]
    graph.dispatch(name, global_wg=lambda: tuple(out.spec.logical_limits),
                   local_wg=lambda: conv2d_local_wg_size(name, tuple(out.spec.logical_limits)),
                   resources=[out, x, packed_weight, packed_bias, *ubos], spec={3: groups}, resize=resize)
    return "transposed" if transposed else "direct"


def dw_route(graph: ComputeGraph, wsizes, args: Mapping[str, Any]) -> str:
    """The case-id name of the depthwise variant ``pick_conv2d_dw_shader`` takes."""
    kernel = create_kernel2d_params(wsizes, args["stride"], args["padding"], args["dilation"])
    tile = {(3, 3): "3", (5, 5): "5"}.get(tuple(wsizes[2:]), "")
    sned = "sned" if kernel.stride != kernel.dilation else ""
    b1x1 = "b1x1" if tile == "3" and not sned and graph.route.vendor == "arm" else ""
    return f"dw{sned}{'tile' if tile and not sned else ''}{tile}{b1x1}"


def add_conv1d_node(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, clamp_out: bool, out_min: float,
                    out_max: float, resize: Callable[[], None]) -> None:
    """``add_conv1d_node`` (channels-packed input)."""
    x, weight, groups = args["input"], args["weight"], int(args["groups"])
    packed_weight = prepack_standard(graph, weight, out.spec.storage, "channels")
    packed_bias = prepack_biases(graph, args.get("bias"), weight, False, "texture3d", "width")
    check_conv_args(x, out)
    c_out, _, k = np.shape(weight.data)
    kernel = params(k, int(args["stride"][0]), int(args["padding"][0]), int(args["dilation"][0]),
                    x.spec.sizes[1] // groups, c_out // groups)
    name = f"conv1d{'_clamp' if clamp_out else ''}_{SUFFIX[out.spec.dtype]}"

    def global_wg() -> tuple[int, int, int]:
        n, c, length = out.spec.sizes
        return (length, c, div_up(n, 4))

    graph.dispatch(name, global_wg=global_wg,
                   resources=[out, x, packed_weight, packed_bias, graph.logical_limits_ubo(out), graph.sizes_ubo(x),
                              graph.uniform(kernel, "kernel"),
                              graph.uniform(params(out_min, out_max, dtype="float32"), "out_params")],
                   spec={3: out.spec.hashed_layout, 4: x.spec.hashed_layout, 5: packed_weight.spec.hashed_layout,
                         6: packed_bias.spec.hashed_layout}, resize=resize)


def conv(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, clamp_out: bool) -> str:
    """``conv``: the route by rank and layout; returns its name."""
    out_min, out_max = 0.0, 0.0
    if clamp_out:
        out_min, out_max = (_extract_float(args.get(k), k) for k in ("output_min", "output_max"))
    x: Tensor = args["input"]

    def resize() -> None:
        graph.virtual_resize(out, resize_conv_sizes(args, x.spec.sizes))

    if len(x.spec.sizes) == 4:
        return add_conv2d_node(graph, args, out, clamp_out, out_min, out_max, resize)
    if x.spec.layout == "height":
        wsizes = np.shape(args["weight"].data)
        groups = int(args["groups"])
        conv1d_args = {**args, **({} if clamp_out else {"output_min": None, "output_max": None})}
        if wsizes[2] == 1:
            conv1d_pw.conv1d_pw(graph, conv1d_args, out)
            return "conv1dpw"
        if groups == wsizes[0] and wsizes[1] == 1:
            conv1d_dw.conv1d_dw(graph, conv1d_args, out)
            return "conv1ddw"
        raise ConvRouteError("Height-packed conv1d only supports pointwise (K=1) or depthwise (groups=C)")
    add_conv1d_node(graph, args, out, clamp_out, out_min, out_max, resize)
    return "conv1d"


def _extract_float(value: Any, name: str) -> float:
    """``extract_scalar<float>``: a None value throws; a double past float's range becomes ±inf."""
    if value is None:
        raise ConvRouteError(f"Cannot extract scalar from Value with type None ({name})")
    with np.errstate(over="ignore"):
        return float(np.float32(value))


def _with_profile(graph: ComputeGraph, profile: str | None) -> None:
    """Answer the C++'s device queries (``device_is_mali``) from a routing profile (``routes.toml``) instead of
    the adapter, so one device runs another vendor's route; the shaders still run on the real device."""
    if profile is not None:
        graph.route = route_for(profile, graph.ctx.info)


def _checked(route: str, expected: str | None) -> None:
    if expected is not None and route != expected:
        raise ValueError(f"the case declares route={expected} but the arguments take route={route}")


@register_op("aten.convolution.default", output=output_of, constants=("weight", "bias"), ports=PORTS)
def convolution(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None,
                profile: str | None = None) -> None:
    """``conv`` with ``aten.convolution``'s nine arguments (no clamp).

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): ``input`` (channels packed; height packed for the conv1d pw/dw routes), ``weight`` and
            ``bias`` (TensorRefs), ``stride``, ``padding``, ``dilation``, ``transposed``, ``output_padding``,
            ``groups``.
        out (Tensor): the output, in the input's layout.
        route (str | None): the route the case expects (``pw``, ``dwtile3``, ``im2col``...); checked.
        profile (str | None): a routing profile answering the device queries (``mali``: ``_b1x1`` tiles,
            im2col for every sliding-window conv, buffer scratch); None: the adapter's own answers.

    Example::

        convolution(graph, {"input": x, "weight": TensorRef(id="w", data=w), "bias": None, "stride": [1, 1],
                            "padding": [1, 1], "dilation": [1, 1], "transposed": False,
                            "output_padding": [0, 0], "groups": 1}, out, route="direct")
    """
    _with_profile(graph, profile)
    _checked(conv(graph, args, out, clamp_out=False), route)


@register_op("et_vk.conv_with_clamp.default", output=output_of, constants=("weight", "bias"), ports=PORTS)
def conv_with_clamp(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None,
                    profile: str | None = None) -> None:
    """``conv`` with ``conv_with_clamp``'s eleven arguments: the ``_clamp`` variants with (output_min, output_max).

    Example::

        conv_with_clamp(graph, {..., "output_min": 0.0, "output_max": 6.0}, out, route="dwtile3")
    """
    _with_profile(graph, profile)
    _checked(conv(graph, args, out, clamp_out=True), route)


register_op("conv_with_clamp.default", output=output_of, constants=("weight", "bias"), ports=PORTS)(conv_with_clamp)
"""The C++ registers ``conv`` under the un-namespaced name too: ``VkGraphBuilder`` writes custom ops' calls as
``node.target.__name__`` (``conv_with_clamp.default``), which ``schema_of`` binds to the ``et_vk`` schema."""
