"""``SDPA.cpp``'s LLM path (``sdpa_with_kv_cache``, ``update_cache``) run as a generation on the pinned main tree.

A tiny Llama attention (4 query heads over 2 kv heads, head dim 16, cache of 32) is built
once at its maximal sizes, then executed as a prefill of 7 tokens and 4 decode steps,
resizing the inputs and setting ``input_pos`` between executions, as ET-VK's runtime does.

The attention-weight (``sdpa_compute_attn_weights_*``) and softmax shaders hold ``-1.0 / 0.0``,
which naga refuses ("Float literal is infinite", ``BUILD_FAIL``): the tests that execute them
are strict expectations of that load failure, and pass once vkdiff loads such modules.
"""

from __future__ import annotations

import dataclasses
import types

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.datamodel import Tolerance
from vkdiff.device.graph import ComputeGraph, SymInt, TensorRef
from vkdiff.device.graph.staging import InputStaging, Readback, add_input_staging, read_nchw
from vkdiff.device.launchers.sdpa import attn_weight_full_sizes, sdpa_with_kv_cache, update_cache
from vkdiff.device.runtime.layouts import unwritten_mask
from vkdiff.device.runtime.resources import Tensor
from vkdiff.device.runtime.routing import route_for
from vkdiff.reference.tensor.llm import sdpa_with_kv_cache as reference_sdpa
from vkdiff.verdicts.compare import assert_within

pytestmark = [requires_tree, requires_vulkan]

HEADS, KV_HEADS, HEAD_DIM, MAX_SEQ, MAX_CONTEXT = 4, 2, 16, 31, 32
STEPS = ((7, 0), (1, 7), (1, 8), (1, 9), (1, 10))
"""(tokens, input_pos) of each execution: a prefill, then four decode steps."""
DTYPES = ("float32", "float16")



@dataclasses.dataclass(kw_only=True)
class Generation:
    """One sdpa_with_kv_cache graph and the host reference carrying its own caches."""

    graph: ComputeGraph
    inputs: tuple[Tensor, Tensor, Tensor]
    stages: tuple[InputStaging, InputStaging, InputStaging]
    pos: SymInt
    out: Readback
    caches: tuple[Readback, Readback]
    ref_caches: tuple[np.ndarray, np.ndarray]
    dtype: str


def build(ctx, dtype: str = "float32", route: str = "native", kv_heads: int = KV_HEADS,
          storage: str = "texture3d") -> Generation:
    """The graph at its maximal sizes (q ``[1, 31, 4, 16]``), width-packed inputs, ``input_pos`` 0."""
    graph = ComputeGraph(ctx, route_for(route, ctx.info))
    shapes = ((1, MAX_SEQ, HEADS, HEAD_DIM), (1, MAX_SEQ, kv_heads, HEAD_DIM), (1, MAX_SEQ, kv_heads, HEAD_DIM))
    inputs = tuple(graph.add_tensor(s, dtype, storage, label=n) for s, n in zip(shapes, "qkv"))
    stages = tuple(add_input_staging(graph, t) for t in inputs)
    pos = SymInt(0)
    rng = np.random.default_rng(3)
    refs = tuple(TensorRef(id=name, data=rng.standard_normal((1, MAX_CONTEXT, kv_heads, HEAD_DIM)).astype(dtype))
                 for name in ("k_cache", "v_cache"))
    out = graph.add_tensor(shapes[0], dtype, storage, label="out")
    sdpa_with_kv_cache(graph, {"query": inputs[0], "key": inputs[1], "value": inputs[2], "key_cache": refs[0],
                               "value_cache": refs[1], "start_pos": pos, "seq_len": MAX_SEQ, "attn_mask": None,
                               "drpout_p": 0.0, "is_causal": True, "scale": None}, out)
    return Generation(graph=graph, inputs=inputs, stages=stages, pos=pos, out=read_nchw(graph, out),
                      caches=tuple(read_nchw(graph, graph.states[r.id]) for r in refs),
                      ref_caches=tuple(np.zeros(r.data.shape) for r in refs), dtype=dtype)


def step(gen: Generation, tokens: int, input_pos: int, rng, advance: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """One execution (resize inputs, set ``input_pos`` unless ``advance`` is off): device output and reference."""
    data = [rng.standard_normal((1, tokens) + tuple(t.allocated.sizes[2:])).astype(gen.dtype) for t in gen.inputs]
    for tensor, stage, array in zip(gen.inputs, gen.stages, data):
        gen.graph.virtual_resize(tensor, array.shape)
        gen.graph.mark_updated(stage)
        stage.copy_in(array)
    if advance:
        gen.graph.set_symint(gen.pos, input_pos)
    gen.graph.propagate_resize()
    gen.graph.execute()
    expected = reference_sdpa(*data, *gen.ref_caches, input_pos, is_causal=True)
    return gen.out.get(), expected


def av_magnitude(gen: Generation, tokens: int, input_pos: int) -> np.ndarray:
    """Bound on ``sum_t p_t |v_t|`` per output element: the largest ``|v|`` over the context, per kv head and dim."""
    peak = np.abs(gen.ref_caches[1][:, :input_pos + tokens]).max(axis=1, keepdims=True)
    return np.broadcast_to(np.repeat(peak, HEADS // peak.shape[2], axis=2), (1, tokens, HEADS, HEAD_DIM))


@pytest.mark.parametrize("dtype, storage", [("float32", "texture3d"), ("float16", "texture3d"), ("float32", "buffer")])
def test_generation_matches_reference(et_ctx, dtype, storage):
    """Every step's output (and the written cache rows) match the reference; nothing unwritten, no NaN."""
    gen = build(et_ctx, dtype, storage=storage)
    rng = np.random.default_rng(17 + DTYPES.index(dtype))
    for tokens, input_pos in STEPS:
        actual, expected = step(gen, tokens, input_pos, rng)
        assert actual.shape == expected.shape and np.isfinite(actual).all()
        assert_within(actual, expected, Tolerance.for_dtype(dtype), av_magnitude(gen, tokens, input_pos))
        for back, ref in zip(gen.caches, gen.ref_caches):
            written = input_pos + tokens
            np.testing.assert_array_equal(back.get()[:, :written], ref[:, :written].astype(dtype))


def test_input_pos_not_advanced_differs_at_first_decode(et_ctx):
    """Without ``set_symint`` the decode step writes and attends at position 0: far off the reference."""
    gen = build(et_ctx)
    rng = np.random.default_rng(23)
    actual, expected = step(gen, *STEPS[0], rng)
    assert_within(actual, expected, Tolerance.for_dtype("float32"))
    actual, expected = step(gen, *STEPS[1], rng, advance=False)
    assert np.abs(actual - expected).max() > 1e-2


@pytest.mark.parametrize("route, kv_heads, variant", [
    ("native", KV_HEADS, "sdpa_compute_out_gqa_coop_texture3d_texture3d_float"),
    ("adreno", KV_HEADS, "sdpa_compute_out_gqa_coop_tile2_texture3d_texture3d_float"),
    ("native", HEADS, "sdpa_compute_out_coop_texture3d_texture3d_float"),
])
def test_decode_output_variant(et_ctx, route, kv_heads, variant):
    """The decode AV shader by heads and vendor (GQA reuse, Adreno's tile2, per-head coop) matches the reference."""
    gen = build(et_ctx, route=route, kv_heads=kv_heads)
    rng = np.random.default_rng(29)
    for tokens, input_pos in STEPS[:2]:
        actual, expected = step(gen, tokens, input_pos, rng)
        assert_within(actual, expected, Tolerance.for_dtype("float32"))
    assert variant in [d.shader for d in gen.graph.dispatches]


def _picked(graph: ComputeGraph) -> list[tuple[str, tuple, tuple]]:
    return [node.picked for node in graph.execute_nodes if node.picked and node.picked[0].startswith("sdpa_")]


def test_picks_follow_input_pos(et_ctx):
    """Shaders, workgroup sizes and attention-weight sizes re-picked from S and ``input_pos`` (no execution).

    Worked example (D 16, Hq 4, Hkv 2): prefill S 7 at 0 tiles ``(div_up_4(7), div_up_4(7), 4)``; decode at 8
    has context 9, so the attention weights are ``[1, 4, 4, 12]`` and the coop QK spans 3 texels.
    """
    gen = build(et_ctx)
    expected = {
        (7, 0): [("sdpa_kv_cache_update_texture3d_texture3d_float", (4, 7, 2), (4, 8, 2))] * 2 + [
            ("sdpa_compute_attn_weights_tiled_texture3d_texture3d_float", (2, 2, 4), (4, 16, 1)),
            ("sdpa_attn_weights_softmax_texture3d_float", (1, 7, 4), (64, 1, 1)),
            ("sdpa_compute_out_tiled_texture3d_texture3d_float", (4, 2, 4), (4, 16, 1))],
        (1, 8): [("sdpa_kv_cache_update_texture3d_texture3d_float", (4, 1, 2), (32, 1, 2))] * 2 + [
            ("sdpa_compute_attn_weights_coop_texture3d_texture3d_float", (3, 1, 4), (1, 64, 1)),
            ("sdpa_attn_weights_softmax_texture3d_float", (1, 1, 4), (64, 1, 1)),
            ("sdpa_compute_out_gqa_coop_texture3d_texture3d_float", (4, 1, 2), (1, 64, 1))],
    }
    attn = {(7, 0): (1, 4, 8, 8), (1, 7): (1, 4, 4, 8), (1, 8): (1, 4, 4, 12)}
    weights = _attn_temporaries(gen.graph)
    assert [t.spec.sizes for t in weights] == [(1, HEADS, 32, 32)] * 2
    for tokens, input_pos in STEPS[:3]:
        for tensor, stage in zip(gen.inputs, gen.stages):
            gen.graph.virtual_resize(tensor, (1, tokens) + tuple(tensor.allocated.sizes[2:]))
            gen.graph.mark_updated(stage)
        gen.graph.set_symint(gen.pos, input_pos)
        gen.graph.propagate_resize()
        gen.graph._updated.clear()  # what execute() ends with, without dispatching
        if (tokens, input_pos) in expected:
            assert _picked(gen.graph) == expected[(tokens, input_pos)]
        assert [t.spec.sizes for t in weights] == [attn[(tokens, input_pos)]] * 2
    av = [n for n in gen.graph.execute_nodes if n.picked and n.picked[0].startswith("sdpa_compute_out")]
    assert [n.spec for n in av] == [{3: 1.0, 4: HEADS // KV_HEADS}]


def _attn_temporaries(graph: ComputeGraph) -> list[Tensor]:
    """The attention weights and their softmax: the tensors written by the QK and softmax nodes."""
    return [n.resources[0] for n in graph.execute_nodes
            if n.picked and n.picked[0].startswith(("sdpa_compute_attn_weights", "sdpa_attn_weights_softmax"))]


def test_caches_are_new_poisoned_tensors_bound_as_state(et_ctx):
    """``add_tensor_like``: the caches take the constant's sizes and q's storage, never its data."""
    gen = build(et_ctx)
    for name in ("k_cache", "v_cache"):
        cache = gen.graph.states[name]
        assert cache.spec.sizes == (1, MAX_CONTEXT, KV_HEADS, HEAD_DIM)
        assert (cache.spec.storage, cache.spec.layout, cache.spec.dtype) == ("texture3d", "width", "float32")
        assert unwritten_mask(gen.graph.read(cache)).all()


@pytest.mark.parametrize("storage", ("texture3d", "buffer"))
def test_update_cache_writes_at_start_pos(et_ctx, storage):
    """``update_cache``: each step's value lands at ``input_pos``; rows never written keep the poison.

    The prefill's workgroups (local y 8 over S 7) also write row 7, with zeros: the shader bounds-checks
    ``c < C`` but not ``s < S``, so the tail of the last workgroup stores ``IN_VEC4_T(0)`` past the tokens.
    """
    graph = ComputeGraph(et_ctx)
    value = graph.add_tensor((1, MAX_SEQ, KV_HEADS, HEAD_DIM), "float32", storage, label="value")
    stage = add_input_staging(graph, value)
    cache = graph.add_tensor((1, MAX_CONTEXT, KV_HEADS, HEAD_DIM), "float32", storage, label="cache")
    pos = SymInt(0)
    update_cache(graph, {"value": value, "cache": cache, "start_pos": pos}, graph.add_tensor((1,), "float32", storage))
    back = read_nchw(graph, cache)
    rng, ref = np.random.default_rng(31), np.full((1, MAX_CONTEXT, KV_HEADS, HEAD_DIM), np.nan)
    for tokens, input_pos in STEPS:
        data = rng.standard_normal((1, tokens, KV_HEADS, HEAD_DIM)).astype(np.float32)
        graph.virtual_resize(value, data.shape)
        graph.mark_updated(stage)
        stage.copy_in(data)
        graph.set_symint(pos, input_pos)
        graph.propagate_resize()
        graph.execute()
        tail = next(d.local_wg[1] for d in graph.dispatches if d.shader.startswith("sdpa_kv_cache_update"))
        ref[:, input_pos + tokens:input_pos + -(-tokens // tail) * tail] = 0.0
        ref[:, input_pos:input_pos + tokens] = data
        np.testing.assert_array_equal(back.get(), ref.astype(np.float32))


def test_attn_weights_clamped_under_buffer_limit():
    """Buffer attention weights: max S shrinks (to a multiple of 4) so the padded allocation stays under the limit."""
    def tensor(sizes, storage="buffer"):
        return types.SimpleNamespace(spec=types.SimpleNamespace(sizes=sizes, storage=storage))

    def graph(limit):
        return types.SimpleNamespace(ctx=types.SimpleNamespace(info=types.SimpleNamespace(
            limits={"max-storage-buffer-binding-size": limit})))

    q, k = tensor((1, 2047, 32, 64)), tensor((1, 2048, 8, 64))
    assert attn_weight_full_sizes(graph(1 << 30), q, k) == (1, 32, 2048, 2048)
    assert attn_weight_full_sizes(graph(32 * 2048 * 2048), q, k) == (1, 32, 2044, 2048)
    assert attn_weight_full_sizes(graph(32 * 2048 * 1030), q, k) == (1, 32, 1028, 2048)
    assert attn_weight_full_sizes(graph(32 * 2048 * 1030), tensor((1, 2047, 32, 64), "texture3d"), k) == (
        1, 32, 2048, 2048)
