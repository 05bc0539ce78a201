"""8-bit weight prepacking shared by the int8 linears and convolutions (``QuantizedLinear.cpp``'s
``prepack_quantized_linear_weight``, 8-bit branch), and ET-VK's storage rule for packed int32 weights."""

from __future__ import annotations

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.compute import create_local_wg_size
from vkdiff.device.graph.staging import staging_buffer
from vkdiff.device.launchers.utils.common import div_up
from vkdiff.device.runtime.resources import Storage, Tensor


def packed_weight_storage(graph: ComputeGraph, height: int, width: int) -> Storage:
    """Texture2d unless the packed ``[height, width]`` int32 weight passes the 2-D limit (``width > max * 4 ||
    height > max``, width counted in int32 lanes), as the prepack functions choose."""
    limit = graph.device.limits["max-texture-dimension-2d"]
    return "buffer" if width > limit * 4 or height > limit else "texture2d"


def prepack_quantized_linear_weight(graph: ComputeGraph, weights: TensorRef, storage: Storage | None = None) -> Tensor:
    """``prepack_quantized_linear_weight`` (8-bit): ``int8 [N, K]`` → int32 4×4 blocks ``[K4, N4 * 4]`` by
    ``pack_q8_linear_weight_<storage>`` (one thread per block, push constants the packed sizes and ``(K, N)``),
    through the graph's prepack cache."""
    n, k = (int(v) for v in np.shape(weights.data)[-2:])
    if k % 4:
        raise EtVkRefusal(f"prepack_quantized_linear_weight: VK_CHECK_COND(K % 4 == 0) failed, K={k}")
    n4, k4 = div_up(n, 4), div_up(k, 4)
    storage = storage or packed_weight_storage(graph, k4, n4 * 4)
    name = f"pack_q8_linear_weight_{storage}"
    cached = graph.get_cached_prepack(weights, name)
    if cached is not None:
        return cached
    packed = graph.add_tensor((k4, n4 * 4), "int32", storage, "width", label="packed_int8_weight")
    src = staging_buffer(graph, np.asarray(weights.data, dtype=np.int8), "int8_weight")
    global_wg = (n4, k4, 1)
    graph.dispatch(name, global_wg=global_wg, local_wg=create_local_wg_size(global_wg), resources=[packed, src],
                   immediates=packed.spec.sizes_block() + np.array([k, n], np.int32).tobytes(), prepack=True)
    graph.cache_prepack(weights, name, packed)
    return packed
