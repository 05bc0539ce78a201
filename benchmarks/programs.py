"""Module factories for the benchmarks (``(module, example_inputs)``, as ``vkdiff check file.py:factory`` takes)."""

from __future__ import annotations

import torch
from torch import nn


class DeepStack(nn.Module):
    """``blocks`` residual blocks of ``x + tanh(W x) * sigmoid(tanh(W x))``: five delegate nodes per block."""

    def __init__(self, blocks: int = 40, width: int = 64):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            y = torch.tanh(layer(x))
            x = x + y * torch.sigmoid(y)
        return x


def deep_stack():
    """A 40-block stack (≥ 200 nodes once lowered with 4-bit weights) and a ``[8, 64]`` input."""
    torch.manual_seed(20261126)
    return DeepStack().eval(), (torch.randn(8, 64) * 0.5,)
