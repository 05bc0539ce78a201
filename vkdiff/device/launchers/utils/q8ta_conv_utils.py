"""What the static-int8 convolution launchers (``q8ta_conv2d*.py``) share: conv params, layout checks, qparams,
weight prepacking, output sizes and routes.

Ported from ``Q8taConv2d.cpp`` (``activation_type_from_string``, ``q8ta_conv2d_check_packed_dim_info``,
``q8ta_conv2d_check_4w4c_packed_dim_info``, ``prepack_quantized_conv2d_weight``), ``QuantizedConvolution.cpp``
(``create_conv2d_params``: the ``Conv2DParams`` UBO every q8ta conv shader reads), ``QuantizedLinear.cpp``
(``prepack_quantized_linear_weight`` for 8-bit weights, which the im2col route packs with) and ``KernelUtils.cpp``
(``calc_out_sizes_hw`` with ``kernel_size_only = true``: the kernel from the ``kernel_size`` list).

* int8x4 tensors are buffers; the conv shaders accept ``PACKED_INT8_4C``, ``_4C1W`` and ``_4W4C`` (packed dim C in
  blocks of 4, outer packed dim W in blocks of 1 or 4); ``_4W`` and ``_4H4W`` are refused;
* every op prepacks ``weight_sums`` and ``weight_scales`` (and ``bias``) with ``prepack_standard`` to
  width-packed buffers; without a bias a 0-dim ``TmpTensor`` of the scales' dtype fills the binding;
* push constants ``(input_scale, input_zp, 1 / output_scale, output_zp)`` as float32 / int32, ``1.0f / s`` in float;
* ``pack_q8_conv2d_weights_<storage>``: ``[OC, align4(KH·KW·ICg)]`` int8 → int32 ``[ICg4·KH, KW·OC4·4]``
  width packed (global ``(KW·OC4, ICg4·KH, 1)``, push constants the packed sizes and ``(OC, KH, KW, ICg)``);
  ``pack_q8_linear_weight_<storage>``: ``[N, K]`` → ``[K4, N4·4]`` (global ``(N4, K4, 1)``, push constants the
  packed sizes and ``(K, N)``, through the prepack cache); texture2d unless a side passes ``max_texture2d_dim``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.staging import prepack_standard
from vkdiff.device.graph.vtensor import INT8X4
from vkdiff.device.launchers.utils.common import div_up, dtype_suffix, val_at
from vkdiff.device.launchers.utils.conv_utils import KERNEL_UTILS, PREPACK_NODE, calc_out_size, calc_transpose_out_size
from vkdiff.device.launchers.utils.conv_utils import prepack_node
from vkdiff.device.launchers.utils.q8_weights import packed_weight_storage
from vkdiff.device.launchers.registry import Port
from vkdiff.device.runtime.resources import Tensor
from vkdiff.device.runtime.routing import route_for

TREE = "executorch main cff6f4dd32"
Q8TA_CONV2D = Port(file="runtime/graph/ops/impl/Q8taConv2d.cpp",
                   functions=("q8ta_conv2d", "q8ta_conv2d_general", "add_q8ta_conv2d_node",
                              "pick_q8ta_conv2d_global_wg_size", "pick_q8ta_conv2d_local_wg_size",
                              "resize_q8ta_conv2d_node", "prepack_quantized_conv2d_weight",
                              "activation_type_from_string", "q8ta_conv2d_check_packed_dim_info",
                              "q8ta_conv2d_check_4w4c_packed_dim_info"),
                   sha256="26a4ba46a8a74dba410b2ba0152d7c67d0e43f244b6468fb945ccb68434f50a7", tree=TREE)
QUANTIZED_CONVOLUTION = Port(file="runtime/graph/ops/impl/QuantizedConvolution.cpp",
                             functions=("create_conv2d_params",),
                             sha256="6197338935809667a4d76c17ba4eb7ad25973f15ba9a79c6e55c3167c63ea5a0", tree=TREE)
QUANTIZED_LINEAR = Port(file="runtime/graph/ops/impl/QuantizedLinear.cpp",
                        functions=("prepack_quantized_linear_weight",),
                        sha256="1f719e717139d3598137ba34f25c30c203feec9ffa646c7007d4e374e541819e", tree=TREE)
SHARED_PORTS = (QUANTIZED_CONVOLUTION, KERNEL_UTILS, PREPACK_NODE)
CONSTANTS = ("weights", "weight_sums", "weight_scales", "bias")
"""Arguments prepacked as constants (the fusion pattern's placeholders)."""
ACTIVATIONS = {"none": 0, "relu": 1}
"""``ActivationType``."""


class Q8taConvRefusal(EtVkRefusal):
    """A ``VK_CHECK_COND`` / ``VK_THROW`` of the q8ta convolution C++ refused the arguments at graph build."""


def check(condition: bool, text: str) -> None:
    """``VK_CHECK_COND(condition)``: refuse with the condition's C++ text."""
    if not condition:
        raise Q8taConvRefusal(f"Check failed: {text}")


def activation_type_from_string(activation: str) -> int:
    """``activation_type_from_string``."""
    if activation not in ACTIVATIONS:
        raise Q8taConvRefusal(f"Unknown activation type: {activation}")
    return ACTIVATIONS[activation]


def packed_dim_info_ok(tensor: Tensor, outer_blocks: tuple[int, ...] = (1, 4)) -> bool:
    """``q8ta_conv2d_check_packed_dim_info`` (outer blocks 1 or 4) / ``_check_4w4c_`` (outer block 4)."""
    info = tensor.spec.info
    return (info.packed_dim == 2 and info.packed_dim_block_size == 4 and info.outer_packed_dim == 0
            and info.outer_packed_dim_block_size in outer_blocks)


def check_int8x4_io(x: Tensor, out: Tensor, *, input_4w4c: bool = False) -> None:
    """The packed-dim and dtype ``VK_CHECK_COND``s every q8ta conv node makes on its input and output."""
    if input_4w4c:
        check(packed_dim_info_ok(x, (4,)),
              "q8ta_conv2d_check_4w4c_packed_dim_info(graph.packed_dim_info_of(packed_int8_input))")
    else:
        check(packed_dim_info_ok(x), "q8ta_conv2d_check_packed_dim_info(graph.packed_dim_info_of(packed_int8_input))")
    check(packed_dim_info_ok(out), "q8ta_conv2d_check_packed_dim_info(graph.packed_dim_info_of(packed_int8_output))")
    check(x.spec.dtype == INT8X4, "graph.dtype_of(packed_int8_input) == vkapi::kInt8x4")
    check(out.spec.dtype == INT8X4, "graph.dtype_of(packed_int8_output) == vkapi::kInt8x4")


@dataclasses.dataclass(frozen=True)
class Conv2DParams:
    """``Conv2DParams`` (``conv2d_common.glslh``): four ``ivec2`` in (W, H) order, then nine ints."""

    kernel_size: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    groups: int
    out_channels_per_group: int
    in_channels_per_group: int
    logical_K_per_group: int
    K_per_group: int
    K4_per_group: int
    logical_K: int
    K: int
    K4: int

    def block(self) -> bytes:
        """The UBO bytes (``create_params_buffer``)."""
        values = [*self.kernel_size, *self.stride, *self.padding, *self.dilation, self.groups,
                  self.out_channels_per_group, self.in_channels_per_group, self.logical_K_per_group,
                  self.K_per_group, self.K4_per_group, self.logical_K, self.K, self.K4]
        return np.array(values, np.int32).tobytes()


def _wh(values: Sequence[int]) -> tuple[int, int]:
    """``make_ivec2({list[1], list[0]})``: an (H, W) list as (W, H)."""
    return int(values[1]), int(values[0])


GEOMETRY = ("kernel_size", "stride", "padding", "dilation")
"""The conv ops' geometry arguments, in ``create_conv2d_params``'s order (each an ``[H, W]`` list)."""


def create_conv2d_params(x: Tensor, out: Tensor, kernel_size, stride, padding, dilation, groups) -> Conv2DParams:
    """``create_conv2d_params`` on graph tensors (their channels as sized now)."""
    return conv2d_params(int(x.spec.sizes[-3]), int(out.spec.sizes[-3]), kernel_size, stride, padding, dilation, groups)


def conv2d_params(in_c: int, out_c: int, kernel_size, stride, padding, dilation, groups) -> Conv2DParams:
    """``create_conv2d_params`` (``QuantizedConvolution.cpp``): channels per group, K per group aligned to 4."""
    g = int(groups)
    kh, kw = (int(k) for k in kernel_size)
    logical_k_pg = kh * kw * (in_c // g)
    k_pg = div_up(logical_k_pg, 4) * 4
    return Conv2DParams(kernel_size=_wh(kernel_size), stride=_wh(stride), padding=_wh(padding),
                        dilation=_wh(dilation), groups=g, out_channels_per_group=out_c // g,
                        in_channels_per_group=in_c // g, logical_K_per_group=logical_k_pg, K_per_group=k_pg,
                        K4_per_group=k_pg // 4, logical_K=kh * kw * in_c, K=k_pg * g, K4=k_pg * g // 4)


def conv_out_hw(in_sizes: Sequence[int], kernel_size, stride, padding, dilation) -> tuple[int, int]:
    """``calc_out_sizes_hw`` (``kernel_size_only = true``, ``ceil_mode = false``): (H_out, W_out)."""
    return tuple(calc_out_size(int(in_sizes[-2 + i]), int(kernel_size[i]), int(stride[i]), int(padding[i]),
                               int(dilation[i])) for i in (0, 1))  # type: ignore[return-value]


def transposed_out_hw(in_sizes: Sequence[int], kernel_size, stride, padding, dilation,
                      output_padding) -> tuple[int, int]:
    """``calc_out_sizes_hw`` (``transposed = true``): ``(in − 1)·s − 2·p + d·(k − 1) + op + 1``."""
    return tuple(calc_transpose_out_size(int(in_sizes[-2 + i]), int(kernel_size[i]), int(stride[i]),
                                         int(padding[i]), int(dilation[i]), int(output_padding[i]))
                 for i in (0, 1))  # type: ignore[return-value]


def whc(tensor: Tensor) -> tuple[int, int, int]:
    """``size_at(-1)``, ``size_at(-2)``, ``size_at(-3)``: W, H and C (1 past the front)."""
    return tuple(val_at(-i, tensor.spec.sizes) for i in (1, 2, 3))  # type: ignore[return-value]


def resized(out: Tensor, hw: tuple[int, int]) -> tuple[int, ...]:
    """The output's current sizes with H and W replaced (N and C stay as allocated, as the C++ keeps them)."""
    return (*out.spec.sizes[:-2], *hw)


def conv_output_of(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``[N, OC, H_out, W_out]`` int8 of a direct conv (``OC`` = the weight matrix's rows)."""
    x = np.asarray(args["x"])
    hw = conv_out_hw(x.shape, args["kernel_size"], args["stride"], args["padding"], args["dilation"])
    return (x.shape[0], int(np.shape(args["weights"])[0]), *hw), np.int8


def dw_output_of(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``[N, C, H_out, W_out]`` int8 of a depthwise conv."""
    x = np.asarray(args["x"])
    hw = conv_out_hw(x.shape, args["kernel_size"], args["stride"], args["padding"], args["dilation"])
    return (*x.shape[:2], *hw), np.int8


def transposed_output_of(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``[N, OC, H_out, W_out]`` int8 of a transposed conv."""
    x = np.asarray(args["x"])
    hw = transposed_out_hw(x.shape, args["kernel_size"], args["stride"], args["padding"], args["dilation"],
                           args["output_padding"])
    return (x.shape[0], int(np.shape(args["weights"])[0]), *hw), np.int8


def qparams_block(args: Mapping[str, Any]) -> bytes:
    """``(input_scale, input_zp, output_inv_scale, output_zp)``: ``extract_scalar<float>`` / ``<int32_t>``,
    ``1.0f / output_scale`` in float."""
    inv = np.float32(1.0) / np.float32(args["output_scale"])
    return (np.array([args["input_scale"]], np.float32).tobytes() + np.array([args["input_zero_point"]], np.int32)
            .tobytes() + np.array([inv], np.float32).tobytes()
            + np.array([args["output_zero_point"]], np.int32).tobytes())


def prepack_qparams(graph: ComputeGraph, args: Mapping[str, Any]) -> tuple[Tensor, Tensor, Tensor]:
    """``weight_sums``, ``weight_scales`` and ``bias`` (or the dummy ``TmpTensor``) as width-packed buffers."""
    sums = prepack_standard(graph, args["weight_sums"], "buffer", "width")
    scales = prepack_standard(graph, args["weight_scales"], "buffer", "width")
    bias: TensorRef | None = args.get("bias")
    if bias is None:
        dtype = np.asarray(args["weight_scales"].data).dtype.name
        return sums, scales, graph.add_tensor((), dtype, "buffer", "width", temporary=True, label="dummy_bias")
    return sums, scales, prepack_standard(graph, bias, "buffer", "width")


def prepack_quantized_conv2d_weight(graph: ComputeGraph, weights: TensorRef, out_channels: int, in_channels_pg: int,
                                    kernel_size: Sequence[int]) -> Tensor:
    """``prepack_quantized_conv2d_weight`` (and the pointwise copy with a 1×1 kernel)."""
    kh, kw = (int(k) for k in kernel_size)
    oc4, ic4 = div_up(out_channels, 4), div_up(in_channels_pg, 4)
    height, width = ic4 * kh, kw * oc4 * 4
    storage = packed_weight_storage(graph, height, width)
    packed = graph.add_tensor((height, width), "int32", storage, "width", label="packed_q8_conv2d_weight")
    orig = np.array([out_channels, kh, kw, in_channels_pg], np.int32).tobytes()
    prepack_node(graph, f"pack_q8_conv2d_weights_{storage}", np.asarray(weights.data), packed, (kw * oc4, height, 1),
                 immediates=[packed.spec.sizes_block(), orig])
    return packed


def dot_product_kernel(graph: ComputeGraph, stem: str, scales: Tensor) -> str:
    """``use_hw_dot ? stem : stem_fallback`` by ``supports_int8_dot_product``, then ``add_dtype_suffix`` of the packed
    weight scales' dtype, as the C++ appends it."""
    return f"{stem}{'' if graph.route.int8_dot_product else '_fallback'}_{dtype_suffix(scales.spec.dtype)}"


def route_name(graph: ComputeGraph, route: str, dot: bool = True) -> str:
    """A case-id route: the C++'s choice, ``_fallback`` when a dot-product shader took its fallback variant."""
    return route if not dot or graph.route.int8_dot_product else f"{route}_fallback"


def with_profile(graph: ComputeGraph, profile: str | None) -> None:
    """Answer the C++'s device queries (``supports_int8_dot_product``, ``device_is_mali``) from a routing profile
    (``routes.toml``) instead of the adapter; the shaders still run on the real device."""
    if profile is not None:
        graph.route = route_for(profile, graph.ctx.info)


def checked(route: str, expected: str | None) -> None:
    """Refuse a case whose declared route is not the one its arguments took."""
    if expected is not None and route != expected:
        raise ValueError(f"the case declares route={expected} but the arguments take route={route}")

