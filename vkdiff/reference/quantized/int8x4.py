"""ET-VK's packed int8 activation layouts (``kPackedInt8_*``): where each int8 of an NCHW tensor lives in the
int32 words of its buffer.

A layout packs 4 consecutive elements of its *inner* dim into one word (byte ``i`` = element ``i``, little
endian) and, for block layouts, groups ``outer_block`` such words along its *outer* dim into one block:

========  =====  =====  ===========  =====================================================
layout    inner  outer  outer block  words
========  =====  =====  ===========  =====================================================
4w        W      H      1            4 widths
4c        C      W      1            4 channels
4c1w      C      W      1            4 channels; W is the innermost block dim (transposed)
4w4c      C      W      4            4 channels of one width; a block is 4 widths
4h4w      W      H      4            4 widths of one row; a block is 4 rows
========  =====  =====  ===========  =====================================================

Blocks are laid out by the tensor's dim order (the packed dims innermost) over sizes padded to whole blocks
(``calculate_padded_sizes`` / ``calculate_strides`` in ``Tensor.cpp``); padding bytes are 0 here.
Example::

    >>> import numpy as np
    >>> x = np.arange(1, 9, dtype=np.int8).reshape(1, 2, 1, 4)
    >>> [hex(w) for w in pack(x, "4w")]
    ['0x4030201', '0x8070605']
"""

from __future__ import annotations

import numpy as np

LAYOUTS: dict[str, tuple[int, int, int, bool]] = {
    "4w": (0, 1, 1, False), "4c": (2, 0, 1, False), "4c1w": (2, 0, 1, True),
    "4w4c": (2, 0, 4, False), "4h4w": (0, 1, 4, False),
}
"""Layout → (inner WHCN dim, outer WHCN dim, outer block, block transposed), as ``calculate_packed_dim_info``."""


def _geometry(sizes: tuple[int, ...], layout: str) -> tuple[list[int], list[int], list[int]]:
    """The 4-D sizes, their padded sizes and the block strides (NCHW order) of ``layout``."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown int8x4 layout {layout!r}; ET-VK has {', '.join(LAYOUTS)}")
    if len(sizes) > 4:
        raise ValueError(f"int8x4 tensors have at most 4 dims (ET-VK's staging shaders), got {list(sizes)}")
    inner, outer, outer_block, transposed = LAYOUTS[layout]
    full = [1] * (4 - len(sizes)) + [int(s) for s in sizes]
    padded = list(full)
    padded[3 - inner] = -(-full[3 - inner] // 4) * 4
    padded[3 - outer] = -(-full[3 - outer] // outer_block) * outer_block
    blocks = list(padded)
    blocks[3 - inner] //= 4
    if outer != inner:
        blocks[3 - outer] //= outer_block
    last, second = (3 - outer, 3 - inner) if transposed else (3 - inner, 3 - outer)
    order = [d for d in range(4) if d not in (last, second)] + ([second] if second != last else []) + [last]
    strides = [0] * 4
    strides[order[-1]] = 1
    for i in range(2, -1, -1):
        strides[order[i]] = strides[order[i + 1]] * blocks[order[i + 1]]
    return full, padded, strides


def word_and_byte(sizes: tuple[int, ...], layout: str) -> tuple[np.ndarray, np.ndarray]:
    """For every element of an NCHW tensor of ``sizes``: its word index and byte lane in the packed buffer."""
    full, _, strides = _geometry(tuple(sizes), layout)
    inner, outer, outer_block, _ = LAYOUTS[layout]
    idx = np.indices(full)
    block = [idx[d] // 4 if d == 3 - inner else (idx[d] // outer_block if d == 3 - outer else idx[d])
             for d in range(4)]
    block_idx = sum(block[d] * strides[d] for d in range(4))
    word = block_idx * outer_block + (idx[3 - outer] % outer_block if outer != inner else 0)
    return word.reshape(sizes), (idx[3 - inner] % 4).reshape(sizes)


def words(sizes: tuple[int, ...], layout: str) -> int:
    """Words in the packed buffer: the padded numel over 4 (``calculate_gpu_buffer_numel``)."""
    _, padded, _ = _geometry(tuple(sizes), layout)
    return int(np.prod(padded)) // 4


def pack(x: np.ndarray, layout: str) -> np.ndarray:
    """The int32 words of ``x`` (int8, NCHW, at most 4-D) in ``layout``; padding bytes 0."""
    x = np.asarray(x)
    if x.dtype != np.int8:
        raise ValueError(f"pack: expected int8 data, got {x.dtype}")
    word, lane = word_and_byte(x.shape, layout)
    raw = np.zeros((words(x.shape, layout), 4), np.int8)
    raw[word.reshape(-1), lane.reshape(-1)] = x.reshape(-1)
    return raw.reshape(-1).view("<i4").copy()


def unpack(packed: np.ndarray, sizes: tuple[int, ...], layout: str) -> np.ndarray:
    """The NCHW int8 tensor of ``sizes`` held in ``packed`` (int32 words in ``layout``)."""
    raw = np.ascontiguousarray(np.asarray(packed, np.int32)).view(np.int8).reshape(-1, 4)
    word, lane = word_and_byte(tuple(sizes), layout)
    return raw[word, lane].reshape(sizes)
