"""``vkdiff check --llama params.json``: a user's LLM config through ExecuTorch's ``export_llama``, as a generation.

The config (and checkpoint, or weights generated from a seed when none is given) becomes a
case of the same shape as the catalogue's ``tiny_llama`` cases: exported with the KV cache,
dynamic shapes and ``use_sdpa_with_kv_cache`` for Vulkan, then checked on every device as
a prefill of ``prompt_len`` tokens and ``decode_steps`` greedy steps fed with eager's tokens.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from vkdiff.subjects.programs import SubjectError


def llama_case(params: Path, *, checkpoint: Path | None = None, qmode: str = "8da4w", group_size: int = 32,
               embedding_quantize: str | None = None, prompt_len: int = 7, decode_steps: int = 3):
    """The generation case of a user's ``params.json``.

    Raises:
        SubjectError: an unreadable or incomplete ``params.json``, or lengths that cannot work (one line).
    """
    from vkdiff.cases import llm
    from vkdiff.lowering.llm_export import quantize_like_export_llama
    from vkdiff.lowering.recipes import RECIPES

    try:
        values = json.loads(params.read_text())
        if not isinstance(values, dict):
            raise ValueError("not a JSON object")
        spec = llm.TinyLlama.from_params(values, checkpoint=checkpoint,
                                         max_seq_len=max(32, prompt_len + decode_steps + 1))
    except (OSError, ValueError, TypeError) as exc:
        raise SubjectError(f"--llama {params}: {exc}") from None
    if prompt_len < 1 or decode_steps < 0:
        raise SubjectError(f"--prompt-len {prompt_len} --decode-steps {decode_steps}: give a prompt of at least one "
                           f"token and zero or more decode steps")
    expect = ((llm.LINEAR_Q4GSW,) if qmode == "4w" else (llm.CHOOSE_QPARAMS, llm.LINEAR_DQ8CA_Q4GSW)) + (
        (llm.EMBEDDING_Q4GSW,) if embedding_quantize else ())
    name = f"{qmode}{'-emb' + embedding_quantize.replace(',', 'x') if embedding_quantize else ''}-{spec.key()[:8]}"
    variant = llm.LlmVariant(name=name, qmode=qmode, group_size=group_size, embedding_quantize=embedding_quantize,
                             checkpoint_dtype="fp32", expect_ops=expect, spec=spec)
    RECIPES.setdefault(variant.recipe, functools.partial(quantize_like_export_llama, knobs=variant.options))
    return llm.llm_case(variant, name=f"llama-{params.stem}", prompt_len=prompt_len, decode_steps=decode_steps)
