"""Module factories for ``vkdiff check path.py:factory`` (``(module, example_inputs[, dynamic_shapes])``).

Each lowers with ``VulkanPartitioner`` into the shapes of program users bring: several
Vulkan partitions with CPU instructions between them (``cumsum`` has no Vulkan
implementation, so the partitioner leaves it to the portable runtime).
"""

from __future__ import annotations

import torch
from torch import nn


class TwoPartitions(nn.Module):
    """linear → tanh | cumsum on the CPU | linear → sigmoid: two Vulkan partitions around one CPU op."""

    def __init__(self, width: int = 64, out: int = 32):
        super().__init__()
        self.encoder = nn.Linear(width, width)
        self.head = nn.Linear(width, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(self.encoder(x))
        y = torch.cumsum(y, dim=-1) / 8.0
        return torch.sigmoid(self.head(y))


def two_partitions():
    """Seeded ``TwoPartitions`` and a ``[4, 64]`` input."""
    torch.manual_seed(20261126)
    return TwoPartitions().eval(), (torch.randn(4, 64),)


class MaskedAttention(nn.Module):
    """A pre-norm self-attention block with a causal mask built as ``full(-inf).triu(1)`` (a -inf scalar)."""

    def __init__(self, width: int = 16, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        mask = torch.full((t, t), float("-inf")).triu(1)
        attention = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5 + mask, dim=-1)
        return x + self.proj((attention @ v).transpose(1, 2).reshape(b, t, d))


def masked_attention():
    """Seeded ``MaskedAttention`` and a ``[1, 5, 16]`` input."""
    torch.manual_seed(20261127)
    return MaskedAttention().eval(), (torch.randn(1, 5, 16),)


class GqaMaskedAttention(nn.Module):
    """Grouped-query attention (4 query heads over 2 key/value heads) with a boolean causal mask.

    ``scaled_dot_product_attention(..., enable_gqa=True)`` with a boolean ``attn_mask`` decomposes into
    ``aten.logical_not.default`` (the rows the mask empties), which ``VulkanPartitioner`` delegates.
    """

    def __init__(self, width: int = 32, heads: int = 4, kv_heads: int = 2, tokens: int = 6):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, width // heads
        self.q = nn.Linear(width, width)
        self.kv = nn.Linear(width, 2 * kv_heads * self.head_dim)
        self.proj = nn.Linear(width, width)
        self.register_buffer("mask", torch.ones(tokens, tokens, dtype=torch.bool).tril())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k, v = (z.view(b, t, self.kv_heads, self.head_dim).transpose(1, 2) for z in self.kv(x).chunk(2, dim=-1))
        y = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=self.mask[:t, :t], enable_gqa=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


def gqa_masked_attention():
    """Seeded ``GqaMaskedAttention`` and a ``[1, 6, 32]`` input."""
    torch.manual_seed(20261128)
    return GqaMaskedAttention().eval(), (torch.randn(1, 6, 32),)
