"""Lower model cases through ExecuTorch's LLM export pipeline (``export_llama``), offline.

``lower_llm`` runs ``export_llama``'s own steps on an ``LlmConfig`` built from the case's
knobs, Vulkan enabled, KV cache, dynamic shapes, ``use_sdpa_with_kv_cache``::

    _validate_args → _prepare_for_llama_export (load checkpoint, source transforms:
    quantize, custom SDPA/KV cache, cast) → export → run_canonical_optimizations →
    export_to_edge → to_backend([get_vulkan_partitioner]) → to_executorch

The edge program after ``to_backend`` is kept: its Vulkan delegates (the blobs the ``.pte``
carries), op counts and ``dequantize_affine`` dtypes come from ``vkdiff.lowering.edge``'s
helpers. No tokenizer or checkpoint is downloaded: ``vkdiff.cases.llm`` generates the checkpoint.

``LLM_RECIPES`` holds one recipe per variant (``llm-<variant>``) that turns the case's float
eager model into the model export_llama exports, by applying export_llama's own source
transforms with the same arguments.
"""

from __future__ import annotations

import contextlib
import functools
import io
import tempfile
import time
from collections import Counter
from typing import Any, Callable

from vkdiff.cases import llm as llm_cases
from vkdiff.cases.model_case import ModelCase
from vkdiff.lowering.edge import (LoweredCase, attach_sources, call_targets, dequantize_dtypes, lowered_modules,
                                 memoise_vulkan_patterns, stage, weights_only)


def quiet_stdout():
    """export_llama's source transforms ``print`` progress (``quantize ('tok_embeddings', ...)``): keep it out."""
    return contextlib.redirect_stdout(io.StringIO())


def llm_config(knobs: dict[str, Any], checkpoint: str, params: str, output_dir: str):
    """The ``LlmConfig`` of one export (enum fields as enums).

    Args:
        knobs (dict): ``qmode``, ``group_size``, ``embedding_quantize`` (see ``vkdiff.cases.llm.LlmVariant``).
        checkpoint (str): path of the generated checkpoint.
        params (str): path of its ``params.json``.
        output_dir (str): where export_llama may write (nothing is saved by ``lower_llm``).

    Raises:
        ValueError: a qmode or embedding quantization export_llama does not accept (its own message).
    """
    from executorch.extension.llm.export.config.llm_config import (BackendConfig, BaseConfig, DtypeOverride,
                                                                    ExportConfig, LlmConfig, ModelConfig, ModelType,
                                                                    QuantizationConfig, VulkanConfig)

    quantization = QuantizationConfig(qmode=knobs["qmode"], group_size=knobs["group_size"],
                                      embedding_quantize=knobs["embedding_quantize"])
    if quantization.embedding_quantize:
        quantization._validate_embedding_quantize()
    cfg = LlmConfig(
        base=BaseConfig(model_class=ModelType.llama3, checkpoint=checkpoint, params=params),
        model=ModelConfig(dtype_override=DtypeOverride.fp32, use_kv_cache=True, use_sdpa_with_kv_cache=True,
                          enable_dynamic_shape=True),
        export=ExportConfig(max_seq_length=llm_cases.spec_of(knobs).max_seq_len,
                            max_context_length=llm_cases.spec_of(knobs).max_context_len, output_dir=output_dir),
        quantization=quantization,
        backend=BackendConfig(vulkan=VulkanConfig(enabled=True)))
    return cfg


def lower_llm(case: ModelCase) -> LoweredCase:
    """Lower an ``export_llama`` case step by step, keeping the edge program to decode the delegates.

    Args:
        case (ModelCase): a case of ``vkdiff.cases.llm`` (``pipeline="export_llama"``).

    Returns:
        LoweredCase: decoded Vulkan delegates, partitions, delegated/undelegated edge ops,
        ``dequantize_affine`` output dtypes, the ``.pte`` bytes and the wall time.

    Raises:
        vkdiff.lowering.edge.LowerError: a stage failed; the message starts with the stage
            (``checkpoint``, ``config``, ``validate``, ``prepare[<qmode>]``, ``export``, ``export_to_edge``,
            ``to_backend[vulkan]``, ``decode``, ``to_executorch``) and names the failing pass when known.
        ValueError: ``case`` is not an ``export_llama`` case.
    """
    if case.pipeline != "export_llama" or not case.options:
        raise ValueError(f"Unsupported pipeline for lower_llm: {case.pipeline!r} with options {case.options!r} "
                         "(expected an export_llama case of vkdiff.cases.llm)")
    from executorch.examples.models.llama import export_llama_lib as lib
    from executorch.extension.llm.export.partitioner_lib import get_vulkan_partitioner

    start = time.perf_counter()
    memoise_vulkan_patterns()
    with tempfile.TemporaryDirectory(prefix="vkdiff-llm-") as output_dir, quiet_stdout(), weights_only():
        knobs = dict(case.options)
        checkpoint, params = stage("checkpoint", llm_cases.checkpoint_paths, llm_cases.spec_of(knobs),
                                    knobs["checkpoint_dtype"])
        cfg = stage("config", llm_config, knobs, str(checkpoint), str(params), output_dir)
        stage("validate", lib._validate_args, cfg)
        _, quantizers, _ = stage("quantizers", lib.get_quantizer_and_quant_params, cfg)
        builder = stage(f"prepare[{cfg.quantization.qmode}]", lib._prepare_for_llama_export, cfg)
        builder = stage("export", builder.export)
        stage("run_canonical_optimizations", builder.run_canonical_optimizations)
        builder = stage("export_to_edge", lambda: builder.pt2e_quantize(quantizers).export_to_edge())
        partitioner = stage("partitioner", get_vulkan_partitioner, cfg.model.dtype_override.value,
                             cfg.model.enable_dynamic_shape, cfg.backend.vulkan.force_fp16)
        builder = stage("to_backend[vulkan]", builder.to_backend, [partitioner])
        gm = builder.edge_manager.exported_program().graph_module
        top = call_targets(gm)
        inner: Counter = Counter()
        for _, sub in lowered_modules(gm):
            inner.update(call_targets(sub.original_module.graph_module))
        dequantize = dequantize_dtypes(gm)
        builder = stage("to_executorch", builder.to_executorch, passes=_additional_passes(cfg))
        pte = builder.export_program.buffer
        partitions = sum(top.pop(name) for name in [n for n in top if n.endswith("executorch_call_delegate")])
        lowered = LoweredCase(case_id=case.id, partitions=partitions, delegated_ops=dict(inner),
                              undelegated_ops=dict(top), dequantize_dtypes=dequantize, pte=pte,
                              seconds=round(time.perf_counter() - start, 3))
        return attach_sources(lowered, gm)


def _additional_passes(cfg) -> list:
    """``_export_llama``'s extra ``to_executorch`` passes (none for an ExecuTorch-defined Llama on Vulkan)."""
    from executorch.examples.models.llama import export_llama_lib as lib

    if cfg.base.model_class.value in lib.TORCHTUNE_DEFINED_MODELS:
        from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

        return [InitializedMutableBufferPass(["kv_cache_pos"])]
    return []


def source_transforms(cfg, checkpoint_dtype) -> list[Callable]:
    """export_llama's source transforms for ``cfg`` (the arguments ``_prepare_for_llama_export`` passes).

    Only the arguments that differ from ``_get_source_transforms``'s defaults for a Vulkan llama3
    export are passed; the rest equal the ``LlmConfig`` defaults.
    """
    from executorch.examples.models.llama import export_llama_lib as lib
    from executorch.extension.llm.export.builder import DType

    return lib._get_source_transforms(
        dtype_override=DType[cfg.model.dtype_override.value],
        checkpoint=cfg.base.checkpoint,
        checkpoint_dtype=DType.from_torch_dtype(checkpoint_dtype),
        embedding_quantize=cfg.quantization.embedding_quantize,
        use_shared_embedding=cfg.model.use_shared_embedding,
        quantization_mode=cfg.quantization.qmode,
        group_size=cfg.quantization.group_size,
        expand_rope_table=cfg.model.expand_rope_table,
        use_sdpa_with_kv_cache=cfg.model.use_sdpa_with_kv_cache,
        quantize_kv_cache=cfg.model.quantize_kv_cache,
        use_kv_cache=cfg.model.use_kv_cache,
        vulkan=cfg.backend.vulkan.enabled,
        quantize_with_hqq=cfg.quantization.use_hqq,
    )


def quantize_like_export_llama(model, inputs=None, *, knobs: tuple[tuple[str, Any], ...]):
    """Turn the float eager model of an llm case into the model export_llama exports.

    Applies ``source_transforms`` (quantization with export_llama's qmode/HQQ settings, custom
    SDPA with KV cache, cast to the fp32 export dtype) to ``model.transformer`` (a
    ``vkdiff.cases.llm.TokensAndPos``), in place.

    Args:
        model (TokensAndPos): from the case's ``build``, checkpoint loaded in its saved dtype.
        inputs: unused (the recipe signature).
        knobs (tuple): the case's pipeline options (``ModelCase.options``).

    Returns:
        The same wrapper, quantized, in eval mode.
    """
    import torch

    values = dict(knobs)
    checkpoint, params = llm_cases.checkpoint_paths(llm_cases.spec_of(values), values["checkpoint_dtype"])
    cfg = llm_config(values, str(checkpoint), str(params), tempfile.gettempdir())
    transformer = model.transformer
    with torch.no_grad(), quiet_stdout():
        for transform in source_transforms(cfg, llm_cases.CHECKPOINT_DTYPES[values["checkpoint_dtype"]]):
            transformer = transform(transformer)
    model.transformer = transformer
    return model.eval()


LLM_RECIPES: dict[str, Callable[..., Any]] = {
    variant.recipe: functools.partial(quantize_like_export_llama, knobs=variant.options)
    for variant in llm_cases.VARIANTS}
"""``llm-<variant>`` recipes (``vkdiff.lowering.recipes.RECIPES`` includes them)."""

