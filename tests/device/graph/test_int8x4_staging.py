"""int8 tensors in ET-VK's packed int8x4 layouts, in and out through the tree's own staging shaders
(``nchw_to_int8x4_buffer``, ``int8x4_buffer_to_nchw``), checked word by word against the numpy layouts of
``vkdiff.reference.quantized.int8x4``."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.device.runtime import resources
from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import graph_input, read_nchw
from vkdiff.reference.quantized import int8x4

pytestmark = [requires_tree, requires_vulkan]

SIZES = [(2, 5, 3, 7), (1, 3, 1, 5), (3, 9), (6,), (1, 8, 4, 8)]
"""Channels and widths not a multiple of 4, ranks 1 to 4, and one shape with whole blocks."""


def _data(sizes: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(repr(sizes).encode()))
    data = rng.integers(-128, 128, sizes, dtype=np.int16).astype(np.int8)
    data.reshape(-1)[:2] = (-128, 127)
    return data


@pytest.mark.parametrize("layout", sorted(int8x4.LAYOUTS))
@pytest.mark.parametrize("sizes", SIZES, ids=str)
def test_each_byte_lands_where_the_numpy_layout_puts_it_and_comes_back(et_ctx, layout, sizes):
    data = _data(sizes)
    graph = ComputeGraph(et_ctx)
    tensor = graph_input(graph, data, "buffer", f"int8x4_{layout}")
    back = read_nchw(graph, tensor)
    graph.execute()
    assert tensor.spec.dtype == "int8x4" and tensor.spec.physical_numel == int8x4.words(sizes, layout)
    raw = resources.read_raw(graph.device, tensor).reshape(-1)[: int8x4.words(sizes, layout)]
    np.testing.assert_array_equal(int8x4.unpack(raw, sizes, layout), data)
    word, lane = int8x4.word_and_byte(sizes, layout)
    np.testing.assert_array_equal(raw.view(np.int8).reshape(-1, 4)[word, lane], int8x4.pack(data, layout).view(
        np.int8).reshape(-1, 4)[word, lane])
    np.testing.assert_array_equal(back.get(), data)
    assert [d.shader for d in graph.dispatches] == ["nchw_to_int8x4_buffer", "int8x4_buffer_to_nchw"]


def test_a_resized_input_is_staged_and_read_at_its_new_sizes(et_ctx):
    graph = ComputeGraph(et_ctx)
    tensor = graph_input(graph, _data((2, 5, 3, 7)), "buffer", "int8x4_4w4c")
    back = read_nchw(graph, tensor)
    graph.execute()
    smaller = _data((1, 3, 2, 5))
    graph.virtual_resize(tensor, smaller.shape)
    graph.input_stagings[id(tensor)].copy_in(smaller)
    graph.propagate_resize()
    graph.execute()
    np.testing.assert_array_equal(back.get(), smaller)


def test_more_than_four_dims_is_ET_VKs_refusal(et_ctx):
    with pytest.raises(EtVkRefusal, match="at most 4 dims"):
        graph_input(ComputeGraph(et_ctx), np.ones((1, 2, 1, 3, 4), np.int8), "buffer", "int8x4_4w")
