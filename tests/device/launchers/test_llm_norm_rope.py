"""``RmsNorm.cpp`` and ``RotaryEmbedding.cpp`` on the pinned main tree: kernel cases and dynamic sequence lengths."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.cases.kernels import all_cases
from vkdiff.datamodel import Status
from vkdiff.device.graph import ComputeGraph, SymInt, TensorRef
from vkdiff.device.graph.staging import add_input_staging, read_nchw
from vkdiff.executors.op_graph import run_op
from vkdiff.device.launchers.rms_norm import rms_norm
from vkdiff.device.launchers.rotary_embedding import apply_rotary_emb, apply_rotary_emb_hf
from vkdiff.device.runtime.layouts import unwritten_mask
from vkdiff.executors import references
from vkdiff.executors import kernel as executor
from vkdiff.harness import kernels
from vkdiff.reference.tensor import llm
from vkdiff.verdicts import expectations

pytestmark = [requires_tree, requires_vulkan]

CASES = all_cases(r"^(rms_norm|apply_rotary_emb|apply_rotary_emb_hf)\[")

MAX_T = 31
"""The tiny Llama delegate's maximal sequence length."""


def _shader(case) -> str:
    stem = {"rms_norm": "rms_norm", "apply_rotary_emb": "rotary_embedding",
            "apply_rotary_emb_hf": "rotary_embedding_hf"}[case.name]
    return f"{stem}_{case.storage}_{'half' if case.dtype == 'fp16' else 'float'}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_case_passes_or_is_a_known_bug(et_ctx, case):
    """PASS with every element written, or the failure an ``expectations.yaml`` entry explains (never a fixed one)."""
    result = expectations.annotate(kernels.run_case(et_ctx, case))
    assert not expectations.counts_as_failure(result), result.reason
    assert result.shader == _shader(case)
    if result.status == Status.PASS.name:
        outputs = result.metrics.get("outputs") or [result.metrics]
        assert all(o["unwritten"] == 0 for o in outputs)


def test_suite_covers_the_tiny_llama_shapes_and_both_dtypes_and_storages():
    ids = {c.id for c in CASES}
    assert len(ids) == len(CASES) == 4 * (7 + 5 + 5)
    assert {"rms_norm[B1-T7-W64-fp32-texture3d]", "rms_norm[T1-W64-fp16-buffer]",
            "apply_rotary_emb[T1-Hq4-Hkv2-D16-fp32-texture3d]",
            "apply_rotary_emb_hf[T7-Hq4-Hkv2-D16-R8-P5-fp16-texture3d]"} <= ids
    known = [e.case for e in expectations.load() if re.search(r"rotary|rms_norm", e.case)]
    assert known and all(any(re.search(pattern, i) for i in ids) for pattern in known)


def test_rotary_buffer_half_computes_in_half(et_ctx):
    """``VEC4_T`` is ``f16vec4`` on buffers: each product and sum rounds to float16, bit for bit."""
    (case,) = all_cases(r"^apply_rotary_emb\[T7-Hq8-Hkv2-D128-fp16-buffer\]$")
    prepared = references.prepare_case(case)
    launched = executor.launch(et_ctx, case, prepared)
    h, args = np.float16, prepared.args
    cos, sin = args["freqs_cos"][None, :, None, :], args["freqs_sin"][None, :, None, :]
    for out, x in zip(launched.output, (args["xq"], args["xk"])):
        real, imag = x[..., 0::2], x[..., 1::2]
        emulated = np.stack([h(real * cos) - h(imag * sin), h(real * sin) + h(imag * cos)], -1).reshape(x.shape)
        np.testing.assert_array_equal(out, emulated)


def test_rms_norm_half_accumulates_in_float(et_ctx):
    """A row whose squares overflow float16 (300**2 * 64 > 65504) still normalizes: the sum is fp32."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((1, 3, 64)) * 300).astype(np.float16)
    weight = rng.uniform(0.5, 1.5, 64).astype(np.float16)
    for storage in ("buffer", "texture3d"):
        launched = run_op(et_ctx, "et_vk.rms_norm.default", {"x": x, "weight": weight, "eps": 1e-5}, storage=storage)
        expected = llm.rms_norm(x, weight, 1e-5)
        np.testing.assert_allclose(launched.output, expected, rtol=2.0**-10, atol=1e-3, err_msg=storage)


# -- dynamic sequence length -------------------------------------------------------------------------------------


def _rms_graph(et_ctx, weight: np.ndarray):
    graph = ComputeGraph(et_ctx)
    x = graph.add_tensor((1, MAX_T, 64), "float32", "texture3d", label="x")
    stage = add_input_staging(graph, x)
    out = graph.add_tensor((1, MAX_T, 64), "float32", "texture3d", label="out")
    rms_norm(graph, {"x": x, "weight": TensorRef(id="weight", data=weight), "eps": 1e-5}, out)
    return graph, x, stage, out, read_nchw(graph, out)


def _rms_main(graph: ComputeGraph) -> tuple[int, int, int]:
    (record,) = [d for d in graph.dispatches if d.shader.startswith("rms_norm")]
    return record.global_wg


def _run_at(graph, inputs, arrays, resize: bool = True) -> None:
    """ET-VK ``resize_input`` (unless ``resize`` is False) + ``copy_into_staging`` of each input, then execute."""
    for (tensor, stage), array in zip(inputs, arrays):
        if resize:
            graph.virtual_resize(tensor, array.shape)
            graph.mark_updated(stage)
        stage.copy_in(array)
    graph.propagate_resize()
    graph.execute()


def test_rms_norm_follows_the_sequence_length(et_ctx):
    """Built at T=31, run at T=7 then T=1: the output, its sizes and the row count of the dispatch follow."""
    rng = np.random.default_rng(101)
    weight = rng.uniform(0.5, 1.5, 64).astype(np.float32)
    graph, x, stage, out, back = _rms_graph(et_ctx, weight)
    for t in (7, 1):
        data = (rng.standard_normal((1, t, 64)) * rng.uniform(0.5, 3, (1, t, 1))).astype(np.float32)
        _run_at(graph, [(x, stage)], [data])
        got = back.get()
        assert got.shape == (1, t, 64) and tuple(out.spec.sizes) == (1, t, 64)
        assert _rms_main(graph) == (1, t, 1)
        assert not unwritten_mask(got).any() and not np.isnan(got).any()
        np.testing.assert_allclose(got, llm.rms_norm(data, weight, 1e-5), rtol=1e-5, atol=1e-6)


def test_rms_norm_without_input_resize_keeps_stale_rows(et_ctx):
    """Companion: T=1 data copied in without ``virtual_resize``: the output stays [1, 7, 64] and differs.

    Row 0 is the new row normalized; rows 1..6 are the previous execution's (the staging
    buffer and the dispatch still cover seven rows).
    """
    rng = np.random.default_rng(102)
    weight = rng.uniform(0.5, 1.5, 64).astype(np.float32)
    graph, x, stage, out, back = _rms_graph(et_ctx, weight)
    first = rng.standard_normal((1, 7, 64)).astype(np.float32)
    _run_at(graph, [(x, stage)], [first])
    before = back.get()
    second = rng.standard_normal((1, 1, 64)).astype(np.float32)
    _run_at(graph, [(x, stage)], [second], resize=False)
    got, expected = back.get(), llm.rms_norm(second, weight, 1e-5)
    assert got.shape != expected.shape and tuple(out.spec.sizes) == (1, 7, 64) and _rms_main(graph) == (1, 7, 1)
    np.testing.assert_allclose(got[:, :1], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[:, 1:], before[:, 1:])


def _rope_graph(et_ctx, hf: bool = False):
    graph = ComputeGraph(et_ctx)
    width = 16 if hf else 8
    sizes = {"xq": (1, MAX_T, 4, 16), "xk": (1, MAX_T, 2, 16), "freqs_cos": (MAX_T + 9 if hf else MAX_T, width),
             "freqs_sin": (MAX_T + 9 if hf else MAX_T, width)}
    inputs = {name: graph.add_tensor(s, "float32", "texture3d", label=name) for name, s in sizes.items()}
    stages = {name: add_input_staging(graph, t) for name, t in inputs.items()}
    outs = tuple(graph.add_tensor(sizes[n], "float32", "texture3d", label=f"{n}_out") for n in ("xq", "xk"))
    if hf:
        start_pos = SymInt(0)
        apply_rotary_emb_hf(graph, {**inputs, "start_pos": start_pos}, outs)
    else:
        start_pos = None
        apply_rotary_emb(graph, inputs, outs)
    return graph, inputs, stages, outs, tuple(read_nchw(graph, o) for o in outs), start_pos


def _rope_data(rng, t: int, rows: int, width: int, hf: bool) -> dict[str, np.ndarray]:
    angles = rng.uniform(-np.pi, np.pi, (rows, width // 2 if hf else width))
    cos, sin = np.cos(angles), np.sin(angles)
    if hf:
        cos, sin = np.concatenate([cos, cos], -1), np.concatenate([sin, sin], -1)
    return {"xq": rng.standard_normal((1, t, 4, 16)).astype(np.float32),
            "xk": rng.standard_normal((1, t, 2, 16)).astype(np.float32),
            "freqs_cos": cos.astype(np.float32), "freqs_sin": sin.astype(np.float32)}


def _rope_main(graph: ComputeGraph) -> tuple[int, int, int]:
    (record,) = [d for d in graph.dispatches if d.shader.startswith("rotary_embedding")]
    return record.global_wg


def test_rotary_emb_follows_the_sequence_length(et_ctx):
    """Built at T=31 (freqs [31, 8]), run at T=7 then T=1, every input resized: both outputs follow."""
    rng = np.random.default_rng(103)
    graph, inputs, stages, outs, backs, _ = _rope_graph(et_ctx)
    names = list(inputs)
    for t in (7, 1):
        data = _rope_data(rng, t, t, 8, hf=False)
        _run_at(graph, [(inputs[n], stages[n]) for n in names], [data[n] for n in names])
        expected = llm.apply_rotary_emb(**data)
        assert _rope_main(graph) == (2, 4, t)
        for back, out, exp in zip(backs, outs, expected):
            got = back.get()
            assert got.shape == exp.shape == tuple(out.spec.sizes)
            assert not unwritten_mask(got).any() and not np.isnan(got).any()
            np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-6)


def test_rotary_emb_without_input_resize_differs(et_ctx):
    """Companion: T=1 data copied in without resizing the inputs: outputs keep T=7 sizes and stale positions."""
    rng = np.random.default_rng(104)
    graph, inputs, stages, outs, backs, _ = _rope_graph(et_ctx)
    names = list(inputs)
    first = _rope_data(rng, 7, 7, 8, hf=False)
    _run_at(graph, [(inputs[n], stages[n]) for n in names], [first[n] for n in names])
    before = [b.get() for b in backs]
    second = _rope_data(rng, 1, 1, 8, hf=False)
    _run_at(graph, [(inputs[n], stages[n]) for n in names], [second[n] for n in names], resize=False)
    assert _rope_main(graph) == (2, 4, 7)
    for back, out, prev, exp in zip(backs, outs, before, llm.apply_rotary_emb(**second)):
        got = back.get()
        assert got.shape != exp.shape and out.spec.sizes[1] == 7
        np.testing.assert_allclose(got[:, :1], exp, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got[:, 1:], prev[:, 1:])


def test_rotary_emb_hf_follows_the_sequence_length_and_start_pos(et_ctx):
    """HF variant: tables [40, 16] fixed, T=7 at start_pos 0 then T=1 at start_pos 7 (``set_symint``)."""
    rng = np.random.default_rng(105)
    graph, inputs, stages, outs, backs, start_pos = _rope_graph(et_ctx, hf=True)
    tables = _rope_data(rng, 1, MAX_T + 9, 16, hf=True)
    for name in ("freqs_cos", "freqs_sin"):
        stages[name].copy_in(tables[name])
    for t, pos in ((7, 0), (1, 7)):
        data = {**_rope_data(rng, t, 1, 16, hf=True), **{n: tables[n] for n in ("freqs_cos", "freqs_sin")}}
        graph.set_symint(start_pos, pos)
        _run_at(graph, [(inputs[n], stages[n]) for n in ("xq", "xk")], [data["xq"], data["xk"]])
        expected = llm.apply_rotary_emb_hf(**data, start_pos=pos)
        assert _rope_main(graph) == (4, 4, t)
        for back, out, exp in zip(backs, outs, expected):
            got = back.get()
            assert got.shape == exp.shape == tuple(out.spec.sizes) and not unwritten_mask(got).any()
            np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-6)
