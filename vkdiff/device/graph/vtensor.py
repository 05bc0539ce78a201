"""``vTensor`` metadata as ET-VK computes it (``runtime/api/containers/Tensor.cpp``), byte for byte.

Sizes are in PyTorch (NCHW) order as the graph declares them; ET-VK's shaders read
them flipped to WHCN and unsqueezed to 4 (or 8 for ``BufferMetadata``). A tensor's
storage, memory layout and dtype fix its packed dim, padded sizes, dim order,
strides, axis map, ``hashed_layout`` (a spec constant of most shaders), image
extents and logical limits; the UBO and push-constant blocks shaders read are
built here from those, so a launcher binds exactly what the C++ runtime would.

Ported functions: ``calculate_packed_dim_info``, ``calculate_padded_sizes``,
``calculate_dim_order``, ``calculate_strides``, ``calculate_axis_map`` (default
layout), ``calculate_image_extents``, ``calculate_logical_limits``,
``calculate_gpu_buffer_numel``, ``create_hashed_layout``, ``flip_and_unsqueeze``,
``BufferMetadata::update``, ``TextureMetadata::update``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Literal, Sequence

import numpy as np

Storage = Literal["buffer", "texture3d", "texture2d"]
Layout = Literal["width", "height", "channels", "int8x4_4w", "int8x4_4c", "int8x4_4w4c", "int8x4_4h4w", "int8x4_4c1w"]

TENSOR_DIM_LIMIT = 8
"""``kTensorDimLimit``: entries of each ``BufferMetadata`` array."""

INT8X4 = "int8x4"
"""ET-VK's ``kInt8x4``: four int8 values in one int32 (the packed int8 layouts)."""

LAYOUT_NAMES = {"TENSOR_WIDTH_PACKED": "width", "TENSOR_HEIGHT_PACKED": "height",
                "TENSOR_CHANNELS_PACKED": "channels", "PACKED_INT8_4W": "int8x4_4w", "PACKED_INT8_4C": "int8x4_4c",
                "PACKED_INT8_4W4C": "int8x4_4w4c", "PACKED_INT8_4H4W": "int8x4_4h4w", "PACKED_INT8_4C1W": "int8x4_4c1w",
                "PACKED_INT8_CONV2D": "int8x4_4c1w"}
"""``VkMemoryLayout`` names of the serialized graph → layouts here (``VulkanBackend.cpp::get_memory_layout``:
``PACKED_INT8_CONV2D``, the q8ta convs' input layout no pass resolves, falls back to ``kPackedInt8_4C1W``)."""

STORAGE_NAMES = {"BUFFER": "buffer", "TEXTURE_3D": "texture3d", "TEXTURE_2D": "texture2d"}
"""``VkStorageType`` names → storages here (``DEFAULT_STORAGE`` is the graph's choice)."""


@dataclasses.dataclass(frozen=True)
class PackedDimInfo:
    """``PackedDimInfo``: WHCN index and block of the packed dim and of the outer packed dim."""

    packed_dim: int
    packed_dim_block_size: int
    packed_dim_align: int
    outer_packed_dim: int
    outer_packed_dim_block_size: int
    outer_packed_dim_align: int
    block_transposed: bool


def packed_dim_info(layout: Layout, storage: Storage) -> PackedDimInfo:
    """``calculate_packed_dim_info``."""
    buf = storage == "buffer"
    table = {
        "width": (0, 1 if buf else 4, 1 if buf else 4, 1, 1, 1, False),
        "height": (1, 1 if buf else 4, 1 if buf else 4, 0, 1, 1, False),
        "channels": (2, 1 if buf else 4, 1 if buf else 4, 0, 1, 1, False),
        "int8x4_4w": (0, 4 if buf else 16, 4 if buf else 16, 1, 1, 1, False),
        "int8x4_4c": (2, 4 if buf else 16, 4 if buf else 16, 0, 1, 1, False),
        "int8x4_4w4c": (2, 4, 4, 0, 4, 4, False),
        "int8x4_4h4w": (0, 4, 4, 1, 4, 4, False),
        "int8x4_4c1w": (2, 4 if buf else 16, 4 if buf else 16, 0, 1, 1, True),
    }
    if layout not in table:
        raise ValueError(f"Unknown memory layout: {layout}; ET-VK has {', '.join(table)}")
    return PackedDimInfo(*table[layout])


def align_up(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def padded_sizes(sizes: Sequence[int], info: PackedDimInfo) -> list[int]:
    """``calculate_padded_sizes``: unsqueezed to a multiple of 4 dims, packed dims aligned."""
    ndim = max(len(sizes), 1)
    up4 = align_up(ndim, 4)
    padded = [_val_at(i - up4, sizes) for i in range(up4)]
    for dim, align in ((info.packed_dim, info.packed_dim_align), (info.outer_packed_dim, info.outer_packed_dim_align)):
        if align > 1:
            padded[up4 - dim - 1] = align_up(_val_at(-dim - 1, sizes), align)
    return padded


def _val_at(index: int, sizes: Sequence[int]) -> int:
    """``utils::val_at``: the size at a negative index, 1 past the front."""
    return int(sizes[index]) if -len(sizes) <= index < 0 else 1


def dim_order(ndim: int, info: PackedDimInfo) -> list[int]:
    """``calculate_dim_order`` (NCHW indices, outermost first, packed dim last)."""
    if ndim == 0:
        return [0]
    last, second = ndim - 1 - info.packed_dim, ndim - 1 - info.outer_packed_dim
    if info.block_transposed:
        last, second = second, last
    order = [d for d in range(ndim) if d not in (last, second)]
    if len(order) < ndim and second >= 0:
        order.append(second)
    if len(order) < ndim:
        order.append(last)
    return order


def strides(ndim: int, padded: Sequence[int], order: Sequence[int], info: PackedDimInfo) -> list[int]:
    """``calculate_strides``: in blocks of the packed dims, over the padded sizes."""
    if ndim == 0:
        return [1]
    blocks = list(padded)
    up4 = len(blocks)
    if info.packed_dim_block_size > 1:
        blocks[up4 - 1 - info.packed_dim] //= info.packed_dim_block_size
    if info.outer_packed_dim_block_size > 1:
        blocks[up4 - 1 - info.outer_packed_dim] //= info.outer_packed_dim_block_size
    offset = up4 - ndim
    out = [0] * ndim
    out[order[ndim - 1]] = 1
    for i in range(ndim - 2, -1, -1):
        inner = blocks[order[i + 1] + offset]
        out[order[i]] = out[order[i + 1]] * inner if inner else out[order[i + 1]]
    return out


DEFAULT_AXIS_MAP = (0, 1, 2, 2)
"""``calculate_axis_map`` for ``AxisMapLayout::DEFAULT``: W→x, H→y, C→z, batches along C."""


def image_extents(info: PackedDimInfo, padded: Sequence[int], axis_map: Sequence[int]) -> tuple[int, int, int]:
    """``calculate_image_extents``: texels along x, y, z."""
    extents = [1, 1, 1]
    if len(padded) > 4:
        return (1, 1, 1)
    for whcn in range(3):
        extents[axis_map[whcn]] = int(padded[len(padded) - 1 - whcn])
    packed_axis, outer_axis = axis_map[info.packed_dim], axis_map[info.outer_packed_dim]
    extents[packed_axis] = -(-extents[packed_axis] // max(info.packed_dim_block_size, 4))
    extents[outer_axis] = -(-extents[outer_axis] // info.outer_packed_dim_block_size)
    extents[axis_map[axis_map[3]]] *= int(padded[0])
    return tuple(extents)  # type: ignore[return-value]


def flip_and_unsqueeze(values: Sequence[int], kind: str, numel: int, fixed_ndim: int = -1) -> list[int]:
    """``flip_and_unsqueeze``: NCHW → WHCN, padded (strides with numel, dim order with its index, else 1)."""
    ndim = len(values)
    up4 = fixed_ndim if fixed_ndim > 0 else max(align_up(ndim, 4), 4)
    out = [0] * up4
    for i in range(ndim):
        value = int(values[ndim - 1 - i])
        out[i] = ndim - 1 - value if kind == "dim_order" else value
    for i in range(ndim, up4):
        out[i] = numel if kind == "strides" else (i if kind == "dim_order" else 1)
    return out


def _pack_into_int32(vec: Sequence[int], info: PackedDimInfo) -> int:
    packed = (vec[0] + (vec[1] << 4) + (vec[2] << 8) + (vec[3] << 12) + (info.packed_dim << 16)
              + (info.outer_packed_dim << 20) + (info.packed_dim_block_size << 24)
              + (info.outer_packed_dim_block_size << 28))
    return int(np.array(packed & 0xFFFFFFFF, dtype=np.uint32).view(np.int32))


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """Everything ET-VK derives from a tensor's (sizes, dtype, storage, layout)."""

    sizes: tuple[int, ...]
    """NCHW sizes as declared."""
    dtype: str
    """numpy dtype name, or ``int8x4``."""
    storage: Storage
    layout: Layout

    @functools.cached_property
    def info(self) -> PackedDimInfo:
        return packed_dim_info(self.layout, self.storage)

    @functools.cached_property
    def padded_sizes(self) -> list[int]:
        return padded_sizes(self.sizes, self.info)

    @functools.cached_property
    def dim_order(self) -> list[int]:
        return dim_order(len(self.sizes), self.info)

    @functools.cached_property
    def strides(self) -> list[int]:
        return strides(len(self.sizes), self.padded_sizes, self.dim_order, self.info)

    @property
    def axis_map(self) -> tuple[int, int, int, int]:
        return DEFAULT_AXIS_MAP

    @property
    def numel(self) -> int:
        return int(np.prod(self.sizes, dtype=np.int64)) if self.sizes else 1

    @property
    def padded_numel(self) -> int:
        return int(np.prod(self.padded_sizes, dtype=np.int64))

    @property
    def physical_numel(self) -> int:
        """``calculate_gpu_buffer_numel``: elements of the buffer (int32 words for int8x4)."""
        numel = self.padded_numel
        if self.dtype == INT8X4:
            numel //= 4
        elif np.dtype(self.dtype).itemsize == 1:
            numel = align_up(numel, 4)
        return numel

    @property
    def element_dtype(self) -> np.dtype:
        """The dtype of one stored element (int32 for int8x4)."""
        return np.dtype(np.int32 if self.dtype == INT8X4 else self.dtype)

    @functools.cached_property
    def extents(self) -> tuple[int, int, int]:
        return image_extents(self.info, self.padded_sizes, self.axis_map)

    @property
    def logical_limits(self) -> tuple[int, int, int]:
        """``calculate_logical_limits``: extents permuted by the axis map."""
        return tuple(self.extents[self.axis_map[i]] for i in range(3))  # type: ignore[return-value]

    @property
    def hashed_layout(self) -> int:
        """``create_hashed_layout``: the layout spec constant shaders decode."""
        if self.storage == "buffer":
            return _pack_into_int32(flip_and_unsqueeze(self.dim_order, "dim_order", 0), self.info)
        return _pack_into_int32(self.axis_map, self.info)

    # Blocks shaders read (UBOs and push constants), little-endian as the host writes them.

    def sizes_block(self) -> bytes:
        """``sizes_ubo`` / ``sizes_pc_of``: WHCN ``ivec4``."""
        return np.array(flip_and_unsqueeze(self.sizes, "sizes", self.numel)[:4], np.int32).tobytes()

    def strides_block(self) -> bytes:
        """``strides_ubo`` / ``strides_pc_of`` (unsqueezed with the padded numel, as ``update_metadata`` does)."""
        return np.array(flip_and_unsqueeze(self.strides, "strides", self.numel)[:4], np.int32).tobytes()

    def numel_block(self) -> bytes:
        return np.array([self.numel], np.int32).tobytes()

    def logical_limits_block(self) -> bytes:
        """``logical_limits_ubo`` / ``logical_limits_pc_of``: ``ivec3`` padded to 16 bytes."""
        return np.array([*self.logical_limits, 0], np.int32).tobytes()

    def buffer_metadata(self) -> bytes:
        """``BufferMetadata``: sizes, dim order, strides (8 each, WHCN), ndim, numel (the padded numel)."""
        numel = self.padded_numel
        parts = [flip_and_unsqueeze(self.sizes, "sizes", numel, TENSOR_DIM_LIMIT),
                 flip_and_unsqueeze(self.dim_order, "dim_order", numel, TENSOR_DIM_LIMIT),
                 flip_and_unsqueeze(self.strides, "strides", numel, TENSOR_DIM_LIMIT), [len(self.sizes), numel]]
        return np.array([v for part in parts for v in part], np.uint32).tobytes()

    def texture_metadata(self) -> bytes:
        """``TextureMetadata``: sizes, logical limits (w=1), axis map, packed dim."""
        sizes = flip_and_unsqueeze(self.sizes, "sizes", 0, 4)
        values = sizes + [*self.logical_limits, 1] + list(self.axis_map) + [self.info.packed_dim]
        return np.array(values, np.int32).tobytes()

    def meta_block(self) -> bytes:
        """``meta_ubo``: buffer or texture metadata by storage."""
        return self.buffer_metadata() if self.storage == "buffer" else self.texture_metadata()


def suggested_layout(sizes: Sequence[int]) -> Layout:
    """``ComputeGraph::suggested_memory_layout``: width packed below 3 dims or with one channel."""
    if len(sizes) < 3 or _val_at(-3, sizes) == 1:
        return "width"
    return "channels"
