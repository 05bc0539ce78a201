"""Tiny static-int8 conv nets (MobileNet-style, ResNet-style): ET-VK's ``et_vk.q8ta_*`` path.

Quantized with ET-VK's static-int8 recipe (``pt2e-xnnpack-perchannel``: PT2E with
``XNNPACKQuantizer``, static per-tensor int8 activations, per-channel int8 weights; see
``vkdiff.lowering.pt2e``) and lowered with ``VulkanPartitioner``, whose ``FusePatternsPass``
turns every dequantize → conv/add/linear (+ relu) → quantize into one q8ta op::

    MobileNet-style  conv 3×3/2 + relu6 ─┬─ pw 1×1 + relu6 ─ dw 3×3 + relu6 ─ pw 1×1 ─ add ─ avg pool ─ linear
                                         └──────────────────────────────────────────────┘
                     → q8ta_conv2d, q8ta_conv2d_pw ×2, q8ta_conv2d_dw, q8ta_add, q8ta_linear_gemv
                       (relu6 is not fused: dequantize → hardtanh → quantize in float)
    ResNet-style     conv 3×3/2 + bn + relu ─ maxpool 3×3/2 ─ basic block (identity add + relu)
                     ─ basic block /2 (1×1/2 projection) ─ avg pool ─ linear
                     → q8ta_conv2d ×6, q8ta_add ×2, q8ta_linear_gemv

Channel counts are multiples of 4 (ET-VK's depthwise pattern asserts ``OC % 4 == 0``); the
stem's 3 input channels are not. Each lowers in 4-8 s on 2 cores.
"""

from __future__ import annotations

from typing import Iterator

import torch
from torch import nn

from vkdiff.cases.model_case import (Q8TA_ADD, Q8TA_CONV2D, Q8TA_CONV2D_DW, Q8TA_CONV2D_PW, Q8TA_LINEAR_GEMV,
                                     ModelCase)
from vkdiff.cases.vit import STATIC_INT8, image_inputs


class InvertedResidual(nn.Module):
    """MobileNetV2's block at stride 1: pw expand + relu6, dw 3×3 + relu6, pw project, ``x + block(x)``."""

    def __init__(self, channels: int, expand: int = 2):
        super().__init__()
        hidden = channels * expand
        self.expand = nn.Conv2d(channels, hidden, 1)
        self.dw = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden)
        self.project = nn.Conv2d(hidden, channels, 1)
        self.act = nn.ReLU6()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.project(self.act(self.dw(self.act(self.expand(x)))))


class TinyMobileNet(nn.Module):
    """A stem conv (3×3, stride 2) + relu6, one inverted residual block, global average pool and a linear head.

    (``x.mean((2, 3))`` in place of the pool is left to the CPU by the partitioner: two partitions.)

    Example::

        >>> TinyMobileNet().eval()(torch.zeros(1, 3, 16, 16)).shape
        torch.Size([1, 10])
    """

    def __init__(self, channels: int = 8, classes: int = 10):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, stride=2, padding=1)
        self.act = nn.ReLU6()
        self.block = InvertedResidual(channels)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.block(self.act(self.stem(x)))
        return self.head(torch.flatten(self.pool(x), 1))


def _random_batch_norm(channels: int) -> nn.BatchNorm2d:
    """A BatchNorm with non-trivial running statistics (PT2E folds it into the conv before it quantizes)."""
    bn = nn.BatchNorm2d(channels)
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.2, 0.2)
        bn.running_mean.uniform_(-0.2, 0.2)
        bn.running_var.uniform_(0.5, 1.5)
    return bn


class BasicBlock(nn.Module):
    """ResNet's basic block: conv-bn-relu, conv-bn, ``+`` the shortcut (1×1 strided conv-bn when downsampling), relu."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = _random_batch_norm(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = _random_batch_norm(cout)
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), _random_batch_norm(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + self.shortcut(x))


class TinyResNet(nn.Module):
    """A stem (conv 3×3/2, bn, relu, maxpool 3×3/2), an identity block, a downsampling block, global pool, linear.

    Example::

        >>> TinyResNet().eval()(torch.zeros(1, 3, 32, 32)).shape
        torch.Size([1, 10])
    """

    def __init__(self, channels: int = 8, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, channels, 3, stride=2, padding=1, bias=False),
                                  _random_batch_norm(channels), nn.ReLU(), nn.MaxPool2d(3, stride=2, padding=1))
        self.layer1 = BasicBlock(channels, channels)
        self.layer2 = BasicBlock(channels, 2 * channels, stride=2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2 * channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


def convnet_cases() -> Iterator[ModelCase]:
    """The static-int8 conv nets, lowered with ``VulkanPartitioner``."""
    rules = ("expected_fusions", "numerics", "cpu_runtime")
    yield ModelCase(name="mobilenet_q8", build=TinyMobileNet, inputs=image_inputs(16), recipe=STATIC_INT8,
                    expect_ops=(Q8TA_CONV2D, Q8TA_CONV2D_PW, Q8TA_CONV2D_DW, Q8TA_ADD, Q8TA_LINEAR_GEMV), rules=rules)
    yield ModelCase(name="resnet_q8", build=TinyResNet, inputs=image_inputs(32), recipe=STATIC_INT8,
                    expect_ops=(Q8TA_CONV2D, Q8TA_ADD, Q8TA_LINEAR_GEMV), rules=rules)
