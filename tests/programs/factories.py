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
