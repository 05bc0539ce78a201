"""Model cases: small real modules, a quantization recipe, a partitioner, expected fusions.

Each case lowers in seconds on 2 cores. Modules and inputs are built from a seed
derived from the case id, so every executor sees the same weights and inputs.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Callable, Iterator

import torch
from torch import nn

LINEAR_Q4GSW = "et_vk.linear_q4gsw"
LINEAR_DQ8CA_Q4GSW = "et_vk.linear_dq8ca_q4gsw"
EMBEDDING_Q4GSW = "et_vk.embedding_q4gsw"


@dataclasses.dataclass(kw_only=True, frozen=True)
class ModelCase:
    """One model lowered one way."""

    name: str
    """Model family, e.g. ``llama_proj``."""
    build: Callable[[], nn.Module]
    """Factory of the float module (weights drawn from torch's global RNG, seeded by ``instantiate``)."""
    inputs: Callable[[torch.Generator], tuple]
    """Example inputs from a seeded generator."""
    recipe: str
    """Quantization recipe (see ``vkdiff.harness.lower.RECIPES``)."""
    partitioner: str = "vulkan"
    """Partitioner (see ``vkdiff.harness.lower.PARTITIONERS``)."""
    expect_ops: tuple[str, ...] = ()
    """Fused ops the delegate must contain (e.g. ``et_vk.linear_q4gsw``)."""
    rules: tuple[str, ...] = ()
    """Fusion rules to check (names in ``vkdiff.fusions.RULES``)."""
    accept_refusal: str = ""
    """Regex over a lowering error that counts as a clear, intended refusal (e.g. asymmetric weights)."""
    pipeline: str = "export"
    """``export`` (quantize → torch.export → to_edge_transform_and_lower) or ``export_llama`` (ExecuTorch's LLM
    export pipeline, see ``vkdiff.harness.llm_export``)."""
    knobs: tuple[tuple[str, Any], ...] = ()
    """Pipeline-specific options as sorted (name, value) pairs (part of the case identity)."""

    @property
    def id(self) -> str:
        return f"{self.name}[{self.recipe}-{self.partitioner}]"

    @property
    def variant(self) -> str:
        return f"{self.recipe}-{self.partitioner}"

    def seed(self) -> int:
        """Weights and inputs depend on the model family only, so recipes of one model compare like for like."""
        return int.from_bytes(hashlib.sha256(self.name.encode()).digest()[:4], "little")

    def instantiate(self) -> tuple[nn.Module, tuple]:
        """The float module in eval mode and its example inputs, both seeded."""
        torch.manual_seed(self.seed())
        model = self.build().eval()
        generator = torch.Generator().manual_seed(self.seed())
        return model, self.inputs(generator)


class LlamaProjections(nn.Module):
    """The projections of one Llama block: q/k/v/o and the gated MLP (w1, w3 → silu·mul → w2)."""

    def __init__(self, dim: int = 64, hidden: int = 128):
        super().__init__()
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.wo(self.wq(x) * torch.sigmoid(self.wk(x)) + self.wv(x))
        return h + self.w2(nn.functional.silu(self.w1(h)) * self.w3(h))


class TiedLMHead(nn.Module):
    """Token embedding and an lm_head sharing one weight; ``head_first`` registers the head first."""

    def __init__(self, vocab: int = 256, dim: int = 64, head_first: bool = False, tied: bool = True):
        super().__init__()
        if head_first:
            self.lm_head = nn.Linear(dim, vocab, bias=False)
            self.embed = nn.Embedding(vocab, dim)
        else:
            self.embed = nn.Embedding(vocab, dim)
            self.lm_head = nn.Linear(dim, vocab, bias=False)
        if tied and head_first:
            self.embed.weight = self.lm_head.weight
        elif tied:
            self.lm_head.weight = self.embed.weight
        self.mix = nn.Linear(dim, dim, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.mix(self.embed(tokens)))


class Embedding(nn.Module):
    def __init__(self, vocab: int = 256, dim: int = 64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.embed(tokens)


class Linear(nn.Module):
    def __init__(self, k: int = 128, n: int = 96, bias: bool = True):
        super().__init__()
        self.proj = nn.Linear(k, n, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


def _activations(shape: tuple[int, ...]) -> Callable[[torch.Generator], tuple]:
    return lambda g: (torch.randn(*shape, generator=g),)


def _tokens(vocab: int, count: int) -> Callable[[torch.Generator], tuple]:
    return lambda g: (torch.randint(0, vocab, (1, count), generator=g),)


def model_cases() -> Iterator[ModelCase]:
    """Every model case in the default set."""
    for recipe, op in (("8da4w", LINEAR_DQ8CA_Q4GSW), ("4w", LINEAR_Q4GSW), ("8da4w-fp32zp", LINEAR_DQ8CA_Q4GSW)):
        for part in ("vulkan", "vulkan-fp16", "vulkan-buffer"):
            rules = ("expected_fusions", "transposed_scales", "zero_point_dtype", "numerics")
            if part == "vulkan" and recipe != "8da4w-fp32zp":
                rules += ("cpu_runtime",)
            yield ModelCase(name="llama_proj", build=LlamaProjections, inputs=_activations((1, 7, 64)),
                            recipe=recipe, partitioner=part, expect_ops=(op,), rules=rules)
    for recipe, op in (("4w-bf16", LINEAR_Q4GSW), ("4w-bf16-unwrap", LINEAR_Q4GSW), ("8da4w-bf16", LINEAR_DQ8CA_Q4GSW),
                       ("8da4w-bf16-unwrap", LINEAR_DQ8CA_Q4GSW)):
        yield ModelCase(name="llama_proj", build=LlamaProjections, inputs=_activations((1, 7, 64)), recipe=recipe,
                        expect_ops=(op,), rules=("expected_fusions", "bf16_export", "numerics"))
    yield ModelCase(name="linear_asym", build=Linear, inputs=_activations((1, 5, 128)), recipe="4w-asym",
                    expect_ops=(LINEAR_Q4GSW,), rules=("expected_fusions", "weight_zero_points", "numerics"))
    for name, head_first, tied in (("tied_embed_first", False, True), ("tied_head_first", True, True),
                                   ("untied", False, False)):
        yield ModelCase(name=name, build=lambda h=head_first, t=tied: TiedLMHead(head_first=h, tied=t),
                        inputs=_tokens(256, 6), recipe="emb4w+4w", expect_ops=(EMBEDDING_Q4GSW, LINEAR_Q4GSW),
                        rules=("expected_fusions", "transposed_scales", "tied_weight_dedup", "numerics"))
    for recipe in ("emb4w", "emb4w-perrow", "emb4w-asym"):
        asym = recipe == "emb4w-asym"
        rules = ("expected_fusions", "transposed_scales", "numerics") + (("weight_zero_points",) if asym else ())
        rules += ("cpu_runtime",) if recipe == "emb4w" else ()
        yield ModelCase(name="embedding", build=Embedding, inputs=_tokens(256, 9), recipe=recipe,
                        expect_ops=(EMBEDDING_Q4GSW,), rules=rules,
                        accept_refusal=r"requires symmetric quantization|zero.point" if asym else "")


def default_model_cases() -> Iterator[ModelCase]:
    """The default set: the cases above, the ViT token path (PT2E, XNNPACK), and export_llama's tiny Llama."""
    from vkdiff.cases.llm import llm_cases
    from vkdiff.cases.vit import vit_cases

    yield from model_cases()
    yield from vit_cases()
    yield from llm_cases()


def all_model_cases(pattern: str | None = None) -> list[ModelCase]:
    import re

    regex = re.compile(pattern) if pattern else None
    return [c for c in default_model_cases() if regex is None or regex.search(c.id)]
