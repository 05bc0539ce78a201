"""Small real models and their cases: each lowers in seconds on 2 cores."""

from __future__ import annotations

from typing import Callable, Iterator

import torch
from torch import nn

from vkdiff.cases.model_case import EMBEDDING_Q4GSW, LINEAR_DQ8CA_Q4GSW, LINEAR_Q4GSW, ModelCase

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


class TwoHeads(nn.Module):
    """A shared trunk and two heads: a model whose forward returns a tuple."""

    def __init__(self, dim: int = 64):
        super().__init__()
        self.trunk = nn.Linear(dim, dim, bias=False)
        self.head_a = nn.Linear(dim, 32, bias=False)
        self.head_b = nn.Linear(dim, 48, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.sigmoid(self.trunk(x))
        return self.head_a(h), self.head_b(h * h)


def random_activations(shape: tuple[int, ...]) -> Callable[[torch.Generator], tuple]:
    return lambda g: (torch.randn(*shape, generator=g),)


def random_tokens(vocab: int, count: int) -> Callable[[torch.Generator], tuple]:
    return lambda g: (torch.randint(0, vocab, (1, count), generator=g),)


LARGE_VOCAB = 20000
"""Above 16384, the texture limit ExecuTorch's layout pass plans for (ExecuTorch issue #22333)."""


def tokens_across(vocab: int, boundary: int, count: int) -> Callable[[torch.Generator], tuple]:
    """Half the tokens below ``boundary``, half at or above it (rows on both sides of a texture limit)."""
    def make(g: torch.Generator) -> tuple:
        low = torch.randint(0, boundary, (count // 2,), generator=g)
        high = torch.randint(boundary, vocab, (count - count // 2,), generator=g)
        order = torch.randperm(count, generator=g)
        return (torch.cat([low, high])[order].reshape(1, count),)
    return make


def model_cases() -> Iterator[ModelCase]:
    """Every model case in the default set."""
    for recipe, op in (("8da4w", LINEAR_DQ8CA_Q4GSW), ("4w", LINEAR_Q4GSW), ("8da4w-fp32zp", LINEAR_DQ8CA_Q4GSW)):
        for part in ("vulkan", "vulkan-fp16", "vulkan-buffer"):
            rules = ("expected_fusions", "transposed_scales", "zero_point_dtype", "numerics")
            if part == "vulkan" and recipe != "8da4w-fp32zp":
                rules += ("cpu_runtime",)
            yield ModelCase(name="llama_proj", build=LlamaProjections, inputs=random_activations((1, 7, 64)),
                            recipe=recipe, partitioner=part, expect_ops=(op,), rules=rules)
    for recipe, op in (("4w-bf16", LINEAR_Q4GSW), ("4w-bf16-unwrap", LINEAR_Q4GSW), ("8da4w-bf16", LINEAR_DQ8CA_Q4GSW),
                       ("8da4w-bf16-unwrap", LINEAR_DQ8CA_Q4GSW)):
        yield ModelCase(name="llama_proj", build=LlamaProjections, inputs=random_activations((1, 7, 64)), recipe=recipe,
                        expect_ops=(op,), rules=("expected_fusions", "bf16_export", "numerics"))
    yield ModelCase(name="two_heads", build=TwoHeads, inputs=random_activations((1, 5, 64)), recipe="4w",
                    expect_ops=(LINEAR_Q4GSW,), rules=("expected_fusions", "numerics"))
    yield ModelCase(name="linear_asym", build=Linear, inputs=random_activations((1, 5, 128)), recipe="4w-asym",
                    expect_ops=(LINEAR_Q4GSW,), rules=("expected_fusions", "weight_zero_points", "numerics"))
    for name, head_first, tied in (("tied_embed_first", False, True), ("tied_head_first", True, True),
                                   ("untied", False, False)):
        yield ModelCase(name=name, build=lambda h=head_first, t=tied: TiedLMHead(head_first=h, tied=t),
                        inputs=random_tokens(256, 6), recipe="emb4w+4w", expect_ops=(EMBEDDING_Q4GSW, LINEAR_Q4GSW),
                        rules=("expected_fusions", "transposed_scales", "tied_weight_dedup", "numerics"))
    yield ModelCase(name="embedding_large_vocab", build=lambda: Embedding(vocab=LARGE_VOCAB),
                    inputs=tokens_across(LARGE_VOCAB, 16384, 12), recipe="fp32", rules=("numerics",))
    for recipe in ("emb4w", "emb4w-perrow", "emb4w-asym"):
        asym = recipe == "emb4w-asym"
        rules = ("expected_fusions", "transposed_scales", "numerics") + (("weight_zero_points",) if asym else ())
        rules += ("cpu_runtime",) if recipe == "emb4w" else ()
        yield ModelCase(name="embedding", build=Embedding, inputs=random_tokens(256, 9), recipe=recipe,
                        expect_ops=(EMBEDDING_Q4GSW,), rules=rules,
                        accept_refusal=r"requires symmetric quantization|zero.point" if asym else "")
