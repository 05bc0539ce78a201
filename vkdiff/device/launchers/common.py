"""ET-VK dispatch helpers shared by launchers, ported from ``runtime/graph`` C++."""

from __future__ import annotations

import numpy as np

from vkdiff.device import resources
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.resources import Tensor

DTYPE_SUFFIX = {np.dtype(np.float32): "float", np.dtype(np.float16): "half", np.dtype(np.int32): "int32"}


def div_up(a: int, b: int) -> int:
    return -(-a // b)


def dtype_suffix(dtype) -> str:
    """``add_dtype_suffix``: the variant suffix ET-VK appends for a tensor dtype."""
    dtype = np.dtype(dtype)
    if dtype not in DTYPE_SUFFIX:
        raise ValueError(f"Unsupported dtype: {dtype}; ET-VK variants exist for {sorted(map(str, DTYPE_SUFFIX))}")
    return DTYPE_SUFFIX[dtype]


def sizes_ivec4(shape: tuple[int, ...]) -> bytes:
    """A tensor's sizes as ET-VK's WHCN ``ivec4`` (``sizes_ubo`` / ``sizes_pc_of``)."""
    dims = list(reversed(shape))[:4]
    return np.array(dims + [1] * (4 - len(dims)), dtype=np.int32).tobytes()


def pick_hw_square_wg_size(global_wg: tuple[int, int, int]) -> tuple[int, int, int]:
    """``pick_hw_square_wg_size`` from ``ops/impl/Common.cpp``."""
    if global_wg[0] >= 6 and global_wg[1] >= 6:
        return (8, 8, 1)
    if global_wg[0] < 6:
        return (4, 16, 1)
    return (16, 4, 1)


def prepack_standard(graph: ComputeGraph, ref: TensorRef) -> Tensor:
    """``prepack_standard`` to a width-packed buffer: the constant's bytes in its own dtype.

    As in ``Staging.cpp``, every call makes a new tensor (no prepack cache). The bytes are
    uploaded directly; ET-VK stages them through ``nchw_to_buffer``, which for a
    contiguous width-packed buffer writes the same bytes.
    """
    return resources.buffer_tensor(graph.device, np.ascontiguousarray(ref.data), f"prepacked_{ref.id}")


def default_global_wg(tensor: Tensor) -> tuple[int, int, int]:
    """``default_pick_global_wg_size`` → ``create_global_wg_size(out)``: numel for buffers, logical limits else."""
    spec = tensor.spec
    return (spec.numel, 1, 1) if spec.storage == "buffer" else tuple(spec.logical_limits)


def val_at(index: int, sizes) -> int:
    """``utils::val_at``: size at a negative index, 1 before the front."""
    return int(sizes[index]) if -len(sizes) <= index < 0 else 1
