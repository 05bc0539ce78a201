"""How a shader variant computes a reduction: what a reference must round, and where, to follow it.

A float16 kernel that accumulates in float16 carries rounding noise of the order of
``sqrt(K)`` ulps of its partial sums: a bound wide enough for that noise also passes a
kernel that reads one wrong 4-bit code. Evaluated with the variant's arithmetic (the
dtype of its accumulators and the order it adds terms in), the reference reproduces the
kernel's rounding, and only a few ulps separate a correct kernel from the model. Each
launcher declares the arithmetic of the variants it dispatches, ported from their GLSL.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

Accumulator = Literal["float16", "float32"]

FMA_MODELS = ("separate", "fused")
"""How a device may evaluate GLSL ``fma(a, b, c)``: SPIR-V's ``Fma`` need not be fused, so a product rounded
to the accumulator's dtype before the add (``separate``, measured on lavapipe) and one rounding of the exact
``a*b + c`` (``fused``) are both correct."""

STORE_ROUNDINGS = ("to nearest", "toward zero")
"""How a device may round a float32 value it stores as float16: SPIR-V's ``OpFConvert`` without a rounding
decoration and a store to a 16-bit float image may round to nearest or toward zero (lavapipe: nearest into
buffers, toward zero into ``rgba16f`` textures)."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class Arithmetic:
    """The accumulation of one shader variant, as its GLSL writes it."""

    accumulate: Accumulator
    """dtype of the accumulators (``VEC4_T`` of a float16 variant is float16; ``vec4`` is float32)."""
    lanes: int = 1
    """Invocations that split K: lane ``l`` takes the 4-element texels ``l, l + lanes, ...`` in order, then the
    lanes' partial sums are added in a tree (``partial[l] += partial[l + i]`` for ``i = lanes/2 .. 1``)."""
    source: str = ""
    """The GLSL this is read from (``linear_q4gsw_tiled.glsl``)."""
    weight_only: bool = False
    """The variant ignores a dynamically quantized linear's activation qparams and computes the weight-only
    linear on the float input (``linear_q4gsw_coop.glsl``'s dq8ca variants)."""

    def describe(self) -> str:
        order = "sequential over K" if self.lanes == 1 else f"{self.lanes} lanes over K texels, tree-reduced"
        what = "weight-only linear, " if self.weight_only else ""
        return f"{what}{self.accumulate} accumulators, {order}" + (f" ({self.source})" if self.source else "")

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)
