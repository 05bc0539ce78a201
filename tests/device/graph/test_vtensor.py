"""vTensor metadata against values worked out by hand from ``Tensor.cpp`` (and one seen in a real dispatch)."""

from __future__ import annotations

import numpy as np
import pytest

from vkdiff.device.graph.vtensor import TensorSpec, flip_and_unsqueeze, suggested_layout


def test_width_packed_texture():
    spec = TensorSpec((1, 7, 64), "float32", "texture3d", "width")
    assert spec.padded_sizes == [1, 1, 7, 64]
    assert spec.dim_order == [0, 1, 2] and spec.strides == [112, 16, 1]
    assert spec.extents == (16, 7, 1) and spec.logical_limits == (16, 7, 1)
    assert spec.hashed_layout == 0 + (1 << 4) + (2 << 8) + (2 << 12) + (1 << 20) + (4 << 24) + (1 << 28)


def test_width_packed_buffer_hash_is_the_one_et_vk_passes():
    """286274064 is the spec constant ``nchw_to_buffer`` got for a width-packed buffer in a real run."""
    spec = TensorSpec((7, 64), "float32", "buffer", "width")
    assert spec.hashed_layout == 286274064
    assert spec.physical_numel == 7 * 64 and spec.strides == [64, 1]


def test_channels_packed_texture_pads_channels_and_stacks_batches_along_z():
    spec = TensorSpec((2, 3, 5, 6), "float32", "texture3d", "channels")
    assert spec.padded_sizes == [2, 4, 5, 6]
    assert spec.extents == (6, 5, 2)
    assert spec.dim_order == [0, 2, 3, 1]


def test_int8x4_4h4w_buffer_counts_words_and_pads_both_packed_dims():
    spec = TensorSpec((7, 64), "int8x4", "buffer", "int8x4_4h4w")
    assert spec.padded_sizes == [1, 1, 8, 64]
    assert spec.physical_numel == 8 * 64 // 4 and spec.element_dtype == np.int32
    assert spec.strides == [16, 1]


def test_metadata_blocks_have_the_glsl_struct_sizes_and_order():
    spec = TensorSpec((7, 64), "float32", "buffer", "width")
    words = np.frombuffer(spec.buffer_metadata(), np.uint32)
    assert words.size == 26
    assert list(words[:8]) == [64, 7, 1, 1, 1, 1, 1, 1]
    assert list(words[8:16]) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert list(words[24:]) == [2, 7 * 64]
    tex = np.frombuffer(TensorSpec((1, 7, 64), "float32", "texture3d", "width").texture_metadata(), np.int32)
    assert list(tex) == [64, 7, 1, 1, 16, 7, 1, 1, 0, 1, 2, 2, 0]


@pytest.mark.parametrize("values, kind, expected", [
    ([2, 3, 4], "sizes", [4, 3, 2, 1]),
    ([12, 4, 1], "strides", [1, 4, 12, 24]),
    ([0, 1, 2], "dim_order", [0, 1, 2, 3]),
])
def test_flip_and_unsqueeze(values, kind, expected):
    assert flip_and_unsqueeze(values, kind, 24) == expected


def test_suggested_layout():
    assert suggested_layout([7, 64]) == "width"
    assert suggested_layout([1, 1, 7, 64]) == "width"
    assert suggested_layout([1, 3, 7, 64]) == "channels"
