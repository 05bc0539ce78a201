"""The tiny Llama's glue ops (``Embedding.cpp``, ``Slice.cpp``, ``Select.cpp``, ``prepack_op``) under dynamic shapes.

Each graph is built once at its maximal sizes and executed several times, resizing inputs and
setting SymInts between executions as ET-VK's runtime does (``set_symint``, ``propagate_resize``,
``execute``). Every dynamic test has a companion that shows the check can fail: a value resolved
once at build (a SymInt read as an int, a negative index normalized at the maximal size) gives
rows that differ from the reference after the change.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.device.runtime import resources
from vkdiff.device.graph import ComputeGraph, SymInt, TensorRef
from vkdiff.device.graph.staging import add_input_staging, read_nchw
from vkdiff.device.launchers.embedding import embedding
from vkdiff.device.launchers.staging import prepack
from vkdiff.device.launchers.select import select_copy
from vkdiff.device.launchers.slice import slice_copy
from vkdiff.device.runtime.layouts import unwritten_mask

pytestmark = [requires_tree, requires_vulkan]

STORAGES = ("buffer", "texture3d")
MAX_T, DIM, CONTEXT, ROPE_DIM = 31, 64, 32, 8
"""The tiny Llama: up to 31 tokens, hidden size 64, a 32-position RoPE table of 8 columns."""
POSITIONS = ((0, 7), (7, 1), (12, 3), (5, 1))
"""(input_pos, T) of each execution: a prefill, decode steps, and a step back."""


def _rope_table(rng) -> np.ndarray:
    return rng.standard_normal((CONTEXT, ROPE_DIM)).astype(np.float32)


def _sliced_table(ctx, storage: str, table: np.ndarray, start, end):
    """The RoPE table prepacked (``et_vk.prepack``) and sliced along dim 0 from ``start`` to ``end``."""
    graph = ComputeGraph(ctx)
    freqs = graph.add_tensor(table.shape, "float32", storage, label="freqs")
    prepack(graph, {"x": TensorRef(id=55, data=table)}, freqs)
    out = graph.add_tensor((MAX_T, ROPE_DIM), "float32", storage, label="freqs_slice")
    slice_copy(graph, {"self": freqs, "dim": 0, "start": start, "end": end, "step": 1}, out)
    return graph, read_nchw(graph, out)


def _run(graph: ComputeGraph, pos: SymInt, end: SymInt, input_pos: int, tokens: int) -> None:
    graph.set_symint(pos, input_pos)
    graph.set_symint(end, input_pos + tokens)
    graph.propagate_resize()
    graph.execute()


@pytest.mark.parametrize("storage", STORAGES)
def test_slice_follows_symint_start_and_end(et_ctx, storage):
    """``slice_ubo_*`` reads start from the SymInt's buffer; the resize re-reads start and end each time."""
    table = _rope_table(np.random.default_rng(5))
    pos, end = SymInt(0), SymInt(0)
    graph, back = _sliced_table(et_ctx, storage, table, pos, end)
    for input_pos, tokens in POSITIONS:
        _run(graph, pos, end, input_pos, tokens)
        got = back.get()
        assert got.shape == (tokens, ROPE_DIM) and not unwritten_mask(got).any()
        np.testing.assert_array_equal(got, table[input_pos:input_pos + tokens])
    assert [d.shader for d in graph.dispatches if d.prepack] == [
        "nchw_to_buffer_float_float" if storage == "buffer" else "nchw_to_image_texture3d_float_float"]
    assert f"slice_ubo_{storage}_float" in [d.shader for d in graph.dispatches]


@pytest.mark.parametrize("storage", STORAGES)
def test_slice_with_start_read_once_at_build_is_stale(et_ctx, storage):
    """Companion: start read once at build (``slice_*`` push constants): rows 0..15 instead of 12..15 at ``input_pos`` 12."""
    table = _rope_table(np.random.default_rng(5))
    pos, end = SymInt(0), SymInt(0)
    graph, back = _sliced_table(et_ctx, storage, table, ComputeGraph.read_symint(pos), end)
    _run(graph, pos, end, 12, 3)
    got = back.get()
    assert f"slice_{storage}_float" in [d.shader for d in graph.dispatches]
    assert got.shape == (15, ROPE_DIM) and not np.array_equal(got[:3], table[12:15])
    np.testing.assert_array_equal(got, table[:15])


def _select_graph(ctx, storage: str, index):
    graph = ComputeGraph(ctx)
    x = graph.add_tensor((1, MAX_T, DIM), "float32", storage, label="hidden")
    stage = add_input_staging(graph, x)
    out = graph.add_tensor((1, DIM), "float32", storage, label="last_token")
    select_copy(graph, {"self": x, "dim": 1, "index": index}, out)
    return graph, x, stage, read_nchw(graph, out)


def _resize_and_run(graph: ComputeGraph, x, stage, array: np.ndarray) -> None:
    graph.virtual_resize(x, array.shape)
    graph.mark_updated(stage)
    stage.copy_in(array)
    graph.propagate_resize()
    graph.execute()


@pytest.mark.parametrize("storage", STORAGES)
def test_select_last_row_moves_with_the_input_size(et_ctx, storage):
    """``index=-1`` is pushed as is; the shader adds the input's current size: T = 31, 7, 1 pick rows 30, 6, 0."""
    rng = np.random.default_rng(9)
    graph, x, stage, back = _select_graph(et_ctx, storage, -1)
    for tokens in (MAX_T, 7, 1):
        hidden = rng.standard_normal((1, tokens, DIM)).astype(np.float32)
        _resize_and_run(graph, x, stage, hidden)
        got = back.get()
        assert got.shape == (1, DIM) and not unwritten_mask(got).any()
        np.testing.assert_array_equal(got, hidden[:, -1])
    assert f"select_{storage}_float" in [d.shader for d in graph.dispatches]


@pytest.mark.parametrize("storage", STORAGES)
def test_select_index_normalized_at_build_is_stale(et_ctx, storage):
    """Companion: ``-1`` normalized at the maximal size (30) still reads row 30, left over from the T = 31 run."""
    rng = np.random.default_rng(9)
    graph, x, stage, back = _select_graph(et_ctx, storage, MAX_T - 1)
    first = rng.standard_normal((1, MAX_T, DIM)).astype(np.float32)
    _resize_and_run(graph, x, stage, first)
    second = rng.standard_normal((1, 7, DIM)).astype(np.float32)
    _resize_and_run(graph, x, stage, second)
    got = back.get()
    assert not np.array_equal(got, second[:, -1])
    np.testing.assert_array_equal(got, first[:, -1])


def _embedding_graph(ctx, storage: str, table: np.ndarray):
    graph = ComputeGraph(ctx)
    tokens = graph.add_tensor((1, MAX_T), "int32", storage, label="tokens")
    stage = add_input_staging(graph, tokens)
    out = graph.add_tensor((1, MAX_T, table.shape[1]), "float32", storage, label="embeddings")
    embedding(graph, {"weight": TensorRef(id=15, data=table), "indices": tokens, "padding_idx": -1,
                      "scale_grad_by_freq": False, "sparse": False}, out)
    return graph, tokens, stage, read_nchw(graph, out)


@pytest.mark.parametrize("storage", STORAGES)
def test_embedding_output_follows_the_token_count(et_ctx, storage):
    """``resize_embedding_node``: ``[1, T] → [1, T, 64]``; the table is a buffer whatever the tokens' storage."""
    rng = np.random.default_rng(4)
    table = rng.standard_normal((256, DIM)).astype(np.float32)
    graph, tokens, stage, back = _embedding_graph(et_ctx, storage, table)
    for count in (MAX_T, 7, 1):
        ids = rng.integers(0, 256, (1, count)).astype(np.int32)
        ids[0, 0] = 255
        _resize_and_run(graph, tokens, stage, ids)
        got = back.get()
        assert got.shape == (1, count, DIM) and not unwritten_mask(got).any()
        np.testing.assert_array_equal(got, table[ids])
    assert [d.shader for d in graph.dispatches if d.prepack] == ["nchw_to_buffer_float_float"]
    assert f"embedding_{storage}_float" in [d.shader for d in graph.dispatches]


def test_embedding_legacy_path_for_channels_packed_texture_indices(et_ctx):
    """Channels-packed texture indices take ``embedding_legacy_*`` with a height-packed texture2d table."""
    rng = np.random.default_rng(6)
    table = rng.standard_normal((10, 9)).astype(np.float32)
    ids = np.array([[0, 2], [1, 4], [7, 9]], np.int32)
    graph = ComputeGraph(et_ctx)
    tokens = graph.add_tensor(ids.shape, "int32", "texture3d", "channels", label="tokens")
    add_input_staging(graph, tokens).copy_in(ids)
    out = graph.add_tensor((*ids.shape, 9), "float32", "texture3d", "channels", label="embeddings")
    embedding(graph, {"weight": TensorRef(id=1, data=table), "indices": tokens}, out)
    back = read_nchw(graph, out)
    graph.execute()
    np.testing.assert_array_equal(back.get(), table[ids])
    shaders = [d.shader for d in graph.dispatches]
    assert "nchw_to_image_texture2d_float_float" in shaders and "embedding_legacy_float" in shaders


def test_embedding_legacy_path_checks_the_output_layout(et_ctx):
    graph = ComputeGraph(et_ctx)
    tokens = graph.add_tensor((3, 2), "int32", "texture3d", "channels")
    out = graph.add_tensor((3, 2, 9), "float32", "texture3d", "width")
    table = TensorRef(id=1, data=np.arange(90, dtype=np.float32).reshape(10, 9))
    with pytest.raises(ValueError, match=r"must be \(height, channels, channels\).*got WHCN \(1, 2, 0\)"):
        embedding(graph, {"weight": table, "indices": tokens}, out)


def test_height_packed_texture_output_shifts_rows_as_in_issue_22333(et_ctx):
    """ExecuTorch #22333 reproduced: ``add_embedding_node`` does not check the output's packed dim.

    ``embedding_texture3d`` looks up one index per texel and stores four consecutive table
    elements; in a height-packed output a texel holds rows ``4y .. 4y + 3`` of one column, so
    row ``4y + k`` gets row ``4y``'s entry shifted by ``k``.
    """
    rng = np.random.default_rng(8)
    table = rng.standard_normal((300, 16)).astype(np.float32)
    ids = rng.integers(0, 300, (1, 8)).astype(np.int32)
    graph = ComputeGraph(et_ctx)
    tokens = graph.add_tensor(ids.shape, "int32", "texture3d", "width", label="tokens")
    add_input_staging(graph, tokens).copy_in(ids)
    out = graph.add_tensor((1, 8, 16), "float32", "texture3d", "height", label="embeddings")
    embedding(graph, {"weight": TensorRef(id=1, data=table), "indices": tokens}, out)
    back = read_nchw(graph, out)
    graph.execute()
    got = back.get()[0]
    assert not np.array_equal(got, table[ids[0]])
    for row in range(8):
        first = table[ids[0, row - row % 4]]
        shift = row % 4
        np.testing.assert_array_equal(got[row, :16 - shift], first[shift:])


def _int8x4_words(data: np.ndarray, layout: str) -> np.ndarray:
    """Independent packing: four int8 along W (``int8x4_4w``) or C (``int8x4_4c``) per little-endian int32."""
    n, c, h, w = data.shape
    if layout == "int8x4_4w":
        padded = np.zeros((n, c, h, -(-w // 4) * 4), np.int8)
        padded[..., :w] = data
    else:
        padded = np.zeros((n, h, w, -(-c // 4) * 4), np.int8)
        padded[..., :c] = data.transpose(0, 2, 3, 1)
    return np.ascontiguousarray(padded).reshape(-1).view("<i4")


@pytest.mark.parametrize("layout", ("int8x4_4w", "int8x4_4c"))
def test_prepack_into_int8x4_buffer(et_ctx, layout):
    """``add_prepack_int8x4_buffer_node``: ``nchw_to_int8x4_buffer`` packs four int8 per int32 along the packed dim."""
    data = np.random.default_rng(2).integers(-128, 128, (2, 5, 3, 7)).astype(np.int8)
    graph = ComputeGraph(et_ctx)
    out = graph.add_tensor(data.shape, "int8x4", "buffer", layout, label="packed")
    prepack(graph, {"x": TensorRef(id=3, data=data)}, out)
    words = resources.read(graph.device, out).reshape(-1)
    expected = _int8x4_words(data, layout)
    np.testing.assert_array_equal(words[:expected.size], expected)
    assert [d.shader for d in graph.dispatches] == ["nchw_to_int8x4_buffer"]
    assert graph.dispatches[0].global_wg == (out.spec.padded_numel // 4, 1, 1)


@pytest.mark.parametrize("storage", STORAGES)
def test_prepack_copies_the_constant_into_the_output(et_ctx, storage):
    table = _rope_table(np.random.default_rng(1)).astype(np.float16)
    graph = ComputeGraph(et_ctx)
    out = graph.add_tensor(table.shape, "float16", storage, label="freqs")
    prepack(graph, {"x": TensorRef(id=7, data=table)}, out)
    back = read_nchw(graph, out)
    graph.execute()
    np.testing.assert_array_equal(back.get(), table)
    assert graph.dispatches[0].prepack and graph.dispatches[0].shader.endswith("_half_half")
