"""ExecuTorch's LLM export pipeline (export_llama) on the tiny Llama, Vulkan backend, offline.

The lowering test uses vkdiff's real cache (``$VKDIFF_CACHE_DIR`` or ``~/.cache/vkdiff``): the first
run exports once (25–50 s on 2 cores), later runs load the cached LoweredCase.
"""

from __future__ import annotations

import hashlib

import torch

from vkdiff.capture import quiet_libraries
from vkdiff.cases import llm
from vkdiff.datamodel import schema_of
from vkdiff.lowering import lower as lowering
from vkdiff.lowering.llm_export import LLM_RECIPES, llm_config, source_transforms

FASTEST = "llm-4w"
"""Weight-only linears: no dynamic activation quantization, the quickest export of the four."""
LLAMA_OPS = ("et_vk.rms_norm", "et_vk.apply_rotary_emb", "sdpa_with_kv_cache", "et_vk.select_as_symint")
"""Ops of the Llama block the delegate must hold besides the quantized linears."""


def _case(recipe: str):
    (case,) = [c for c in llm.llm_cases() if c.recipe == recipe]
    return case


def test_export_llama_4w_is_one_vulkan_delegate():
    case = _case(FASTEST)
    with quiet_libraries():
        lowered = lowering.lower(case)
    assert lowered.partitions == 1 and len(lowered.delegates) == 1
    assert lowered.undelegated_ops == {}
    counts = lowered.op_counts()
    # 2 blocks × (wq, wk, wv, wo, w1, w2, w3) + output = 15 linears, all fused
    assert sum(n for op, n in counts.items() if op.startswith("et_vk.linear_q4gsw.")) == 15
    assert not any("dequantize_affine" in op or op.startswith("aten.mm") for op in counts)
    for name in LLAMA_OPS:
        assert any(op.split(".default")[0].endswith(name) for op in counts), (name, dict(counts))
    assert lowered.dequantize_dtypes and set(lowered.dequantize_dtypes) == {"float32"}
    (delegate,) = lowered.delegates
    tokens, input_pos = (delegate.tensors[i] for i in delegate.input_ids)
    assert tokens.dims == [1, llm.TINY.max_seq_len - 1] and input_pos.dims == [1]
    assert [delegate.tensors[i].dims for i in delegate.output_ids] == [[1, llm.TINY.vocab_size]]
    assert lowered.pte[4:8] == b"ET12"
    calls = [delegate.bind(op) for op in delegate.ops]  # every call carries one value per schema argument
    assert {schema_of(name).name for name in counts} >= {"llama.sdpa_with_kv_cache.default", "_operator.add.default"}
    sdpa = next(c for c in calls if c.schema.name == "llama.sdpa_with_kv_cache.default")
    assert delegate.values[sdpa.args["start_pos"]]["kind"] == "SymInt"


def test_checkpoint_is_generated_deterministically_outside_the_cache(tmp_path, monkeypatch):
    """Two generations (the per-process memo cleared) give the same bits, and neither lands in the cache, which may
    come from another machine (export_llama unpickles its checkpoint)."""
    monkeypatch.setenv("VKDIFF_CACHE_DIR", str(tmp_path))
    digests = []
    for _ in range(2):
        llm._generated_folder.cache_clear()
        checkpoint, params = llm.checkpoint_paths(llm.TINY, "bf16")
        assert checkpoint.parent.name == llm.TINY.key("bf16") and params.exists()
        assert not checkpoint.is_relative_to(tmp_path)
        state = torch.load(checkpoint)
        assert {v.dtype for v in state.values()} == {torch.bfloat16}
        digests.append(hashlib.sha256(b"".join(v.view(torch.int16).numpy().tobytes() for v in state.values()))
                       .hexdigest())
    assert digests[0] == digests[1]


def test_recipe_model_is_export_llamas_model():
    """The eager oracle is the module export_llama exports: same quantization (HQQ), same output bits."""
    from executorch.examples.models.llama import export_llama_lib

    case = _case(FASTEST)
    model, (tokens, input_pos) = case.instantiate()
    with quiet_libraries():
        ours = LLM_RECIPES[case.recipe](model, (tokens, input_pos))
        checkpoint, params = llm.checkpoint_paths(llm.TINY, "fp32")
        cfg = llm_config(dict(case.options), str(checkpoint), str(params), ".")
        theirs = export_llama_lib._prepare_for_llama_export(cfg).model
        with torch.no_grad():
            expected = theirs(tokens, {"input_pos": input_pos})
            got = ours(tokens, input_pos)
    assert len(source_transforms(cfg, torch.float32)) >= 3
    assert torch.isfinite(got).all()
    assert torch.equal(got, expected)


def test_the_fused_llama_program_evaluates_on_the_host_and_leaves_its_caches_alone():
    """Every op of the tiny Llama delegate has a reference; the KV caches it writes are per-run copies."""
    import numpy as np

    from vkdiff.executors import interpret

    case = _case(FASTEST)
    with quiet_libraries():
        (delegate,) = lowering.lower(case).delegates
    assert interpret.missing_references(delegate) == []
    sdpa = [delegate.bind(op) for op in delegate.ops if op.name.startswith("sdpa_with_kv_cache")]
    caches = {call.args[name]: np.array(delegate.constants[call.args[name]]) for call in sdpa
              for name in ("key_cache", "value_cache")}
    assert len(caches) == 4
    tokens = (np.arange(llm.PROMPT_LENGTH) * 37 % llm.TINY.vocab_size).reshape(1, -1)
    first = interpret.run(delegate, [tokens, np.array([0])])
    again = interpret.run(delegate, [tokens, np.array([0])])
    np.testing.assert_array_equal(first[0], again[0])
    assert first[0].shape == (1, llm.TINY.vocab_size) and np.isfinite(first[0]).all()
    for vid, before in caches.items():
        np.testing.assert_array_equal(delegate.constants[vid], before)
