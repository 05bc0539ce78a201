"""Data in and out of graph tensors through the pinned tree's own staging shaders, on the first adapter."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.device.runtime import layouts
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import element_index, graph_input, read_nchw, tensor_to_nchw_shader
from vkdiff.device.runtime.routing import route_for

pytestmark = [requires_tree, requires_vulkan]

PLACEMENTS = [
    ((1, 7, 64), "float32", "texture3d", "width"),
    ((1, 7, 64), "float32", "buffer", "width"),
    ((3, 5, 6), "float16", "texture3d", "width"),
    ((2, 3, 5, 6), "float32", "texture3d", "channels"),
    ((2, 5, 7), "float32", "texture3d", "height"),
    ((1, 6), "int32", "texture3d", "width"),
    ((7, 1), "int8", "texture3d", "width"),
]


@pytest.mark.parametrize("route", ["native", "mali"])
@pytest.mark.parametrize("shape, dtype, storage, layout", PLACEMENTS, ids=lambda v: str(v))
def test_round_trip_is_exact(et_ctx, route, shape, dtype, storage, layout):
    rng = np.random.default_rng(zlib.crc32(repr((shape, dtype, layout)).encode()))
    data = (rng.standard_normal(shape) * 50).astype(dtype)
    graph = ComputeGraph(et_ctx, route_for(route, et_ctx.info))
    tensor = graph_input(graph, data, storage, layout)
    back = read_nchw(graph, tensor)
    graph.execute()
    back = back.get()
    np.testing.assert_array_equal(back.astype(dtype), data)
    assert graph.dispatches[0].shader.startswith("nchw_to_")


def test_width_packed_texels_are_what_numpy_packs(et_ctx):
    """``nchw_to_image`` writes the texels ``layouts.to_texels`` computes (read raw, no shader in between)."""
    data = np.arange(3 * 5 * 7, dtype=np.float32).reshape(3, 5, 7)
    graph = ComputeGraph(et_ctx)
    tensor = graph_input(graph, data, "texture3d", "width")
    graph.execute()
    np.testing.assert_array_equal(graph.read(tensor), data)


@pytest.mark.parametrize("storage", ["texture3d", "buffer"])
@pytest.mark.parametrize("layout", ["channels", "height"])
def test_a_raw_read_through_the_element_index_gives_the_data_and_keeps_the_poison(et_ctx, storage, layout):
    """How kernel cases read non-width-packed outputs: raw storage, no shader in between."""
    data = (np.arange(2 * 5 * 6 * 7, dtype=np.float32).reshape(2, 5, 6, 7) - 100) / 8
    graph = ComputeGraph(et_ctx)
    tensor = graph_input(graph, data, storage, layout)
    fresh = graph.add_tensor(data.shape, "float32", storage, layout)
    graph.execute()
    index = element_index(graph, tensor)
    width = element_index(graph, graph.add_tensor(data.shape, "float32", storage, "width"))
    assert not np.array_equal(index, width), "the layout did not change where elements live"
    np.testing.assert_array_equal(graph.read(tensor, index), data)
    assert layouts.unwritten_mask(graph.read(fresh, index)).all()


def test_integrated_routes_read_without_coalescing(et_ctx):
    graph = ComputeGraph(et_ctx, route_for("adreno", et_ctx.info))
    tensor = graph.add_tensor((4, 8), "float32", "texture3d")
    assert tensor_to_nchw_shader(graph, tensor.spec, "float32") == "image_to_nchw_texture3d_float_float"
    discrete = ComputeGraph(et_ctx, route_for("amd-coopmat", et_ctx.info))
    assert tensor_to_nchw_shader(discrete, tensor.spec, "float32") == "image_to_nchw_coalesced_texture3d_float_float"
