"""Launcher for ``et_vk.linear_q4gsw`` through ET-VK's ``linear_q4gsw_{tiled,coop}`` shaders.

Ported from ``runtime/graph/ops/impl/QuantizedLinear.cpp`` (``quantized_linear_impl``
→ ``prepack_quantized_linear_weight`` + ``add_linear_qw_node``):

* the 4-bit weight ``uint8 [N, K/2]`` is repacked on the device by
  ``pack_q4_linear_weight_{storage}`` into int32 blocks ``[N/8, K/4 * 4]``, stored as
  texture2d unless that exceeds ``max-texture-dimension-2d`` (then buffer);
* scales ``[K/gs, N4*4]`` and bias go to buffers in the output dtype;
* ``pick_linear_qw_shader``: ``_coop`` when M == 1 (GEMV), else ``_tiled``, suffixed
  by output storage, weight storage and dtype;
* global size ``(div_up(N, 8), div_up(M, 4 or 1), 1)``; local size
  ``pick_hw_square_wg_size`` (tiled) or ``(1, 1, 64)`` (coop);
* spec constants ``[apply_bias, K4_per_group, num_groups, N]`` from id 3; UBOs:
  output sizes then input sizes, WHCN ``ivec4``.
"""

from __future__ import annotations

import numpy as np

from vkdiff.device import layouts, resources
from vkdiff.device.context import DeviceContext, Launch
from vkdiff.device.dispatch import dispatch
from vkdiff.device.launchers.common import (create_local_wg_size, div_up, dtype_suffix, pick_hw_square_wg_size,
                                            sizes_ivec4)
from vkdiff.device.resources import Storage


def weight_storage_for(ctx: DeviceContext, n: int, k: int) -> Storage:
    """ET-VK's choice: texture2d unless the packed weight exceeds the 2D texture limit."""
    height, width = div_up(n, 8), div_up(k, 4) * 4
    limit = ctx.device.limits["max-texture-dimension-2d"]
    return "buffer" if width > limit * 4 or height > limit else "texture2d"


def prepack_q4_weight(ctx: DeviceContext, packed_weight: np.ndarray, storage: Storage) -> tuple[resources.Tensor, str]:
    """Run ``pack_q4_linear_weight_{storage}`` on ``uint8 [N, K/2]``; returns the int32 block tensor and variant."""
    n, k = packed_weight.shape[0], packed_weight.shape[1] * 2
    if k % 8:
        raise ValueError(f"linear_q4gsw needs K % 8 == 0, got K={k}")
    name = f"pack_q4_linear_weight_{storage}"
    blocks_shape = (div_up(n, 8), div_up(k, 4) * 4)
    global_wg = (div_up(div_up(k, 4), 2), div_up(n, 8), 1)
    pipeline, _ = ctx.kernel(name, {}, create_local_wg_size(global_wg))
    src = resources.buffer_tensor(ctx.device, np.ascontiguousarray(packed_weight, dtype=np.uint8), "int4_weight")
    out = resources.poisoned(ctx.device, blocks_shape, np.int32, storage, "packed_int4_weight")
    immediates = sizes_ivec4(blocks_shape) + np.array([k, n], dtype=np.int32).tobytes()
    dispatch(ctx.device, pipeline, [out, src], global_wg, immediates, label=name)
    return out, name


def linear_q4gsw(ctx: DeviceContext, x: np.ndarray, packed_weight: np.ndarray, scales: np.ndarray,
                 group_size: int, bias: np.ndarray | None = None, *, io_storage: Storage = "texture3d",
                 weight_storage: Storage | None = None) -> Launch:
    """Compute ``out = x @ dequant(w).T + bias`` with ET-VK's real linear_q4gsw shaders.

    Args:
        ctx (DeviceContext): device and shader tree to run on.
        x (np.ndarray): activations ``[M, K]``, float32 or float16 (the dtype picks the variant).
        packed_weight (np.ndarray): ``uint8 [N, K/2]``, byte = ``(odd + 8) << 4 | (even + 8)``.
        scales (np.ndarray): ``[K/gs, N4*4]`` in ET-VK's transposed layout, width padded to 4.
        group_size (int): quantization group size along K.
        bias (np.ndarray | None): ``[N]`` or None.
        io_storage (str): ``"buffer"`` or ``"texture3d"`` for input and output.
        weight_storage (str | None): storage of the repacked weight; None applies ET-VK's rule.

    Returns:
        Launch: the ``[M, N]`` output in ``x``'s dtype, the variant, the unwritten count.

    Raises:
        VariantMissingError: the tree lacks the variant this dispatch needs.
        BuildError, ShaderLoadError, DeviceLimitError, DispatchError: see ``vkdiff.device``.

    Example::

        launch = linear_q4gsw(ctx, x, w_packed, scales_t, 32, io_storage="buffer")
        assert launch.unwritten == 0
    """
    m, k = x.shape
    n = packed_weight.shape[0]
    if k % 4 or packed_weight.shape[1] * 2 != k:
        raise ValueError(f"linear_q4gsw: x is [M, K]={x.shape}, weight must be [N, K/2] with K % 4 == 0, "
                         f"got {packed_weight.shape}")
    n4 = div_up(n, 4)
    if scales.shape != (k // group_size, n4 * 4):
        raise ValueError(f"linear_q4gsw: scales must be [K/gs, N4*4] = {(k // group_size, n4 * 4)}, got {scales.shape}")
    dtype = np.dtype(x.dtype)
    weight_storage = weight_storage or weight_storage_for(ctx, n, k)
    packed, pack_name = prepack_q4_weight(ctx, packed_weight, weight_storage)

    gemv = m == 1
    name = f"linear_q4gsw_{'coop' if gemv else 'tiled'}_{io_storage}_{weight_storage}_{dtype_suffix(dtype)}"
    global_wg = (div_up(n, 8), div_up(m, 1 if gemv else 4), 1)
    local_wg = (1, 1, 64) if gemv else pick_hw_square_wg_size(global_wg)
    apply_bias = int(bias is not None)
    spec = {3: apply_bias, 4: div_up(group_size, 4), 5: k // group_size, 6: n}
    pipeline, shader = ctx.kernel(name, spec, local_wg)

    device = ctx.device
    out = resources.poisoned(device, (m, n), dtype, io_storage, "output")
    inp = resources.tensor(device, np.ascontiguousarray(x), io_storage, "input")
    scales_t = resources.buffer_tensor(device, np.ascontiguousarray(scales, dtype=dtype), "weight_scales")
    bias_data = np.zeros(4, dtype) if bias is None else np.ascontiguousarray(bias, dtype=dtype)
    bias_t = resources.buffer_tensor(device, bias_data, "bias")
    ubos = [resources.uniform(device, sizes_ivec4((m, n)), "output_sizes"),
            resources.uniform(device, sizes_ivec4((m, k)), "input_sizes")]
    dispatch(device, pipeline, [out, inp, packed, scales_t, bias_t, *ubos], global_wg, label=name)
    result = resources.read(device, out)
    return Launch(output=result, variant=name, unwritten=int(layouts.unwritten_mask(result).sum()),
                  polyfilled=shader.polyfilled, shaders=(pack_name, name),
                  dispatch={"global": global_wg, "local": local_wg, "spec": spec})
