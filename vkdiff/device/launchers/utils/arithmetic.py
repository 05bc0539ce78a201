"""The accumulation of ET-VK's 4-bit linear shaders, read from their GLSL (``vkdiff.datamodel.arithmetic``).

Only float16 variants are declared: a float32 kernel's rounding is far below the
tolerance policy's bound, which already catches a single wrong code there.

* ``linear_q4gsw_tiled`` / ``linear_dq8ca_q4gsw_tiled``: one invocation per output tile
  adds every K in order into ``VEC4_T`` accumulators (float16 with buffer I/O, float32 with
  texture I/O)
  (``fp_accumulate_with_int4_weight``; dq8ca adds one scaled integer sum per group,
  ``accumulate_out_tile_with_int_accum_from_int4_weights``);
* ``linear_q4gsw_coop`` / ``linear_dq8ca_q4gsw_coop``: ``WGS`` = 64 lanes take K texels
  round-robin, then ``accumulate_out_tile_with_out_tile`` adds them in a tree, in float16;
  the dq8ca variants only add the activation qparams' bindings: they compute the weight-only
  linear on the float input (the ``etvk-dq8ca-gemv-is-weight-only`` finding);
* ``q4gsw_linear_gemv_coop__w_4x8``: ``vec4`` (float32) accumulators, stored once as half.
"""

from __future__ import annotations

from vkdiff.datamodel.arithmetic import Arithmetic
from vkdiff.device.shaders.ports import Port

MAIN = "executorch main cff6f4dd32"
GLSL = "runtime/graph/ops/glsl/"

COOP_LANES = 64
"""``WGS`` of ``linear_q4gsw_coop.yaml`` (shared by the dq8ca coop variants)."""

LEGACY_PORTS = (
    Port(file=GLSL + "linear_fp_output_tile_fp_int4_compute.glslh", functions=("fp_accumulate_with_int4_weight",),
         sha256="d8ec2c5b199aabc58bab3ed0c6d775dadbeecf38c22797a83288b94f5a428b00", tree=MAIN),
    Port(file=GLSL + "linear_fp_output_tile_fp_compute.glslh",
         functions=("accumulate_out_tile_with_out_tile", "add_bias_to_out_tile"),
         sha256="db92ed4487f20ac7d9c78b585b58a45afc692c7d48e547e7bf3001338257e67f", tree=MAIN),
)
"""GLSL behind the ``linear_q4gsw_{tiled,coop}`` declarations."""

DQ8CA_PORTS = LEGACY_PORTS + (
    Port(file=GLSL + "linear_fp_output_tile_int8_int4_compute.glslh",
         functions=("accumulate_out_tile_with_int_accum_from_int4_weights",),
         sha256="ba118abf939d0a9a470dc25a677547d95bbbce1ac74d792821caa189982afa2e", tree=MAIN),
    Port(file=GLSL + "linear_int8_input_block.glslh", functions=("quantize", "quantize_and_pack"),
         sha256="e058b074bf1ae8f0039e3edb794df7c4f0d2d392f6d6da3993aab5c006078f42", tree=MAIN),
)
"""GLSL behind the ``linear_dq8ca_q4gsw_{tiled,coop}`` declarations."""

GEMV_W4X8_PORTS = (
    Port(file=GLSL + "q4gsw_linear_gemv_coop__w_4x8.glsl", functions=("main",),
         sha256="aee3ce1e8cf5e31518ad13ad1d46cdd671df3ea5942f74539ad6b832a4b36181", tree=MAIN),
)
"""GLSL behind the ``q4gsw_linear_gemv_coop__w_4x8`` declaration."""


def _half(variant: str) -> bool:
    return "_half" in variant


def legacy_linear(variant: str) -> Arithmetic | None:
    """``linear_q4gsw_{tiled,coop}_<io>_<weight>_half`` and the dq8ca ones: ``VEC4_T`` is ``texel_load_type``, a
    float16 vector for buffer I/O but ``vec4`` (float32) for texture I/O, whose texel fetches return float32."""
    if not _half(variant):
        return None
    for kind, lanes in (("_tiled_", 1), ("_coop_", COOP_LANES)):
        if kind in variant:
            io = variant.split(kind, 1)[1].split("_", 1)[0]
            source = variant.split(kind)[0].replace("linear_dq8ca_q4gsw", "linear_dq8ca_q4gsw" if lanes == 1
                                                    else "linear_q4gsw") + kind.rstrip("_") + ".glsl"
            return Arithmetic(accumulate="float16" if io == "buffer" else "float32", lanes=lanes, source=source,
                              weight_only=lanes > 1 and variant.startswith("linear_dq8ca_q4gsw"))
    return None


def q4gsw_linear(variant: str) -> Arithmetic | None:
    """``Q4gswLinear.cpp``'s float16 GEMV accumulates in float32; its ``tin`` GEMM is not declared."""
    if _half(variant) and variant.startswith("q4gsw_linear_gemv_coop__w_4x8"):
        return Arithmetic(accumulate="float32", source="q4gsw_linear_gemv_coop__w_4x8.glsl")
    return None
