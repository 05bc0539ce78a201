"""ViT/DeiT token path: patch tokens and a class token concatenated, then a position embedding.

The token path is where PT2E + ``XNNPACKQuantizer`` must share one set of qparams
between a ``cat``'s inputs and output::

    image ─ Conv2d(3, E, P, stride=P) ─ flatten(2) ─ transpose(1, 2) ─┐
                                                                       cat(dim=1) ─ + pos_embed ─ ...
    cls_token (1, 1, E) ─ expand(B, -1, -1) ──────────────────────────┘

then transformer blocks, a final LayerNorm and a Linear head on the class token (``x[:, 0]``).

A quantizer that anchors the cat's shared qparams on the class-token input (a
constant) instead of the patch-token activation path leaves the ``transpose``
with different input and output qparams, which XNNPACK refuses at runtime init
(``Failed to create static transpose node``). The rule is ``cat_qparams``. Lowered static-int8
to Vulkan (``STATIC_INT8``), the same token path runs in float between the patch conv's
``dequantize_per_tensor`` and the ``quantize_per_tensor`` after the cat, and ET-VK would
requantize a mismatch silently: the rule there is ``vk_cat_qparams``.

timm and torchvision are not available here: the architecture (timm's ``VisionTransformer``
layout, attention written with ``Linear``/``matmul``/``softmax``) is defined below.
The defaults lower through XNNPACK in seconds; :func:`deit_tiny` builds the full
DeiT-tiny sizes (~55 s to lower on 2 cores), not used by default.
"""

from __future__ import annotations

from typing import Callable, Iterator

import torch
from torch import nn

from vkdiff.cases.model_case import Q8TA_ADD, Q8TA_CONV2D, Q8TA_LINEAR, Q8TA_LINEAR_GEMV, ModelCase

RECIPE = "pt2e-xnnpack"
"""Recipe name of :func:`vkdiff.lowering.pt2e.quantize_pt2e_xnnpack` in ``vkdiff.lowering.lower.RECIPES``."""
STATIC_INT8 = "pt2e-xnnpack-perchannel"
"""ET-VK's static-int8 recipe (per-channel weights), which lowers to ``et_vk.q8ta_*`` with ``VulkanPartitioner``."""


class Attention(nn.Module):
    """Multi-head self-attention from ``Linear``, ``matmul`` and ``softmax`` (exports without SDPA)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        if dim % heads:
            raise ValueError(f"embed dim {dim} is not divisible by heads {heads}")
        self.heads = heads
        self.head_dim = dim // heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * self.scale, dim=-1)
        return self.proj(torch.matmul(attn, v).transpose(1, 2).reshape(b, n, c))


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(norm1(x))``, then ``x + mlp(norm2(x))`` (GELU MLP)."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float = 4.0):
        super().__init__()
        hidden = int(dim * mlp_ratio)
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


class ViTTokenPath(nn.Module):
    """A small ViT whose token path is DeiT's: conv patches, class token, cat, position embedding.

    Args:
        image (int): input height and width.
        patch (int): patch size (conv kernel and stride).
        embed (int): embedding dimension.
        depth (int): number of transformer blocks.
        heads (int): attention heads.
        mlp_ratio (float): MLP hidden size over ``embed``.
        classes (int): output classes of the head.
        in_chans (int): input channels.
        cls_std (float): standard deviation of the class token's initial values.

    Note:
        The class token is drawn wider (``cls_std=1.0``) than timm's ``0.02`` initialisation on
        purpose: a mis-anchored cat only changes qparams when the class token's range differs
        from the patch tokens'. With ``cls_std=0.02`` both fall inside the conv output's range,
        the pre-fix quantizer (``harness.pt2e.unfixed_cat_annotation``) then yields identical
        qparams, and the case could not tell a fixed quantizer from a broken one.

    Example::

        >>> m = ViTTokenPath().eval()
        >>> m(torch.zeros(1, 3, 32, 32)).shape
        torch.Size([1, 10])
    """

    def __init__(self, *, image: int = 32, patch: int = 8, embed: int = 64, depth: int = 1, heads: int = 2,
                 mlp_ratio: float = 4.0, classes: int = 10, in_chans: int = 3, cls_std: float = 1.0):
        super().__init__()
        if image % patch:
            raise ValueError(f"image size {image} is not a multiple of patch size {patch}")
        self.image = image
        self.in_chans = in_chans
        tokens = (image // patch) ** 2
        self.patch_embed = nn.Conv2d(in_chans, embed, patch, stride=patch)
        self.cls_token = nn.Parameter(cls_std * torch.randn(1, 1, embed))
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, tokens + 1, embed))
        self.blocks = nn.Sequential(*(Block(embed, heads, mlp_ratio) for _ in range(depth)))
        self.norm = nn.LayerNorm(embed, eps=1e-6)
        self.head = nn.Linear(embed, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.patch_embed(x).flatten(2).transpose(1, 2)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, tokens], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def deit_tiny() -> ViTTokenPath:
    """DeiT-tiny sizes: embed 192, 12 blocks, 3 heads, patch 16, 224×224, 1000 classes (~55 s to lower)."""
    return ViTTokenPath(image=224, patch=16, embed=192, depth=12, heads=3, classes=1000)


def image_inputs(image: int = 32, batch: int = 1, channels: int = 3) -> Callable[[torch.Generator], tuple]:
    """Seeded NCHW image inputs for a :class:`ModelCase`."""
    return lambda g: (torch.randn(batch, channels, image, image, generator=g),)


def vit_cases() -> Iterator[ModelCase]:
    """ViT token-path cases: PT2E (XNNPACKQuantizer, symmetric) lowered to XNNPACK, depth 1 and 2; and depth 1
    static-int8 on Vulkan (patch conv, token cat, ``+ pos_embed``, LayerNorm/attention, the linears as q8ta ops)."""
    for depth in (1, 2):
        yield ModelCase(name=f"vit_token_path_d{depth}", build=lambda d=depth: ViTTokenPath(depth=d),
                        inputs=image_inputs(32), recipe=RECIPE, partitioner="xnnpack", rules=("cat_qparams", "cpu_runtime"))
    yield ModelCase(name="vit_token_path_d1", build=lambda: ViTTokenPath(depth=1), inputs=image_inputs(32),
                    recipe=STATIC_INT8, expect_ops=(Q8TA_CONV2D, Q8TA_ADD, Q8TA_LINEAR, Q8TA_LINEAR_GEMV),
                    rules=("expected_fusions", "numerics", "cpu_runtime", "cat_qparams", "vk_cat_qparams"))
