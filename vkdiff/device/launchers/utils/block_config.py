"""ET-VK's ``BlockConfig``: how the block-based (q8ta) shaders map one thread to a 4×4 block of a tensor.

Ported from ``runtime/graph/ops/impl/Common.cpp`` (``BlockConfig::BlockConfig``, ``BlockConfig::as_packed_int``,
``create_block_config_from_io_packed_dims``, ``create_block_config_for_tensor``,
``create_block_config_from_other``, ``pick_linear_global_wg_with_block_config``,
``pick_extents_global_wg_with_block_config``, ``pick_square_local_wg_with_block_config``).

A block has an inner dim (4 consecutive elements along a tensor's packed dim) and an outer dim (4 rows along
another dim); dims are WHCN indices. ``as_packed_int`` encodes it in the hashed-layout format the shaders decode
(bits 0-15 the block dim order, 16-19 inner dim, 20-23 outer dim, 24-27 and 28-31 the two block sizes) and is
passed as a spec constant; the C++ also casts it to a ``ValueRef`` as the pickers' resize argument.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph.vtensor import TensorSpec
from vkdiff.device.launchers.utils.common import div_up, val_at
from vkdiff.device.shaders.ports import Port

COMMON = Port(file="runtime/graph/ops/impl/Common.cpp",
              functions=("BlockConfig::BlockConfig", "BlockConfig::as_packed_int",
                         "create_block_config_from_io_packed_dims", "create_block_config_for_tensor",
                         "create_block_config_from_other", "pick_linear_global_wg_with_block_config",
                         "pick_extents_global_wg_with_block_config", "pick_square_local_wg_with_block_config"),
              sha256="c223f63c0b8eeb9811a0f4641886bac3959230a0aba9137eb3a87a7bdd7ffe3b",
              tree="executorch main cff6f4dd32")


@dataclasses.dataclass(frozen=True)
class BlockConfig:
    """``BlockConfig``: inner and outer block dims (WHCN) and their block sizes."""

    inner_dim: int
    inner_dim_block_size: int
    outer_dim: int
    outer_dim_block_size: int
    block_transposed: bool = False

    def __post_init__(self) -> None:
        if self.outer_dim == self.inner_dim:
            raise EtVkRefusal(f"BlockConfig: outer_dim != inner_dim (both {self.inner_dim})")

    @property
    def block_dim_order(self) -> tuple[int, int, int, int]:
        """Inner and outer dim (swapped when transposed), then the two lowest other dims."""
        rest = [d for d in range(4) if d not in (self.inner_dim, self.outer_dim)][:2]
        first = (self.outer_dim, self.inner_dim) if self.block_transposed else (self.inner_dim, self.outer_dim)
        return (*first, *rest)  # type: ignore[return-value]

    def as_packed_int(self) -> int:
        """``as_packed_int``: the spec constant the shaders decode (a signed int32)."""
        order = self.block_dim_order
        packed = (order[0] & 0xF) | (order[1] & 0xF) << 4 | (order[2] & 0xF) << 8 | (order[3] & 0xF) << 12
        packed |= (self.inner_dim & 0xF) << 16 | (self.outer_dim & 0xF) << 20
        packed |= (self.inner_dim_block_size & 0xF) << 24 | (self.outer_dim_block_size & 0xF) << 28
        return int(np.array(packed, np.uint32).view(np.int32))


def inner_dim_of(packed: int) -> int:
    """``BlockConfig::inner_dim_from_packed_int``."""
    return (packed >> 16) & 0xF


def outer_dim_of(packed: int) -> int:
    """``BlockConfig::outer_dim_from_packed_int``."""
    return (packed >> 20) & 0xF


def create_block_config_from_io_packed_dims(output: TensorSpec, input: TensorSpec) -> BlockConfig:
    """Inner dim: the output's packed dim; outer: the input's, or W (H when the inner is W) if they agree."""
    inner, outer = output.info.packed_dim, input.info.packed_dim
    if outer == inner:
        outer = 1 if inner == 0 else 0
    return BlockConfig(inner, 4, outer, 4)


def create_block_config_for_tensor(tensor: TensorSpec) -> BlockConfig:
    """Inner dim: the tensor's packed dim; outer: W, or H when the packed dim is W."""
    packed = tensor.info.packed_dim
    return BlockConfig(packed, 4, 1 if packed == 0 else 0, 4)


def create_block_config_from_other(tensor: TensorSpec, other: BlockConfig) -> BlockConfig:
    """``other`` if its inner dim is the tensor's packed dim, else its inner and outer dims swapped."""
    if tensor.info.packed_dim == other.inner_dim:
        return other
    return BlockConfig(other.outer_dim, other.outer_dim_block_size, other.inner_dim, other.inner_dim_block_size)


def pick_linear_global_wg_with_block_config(sizes: Sequence[int], packed: int) -> tuple[int, int, int]:
    """One thread per block: blocks along the inner and outer dims times every other size (dims past 4 too)."""
    inner, outer = inner_dim_of(packed), outer_dim_of(packed)
    total = div_up(val_at(-1 - inner, sizes), 4) * div_up(val_at(-1 - outer, sizes), 4)
    for d in range(4):
        if d not in (inner, outer):
            total *= val_at(-1 - d, sizes)
    for d in range(4, len(sizes)):
        total *= val_at(-1 - d, sizes)
    return (total, 1, 1)


def pick_extents_global_wg_with_block_config(sizes: Sequence[int], packed: int) -> tuple[int, int, int]:
    """x = W, y = H, z = C * N (batches beyond 4 dims folded in N); block dims divided by 4."""
    inner, outer = inner_dim_of(packed), outer_dim_of(packed)
    batches = 1
    for i in range(4, len(sizes) + 1):
        batches *= val_at(-i, sizes)

    def threads(dim: int) -> int:
        size = val_at(-1 - dim, sizes)
        return div_up(size, 4) if dim in (inner, outer) else size

    return (threads(0), threads(1), threads(2) * batches)


def pick_square_local_wg_with_block_config(global_wg: Sequence[int], packed: int) -> tuple[int, int, int]:
    """64 wide for a linear dispatch; else 8 on the two block axes and 1 on the third."""
    if global_wg[1] == 1 and global_wg[2] == 1:
        return (64, 1, 1)
    inner, outer = inner_dim_of(packed), outer_dim_of(packed)
    return tuple(8 if d in (inner, outer) else 1 for d in range(3))  # type: ignore[return-value]
