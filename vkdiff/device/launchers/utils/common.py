"""ET-VK dispatch helpers shared by launchers, ported from ``runtime/graph`` C++."""

from __future__ import annotations

import numpy as np

from vkdiff.device.runtime.resources import Tensor

DTYPE_SUFFIX = {np.dtype(np.float32): "float", np.dtype(np.float16): "half", np.dtype(np.int32): "int32"}


def div_up(a: int, b: int) -> int:
    return -(-a // b)


def dtype_suffix(dtype) -> str:
    """``add_dtype_suffix``: the variant suffix ET-VK appends for a tensor dtype."""
    dtype = np.dtype(dtype)
    if dtype not in DTYPE_SUFFIX:
        raise ValueError(f"Unsupported dtype: {dtype}; ET-VK variants exist for {sorted(map(str, DTYPE_SUFFIX))}")
    return DTYPE_SUFFIX[dtype]


def pick_hw_square_wg_size(global_wg: tuple[int, int, int]) -> tuple[int, int, int]:
    """``pick_hw_square_wg_size`` from ``ops/impl/Common.cpp``."""
    if global_wg[0] >= 6 and global_wg[1] >= 6:
        return (8, 8, 1)
    if global_wg[0] < 6:
        return (4, 16, 1)
    return (16, 4, 1)


def default_global_wg(tensor: Tensor) -> tuple[int, int, int]:
    """``default_pick_global_wg_size`` → ``create_global_wg_size(out)``: numel for buffers, logical limits else."""
    spec = tensor.spec
    return (spec.numel, 1, 1) if spec.storage == "buffer" else tuple(spec.logical_limits)


def val_at(index: int, sizes) -> int:
    """``utils::val_at``: size at a negative index, 1 before the front."""
    return int(sizes[index]) if -len(sizes) <= index < 0 else 1
