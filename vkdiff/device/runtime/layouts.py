"""ET-VK tensor layouts in numpy: WHCN sizes, width-packed texels, poison patterns.

ET-VK addresses tensors in WHCN order (width = innermost, last numpy axis). A
width-packed 3D texture holds 4 consecutive width elements per texel at
``(x = w // 4, y = h, z = c + n * C)``; the tail texel is zero padded. A 2D
texture is the same with one layer.
"""

from __future__ import annotations

import numpy as np

TEXEL_FORMATS = {
    np.dtype(np.float32): "rgba32float",
    np.dtype(np.float16): "rgba16float",
    np.dtype(np.int32): "rgba32sint",
    np.dtype(np.uint32): "rgba32uint",
    np.dtype(np.int8): "rgba8sint",
    np.dtype(np.uint8): "rgba8uint",
    np.dtype(np.bool_): "rgba8uint",
}
"""Texture format ET-VK allocates for each tensor dtype (``vk_api/Types.h``: Bool is ``R8G8B8A8_UINT``)."""

POISON_BITS = {1: 0x5A, 2: 0x7E5A, 4: 0x7FA5A5A5}
"""Bit pattern written before a dispatch (quiet NaN payloads for floats): unwritten = still equal."""


def whcn_sizes(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """Numpy shape (…, C, H, W) → ET-VK ``ivec4`` sizes ``(W, H, C, N)``, missing dims = 1."""
    dims = list(reversed(shape))[:4]
    return tuple(dims + [1] * (4 - len(dims)))  # type: ignore[return-value]


def texture_extent(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """Width-packed texture extent ``(ceil(W/4), H, C*N)`` of a tensor."""
    w, h, c, n = whcn_sizes(shape)
    return (-(-w // 4), h, c * n)


def to_texels(array: np.ndarray) -> np.ndarray:
    """Pack a tensor width-wise into texels: returns ``[depth, height, width4, 4]``, zero padded."""
    w, h, c, n = whcn_sizes(array.shape)
    w4 = -(-w // 4)
    padded = np.zeros((n * c, h, w4 * 4), dtype=array.dtype)
    padded[:, :, :w] = array.reshape(n * c, h, w)
    return padded.reshape(n * c, h, w4, 4)


def from_texels(texels: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Inverse of ``to_texels``: drop padding and restore the numpy shape."""
    w, h, c, n = whcn_sizes(shape)
    flat = texels.reshape(n * c, h, -1)[:, :, :w]
    return np.ascontiguousarray(flat).reshape(shape)


def poison_like(array_or_shape, dtype) -> np.ndarray:
    """An array whose every element has the poison bit pattern of ``dtype``."""
    dtype = np.dtype(dtype)
    shape = array_or_shape.shape if hasattr(array_or_shape, "shape") else tuple(array_or_shape)
    bits = np.full(shape, POISON_BITS[dtype.itemsize], dtype=f"u{dtype.itemsize}")
    return bits.view(dtype)


def unwritten_mask(result: np.ndarray) -> np.ndarray:
    """True where ``result`` still holds the poison pattern (the kernel never wrote it). Every int8 / uint8 value
    is a valid code (an int8x4 output comes back through its staging shader besides), so none is marked there:
    an unwritten code shows as a wrong value."""
    itemsize = result.dtype.itemsize
    if result.dtype in (np.dtype(np.int8), np.dtype(np.uint8)):
        return np.zeros(result.shape, bool)
    return result.view(f"u{itemsize}") == POISON_BITS[itemsize]
