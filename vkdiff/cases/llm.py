"""A tiny Llama lowered by ExecuTorch's own LLM export pipeline (``export_llama``), Vulkan backend.

The checkpoint is generated here, deterministically from a seed, and saved under
``cache_dir()/llm/<key>/`` (``consolidated.pth`` + ``params.json``, ``key`` = hash of the
params, seed and checkpoint dtype): ``export_llama`` without a checkpoint leaves
RMSNorm weights, RoPE tables and caches uninitialised. Every variant exports with
the KV cache, dynamic shapes and ``use_sdpa_with_kv_cache`` (required for Vulkan
with a KV cache):

=========  ==============  ==========  ===========  =================================================
variant    qmode (-qmode)  -G          -E           expected fused ops
=========  ==============  ==========  ===========  =================================================
8da4w      8da4w           32          —            choose_qparams_affine + et_vk.linear_dq8ca_q4gsw
4w         4w              32          —            et_vk.linear_q4gsw
emb4w      8da4w           32          4,32         + et_vk.embedding_q4gsw
bf16       8da4w           32          —            as 8da4w; checkpoint bfloat16, dtype fp32
=========  ==============  ==========  ===========  =================================================

The eager model (``build``) is the same ``Transformer`` with the same checkpoint and
the same ``ModelArgs`` as ``export_llama`` builds, wrapped to take ``(tokens, input_pos)``
positionally; its recipe (``llm-<variant>``, see ``vkdiff.lowering.llm_export.LLM_RECIPES``)
applies export_llama's own source transforms (quantization, custom SDPA, custom KV cache,
dtype cast).
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from vkdiff.cases.model_case import EMBEDDING_Q4GSW, LINEAR_DQ8CA_Q4GSW, LINEAR_Q4GSW, ModelCase
from vkdiff.datamodel import cache_dir, cached_folder

PIPELINE = "export_llama"
NAME = "tiny_llama"
CHOOSE_QPARAMS = "torchao.choose_qparams_affine"
RULES = ("expected_fusions", "transposed_scales", "zero_point_dtype", "numerics")


@dataclasses.dataclass(kw_only=True, frozen=True)
class TinyLlama:
    """Architecture and weights seed of the tiny Llama (``params.json`` plus the export lengths)."""

    dim: int = 64
    """Model width."""
    n_layers: int = 2
    """Transformer blocks."""
    n_heads: int = 4
    """Query heads (head_dim = dim / n_heads = 16)."""
    n_kv_heads: int = 2
    """Key/value heads (grouped-query attention when < n_heads)."""
    vocab_size: int = 256
    """Vocabulary (embedding rows, lm_head outputs)."""
    hidden_dim: int = 128
    """Feed-forward width."""
    norm_eps: float = 1e-5
    """RMSNorm epsilon."""
    max_seq_len: int = 32
    """``--max_seq_length`` (the dynamic token dimension goes up to max_seq_len - 1)."""
    max_context_len: int = 32
    """``--max_context_length`` (KV cache length)."""
    seed: int = 20250601
    """Seed of the generated weights."""
    extra: tuple[tuple[str, Any], ...] = ()
    """Further ``params.json`` fields of a user's config (``rope_theta``, ``multiple_of``...), as sorted pairs."""
    checkpoint: str = ""
    """A user's checkpoint file (empty: weights generated from ``seed``)."""
    checkpoint_sha256: str = ""
    """Its content hash (part of the lowering key: the lowering follows the weights, not the path)."""

    def params(self) -> dict[str, Any]:
        """The ``params.json`` content."""
        return dict(dim=self.dim, n_layers=self.n_layers, n_heads=self.n_heads, n_kv_heads=self.n_kv_heads,
                    vocab_size=self.vocab_size, hidden_dim=self.hidden_dim, norm_eps=self.norm_eps, **dict(self.extra))

    def key(self, checkpoint_dtype: str = "fp32") -> str:
        """Identity of a checkpoint: params, export lengths, seed (or the user's file's hash) and checkpoint dtype."""
        text = json.dumps(dict(self.params(), max_seq_len=self.max_seq_len, max_context_len=self.max_context_len,
                               seed=self.seed, dtype=checkpoint_dtype, checkpoint=self.checkpoint_sha256),
                          sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_json(self) -> str:
        """The spec as a case option (JSON text: plain data, part of the case identity)."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "TinyLlama":
        fields = json.loads(text)
        fields["extra"] = tuple(tuple(pair) for pair in fields.get("extra", ()))
        return cls(**fields)

    @classmethod
    def from_params(cls, params: dict[str, Any], *, checkpoint: Path | None = None, max_seq_len: int = 32
                    ) -> "TinyLlama":
        """A spec from a user's ``params.json`` (and checkpoint).

        Raises:
            ValueError: a required field is missing or not a number (named).
        """
        known = {f.name for f in dataclasses.fields(cls)} & {"dim", "n_layers", "n_heads", "n_kv_heads",
                                                             "vocab_size", "hidden_dim", "norm_eps"}
        missing = sorted({"dim", "n_layers", "n_heads", "vocab_size"} - set(params))
        if missing:
            raise ValueError(f"params.json lacks {', '.join(missing)}")
        values = {k: params[k] for k in known if k in params}
        values.setdefault("n_kv_heads", params["n_heads"])
        if "hidden_dim" not in params:
            raise ValueError("params.json lacks hidden_dim (the feed-forward width)")
        extra = tuple(sorted((k, v) for k, v in params.items() if k not in known))
        sha = hashlib.sha256(checkpoint.read_bytes()).hexdigest() if checkpoint is not None else ""
        return cls(**values, extra=extra, max_seq_len=max_seq_len, max_context_len=max_seq_len,
                   checkpoint=str(checkpoint or ""), checkpoint_sha256=sha)

    def model_args(self, **overrides):
        """``ModelArgs`` exactly as ``Llama2Model`` builds them for an export with KV cache and custom SDPA."""
        from executorch.examples.models.llama.model_args import ModelArgs

        args = dict(max_seq_len=self.max_seq_len, max_context_len=self.max_context_len, max_batch_size=1,
                    use_kv_cache=True, use_sdpa_with_kv_cache_op=True, generate_full_logits=False,
                    enable_dynamic_shape=True, **self.params())
        args.update(overrides)
        return ModelArgs(**args)


TINY = TinyLlama()

CHECKPOINT_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def checkpoint_paths(spec: TinyLlama = TINY, checkpoint_dtype: str = "fp32") -> tuple[Path, Path]:
    """Generate (once per process) and return ``(checkpoint, params.json)`` of ``spec`` saved in ``checkpoint_dtype``.

    A generated checkpoint is written to a folder of this process's own (``_generated_folder``), never to the
    shared cache: ``export_llama`` unpickles its checkpoint, and a cache can come from another machine. A user's
    ``--checkpoint`` (``spec.checkpoint``) is used where it lies; its ``params.json`` (data) is cached.

    Weights: ``construct_transformer`` initialisation under ``torch.manual_seed(spec.seed)``, then
    RMSNorm weights ``1 + 0.1·N(0, 1)`` so the norm scale is exercised. Every state-dict entry
    (KV caches included) is saved in ``checkpoint_dtype`` (bf16: cast from the fp32 weights).

    Args:
        spec (TinyLlama): architecture and seed.
        checkpoint_dtype (str): ``fp32`` or ``bf16``.

    Raises:
        ValueError: unknown ``checkpoint_dtype``.
    """
    if checkpoint_dtype not in CHECKPOINT_DTYPES:
        raise ValueError(f"Unsupported checkpoint dtype: {checkpoint_dtype} (valid: {sorted(CHECKPOINT_DTYPES)})")
    if spec.checkpoint:
        def params_only(staging: Path) -> None:
            (staging / "params.json").write_text(json.dumps(spec.params(), indent=1, sort_keys=True))

        folder = cached_folder(cache_dir() / "llm" / f"params-{spec.key(checkpoint_dtype)}", params_only)
        return Path(spec.checkpoint), folder / "params.json"
    folder = _generated_folder(spec, checkpoint_dtype)
    return folder / "consolidated.pth", folder / "params.json"


@functools.lru_cache(maxsize=None)
def _generated_folder(spec: TinyLlama, checkpoint_dtype: str) -> Path:
    """``spec``'s checkpoint and params, written once into a private temporary folder (removed at exit)."""
    root = Path(tempfile.mkdtemp(prefix="vkdiff-checkpoint-"))
    atexit.register(shutil.rmtree, root, True)
    folder = root / spec.key(checkpoint_dtype)
    folder.mkdir()
    (folder / "params.json").write_text(json.dumps(spec.params(), indent=1, sort_keys=True))
    torch.save(generated_state(spec, checkpoint_dtype), folder / "consolidated.pth")
    return folder


def generated_state(spec: TinyLlama, checkpoint_dtype: str) -> dict[str, torch.Tensor]:
    """The generated checkpoint's state dict, in ``checkpoint_dtype``, made in memory."""
    return {k: v.to(CHECKPOINT_DTYPES[checkpoint_dtype]) for k, v in _generate_state_dict(spec).items()}


def _generate_state_dict(spec: TinyLlama) -> dict[str, torch.Tensor]:
    from executorch.examples.models.llama.llama_transformer import construct_transformer

    with torch.random.fork_rng():
        torch.manual_seed(spec.seed)
        model = construct_transformer(spec.model_args(use_sdpa_with_kv_cache_op=False))
        generator = torch.Generator().manual_seed(spec.seed + 1)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if name.endswith("norm.weight"):
                    param.copy_(1 + 0.1 * torch.randn(param.shape, generator=generator))
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}


class TokensAndPos(nn.Module):
    """export_llama's forward ``(tokens, {"input_pos": input_pos})`` taking both positionally."""

    def __init__(self, transformer: nn.Module):
        super().__init__()
        self.transformer = transformer

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        return self.transformer(tokens, {"input_pos": input_pos})


def load_transformer(spec: TinyLlama = TINY, checkpoint_dtype: str = "fp32") -> nn.Module:
    """The float ``Transformer`` loaded from the generated checkpoint as ``Llama2Model`` loads it.

    Built on the meta device, then ``load_state_dict(strict=False, assign=True)``: parameters keep the
    checkpoint dtype (bf16 stays bf16 until the recipe quantizes and casts to fp32).
    """
    from executorch.examples.models.llama.llama_transformer import construct_transformer

    with torch.device("meta"):
        model = construct_transformer(spec.model_args())
    if spec.checkpoint:
        # the user's --checkpoint, a file they named and trust; even so, tensors only (no pickled code)
        state = torch.load(spec.checkpoint, map_location="cpu", mmap=True, weights_only=True)
    else:
        state = generated_state(spec, checkpoint_dtype)
    model.load_state_dict(state, strict=False, assign=True)
    model.checkpoint_dtype = CHECKPOINT_DTYPES[checkpoint_dtype]
    return model.eval()


def _build(checkpoint_dtype: str, spec: TinyLlama | None = None) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        return TokensAndPos(load_transformer(spec or TINY, checkpoint_dtype))

    return build


PROMPT_LENGTH = 7


def prompt(generator: torch.Generator, *, vocab_size: int = TINY.vocab_size,
           length: int = PROMPT_LENGTH) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded prompt ``tokens [1, length]`` (int64) at ``input_pos = [0]`` (prefill)."""
    tokens = torch.randint(0, vocab_size, (1, length), generator=generator, dtype=torch.long)
    return tokens, torch.tensor([0], dtype=torch.long)


DECODE_STEPS = 4
"""Decode steps after the prefill on devices."""


def decode_inputs(previous: tuple, token: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The decode step after ``previous = (tokens, input_pos)``: one token at the next position."""
    tokens, input_pos = previous
    return torch.tensor([[token]], dtype=tokens.dtype), input_pos + tokens.shape[-1]


@dataclasses.dataclass(kw_only=True, frozen=True)
class LlmVariant:
    """One export_llama configuration of the tiny Llama."""

    name: str
    """Variant name (the recipe is ``llm-<name>``)."""
    qmode: str
    """``quantization.qmode`` (``-qmode``)."""
    group_size: int
    """``quantization.group_size`` (``-G``)."""
    embedding_quantize: str | None
    """``quantization.embedding_quantize`` (``-E``), e.g. ``4,32``."""
    checkpoint_dtype: str
    """dtype the checkpoint is saved in (the export dtype is always fp32)."""
    expect_ops: tuple[str, ...]
    """Fused ops the delegate must contain."""

    @property
    def recipe(self) -> str:
        return f"llm-{self.name}"

    spec: TinyLlama = TINY
    """Architecture and weights (the catalogue's tiny Llama, or a user's params.json and checkpoint)."""

    @property
    def options(self) -> tuple[tuple[str, Any], ...]:
        options = dict(qmode=self.qmode, group_size=self.group_size, embedding_quantize=self.embedding_quantize,
                       checkpoint_dtype=self.checkpoint_dtype, checkpoint=self.spec.key(self.checkpoint_dtype))
        if self.spec != TINY:
            options["llama"] = self.spec.to_json()
        return tuple(sorted(options.items()))


VARIANTS: tuple[LlmVariant, ...] = (
    LlmVariant(name="8da4w", qmode="8da4w", group_size=32, embedding_quantize=None, checkpoint_dtype="fp32",
               expect_ops=(CHOOSE_QPARAMS, LINEAR_DQ8CA_Q4GSW)),
    LlmVariant(name="4w", qmode="4w", group_size=32, embedding_quantize=None, checkpoint_dtype="fp32",
               expect_ops=(LINEAR_Q4GSW,)),
    LlmVariant(name="emb4w", qmode="8da4w", group_size=32, embedding_quantize="4,32", checkpoint_dtype="fp32",
               expect_ops=(CHOOSE_QPARAMS, LINEAR_DQ8CA_Q4GSW, EMBEDDING_Q4GSW)),
    LlmVariant(name="bf16", qmode="8da4w", group_size=32, embedding_quantize=None, checkpoint_dtype="bf16",
               expect_ops=(CHOOSE_QPARAMS, LINEAR_DQ8CA_Q4GSW)),
)
"""The export_llama variants, fastest first."""


def variant_of(case: ModelCase) -> LlmVariant:
    """The variant a case was declared from (by recipe).

    Raises:
        ValueError: ``case`` is not an export_llama case.
    """
    for variant in VARIANTS:
        if variant.recipe == case.recipe:
            return variant
    raise ValueError(f"Unsupported llm recipe: {case.recipe} (valid: {[v.recipe for v in VARIANTS]})")


def llm_case(variant: LlmVariant, *, name: str = NAME, prompt_len: int = PROMPT_LENGTH,
             decode_steps: int = DECODE_STEPS) -> ModelCase:
    """The ModelCase of one variant (of the catalogue's tiny Llama, or of the spec the variant carries)."""
    rules = RULES + (("bf16_export",) if variant.checkpoint_dtype == "bf16" else ())
    spec = variant.spec

    def inputs(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return prompt(generator, vocab_size=spec.vocab_size, length=prompt_len)

    return ModelCase(name=name, build=_build(variant.checkpoint_dtype, spec), inputs=inputs, recipe=variant.recipe,
                     partitioner="vulkan", expect_ops=variant.expect_ops, rules=rules, pipeline=PIPELINE,
                     options=variant.options, decode=decode_inputs, decode_steps=decode_steps)


def spec_of(options: dict[str, Any]) -> TinyLlama:
    """The architecture a case's options describe (the catalogue's tiny Llama unless they carry a user's)."""
    return TinyLlama.from_json(options["llama"]) if options.get("llama") else TINY


def llm_cases() -> list[ModelCase]:
    """Every export_llama case (ids ``tiny_llama[llm-<variant>-vulkan]``)."""
    return [llm_case(v) for v in VARIANTS]
