"""A model case: a small real module, a quantization recipe, a partitioner and what the lowering must produce.

Modules and inputs are built from a seed derived from the model family, so every
executor sees the same weights and inputs.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Callable

import torch
from torch import nn

LINEAR_Q4GSW = "et_vk.linear_q4gsw"
LINEAR_DQ8CA_Q4GSW = "et_vk.linear_dq8ca_q4gsw"
EMBEDDING_Q4GSW = "et_vk.embedding_q4gsw"
Q8TA_CONV2D = "et_vk.q8ta_conv2d"
Q8TA_CONV2D_DW = "et_vk.q8ta_conv2d_dw"
Q8TA_CONV2D_PW = "et_vk.q8ta_conv2d_pw"
Q8TA_ADD = "et_vk.q8ta_add"
Q8TA_LINEAR = "et_vk.q8ta_linear"
Q8TA_LINEAR_GEMV = "et_vk.q8ta_linear_gemv"


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
    """Quantization recipe (see ``vkdiff.lowering.lower.RECIPES``)."""
    partitioner: str = "vulkan"
    """Partitioner (see ``vkdiff.lowering.lower.PARTITIONERS``)."""
    expect_ops: tuple[str, ...] = ()
    """Fused ops the delegate must contain (e.g. ``et_vk.linear_q4gsw``)."""
    rules: tuple[str, ...] = ()
    """Fusion rules to check (names in ``vkdiff.fusions.RULES``)."""
    accept_refusal: str = ""
    """Regex over a lowering error that counts as a clear, intended refusal (e.g. asymmetric weights)."""
    pipeline: str = "export"
    """``export`` (quantize → torch.export → to_edge_transform_and_lower) or ``export_llama`` (ExecuTorch's LLM
    export pipeline, see ``vkdiff.lowering.llm_export``)."""
    options: tuple[tuple[str, Any], ...] = ()
    """Pipeline-specific options as sorted (name, value) pairs (part of the case identity)."""
    decode: Callable[[tuple, int], tuple] | None = None
    """For generation cases: the next call's inputs from the previous call's inputs and its greedy token
    (each model call returns logits); None for single-call cases."""
    decode_steps: int = 0
    """Calls after the first one (decode steps) a generation case makes on devices."""
    dynamic_shapes: Any = None
    """``torch.export``'s ``dynamic_shapes`` for the example inputs (None: static)."""
    tolerance: Any = None
    """A ``Tolerance`` of the model output against eager that replaces vkdiff's policy (a user's own), or None."""
    more_calls: tuple[tuple, ...] = ()
    """Inputs of further calls on the same lowered program (other sizes within dynamic shapes' bounds)."""

    @property
    def id(self) -> str:
        return f"{self.name}[{self.recipe}-{self.partitioner}]"

    @property
    def variant(self) -> str:
        """The knob part of the id, a display label."""
        return f"{self.recipe}-{self.partitioner}"

    @property
    def knobs(self) -> dict[str, Any]:
        """Every knob by name, as results record them."""
        return {"recipe": self.recipe, "partitioner": self.partitioner, **dict(self.options)}

    def seed(self) -> int:
        """Weights and inputs depend on the model family only, so recipes of one model compare like for like."""
        return int.from_bytes(hashlib.sha256(self.name.encode()).digest()[:4], "little")

    def instantiate(self) -> tuple[nn.Module, tuple]:
        """The float module in eval mode and its example inputs, both seeded."""
        torch.manual_seed(self.seed())
        model = self.build().eval()
        generator = torch.Generator().manual_seed(self.seed())
        return model, self.inputs(generator)
