"""Which float16 variants declare their accumulation, and the GLSL those declarations are read from."""

from __future__ import annotations

import pytest

from vkdiff.datamodel import Arithmetic
from vkdiff.device.launchers.utils import arithmetic
from vkdiff.device.shaders.ports import stale_files


@pytest.mark.parametrize("variant, declared", [
    ("linear_q4gsw_tiled_buffer_texture2d_half", Arithmetic(accumulate="float16", source="linear_q4gsw_tiled.glsl")),
    ("linear_q4gsw_tiled_texture3d_buffer_half", Arithmetic(accumulate="float32", source="linear_q4gsw_tiled.glsl")),
    ("linear_q4gsw_coop_buffer_buffer_half",
     Arithmetic(accumulate="float16", lanes=64, source="linear_q4gsw_coop.glsl")),
    ("linear_dq8ca_q4gsw_tiled_buffer_texture2d_half_zpint8",
     Arithmetic(accumulate="float16", source="linear_dq8ca_q4gsw_tiled.glsl")),
    ("linear_dq8ca_q4gsw_coop_texture3d_texture2d_half_zpinherit",
     Arithmetic(accumulate="float32", lanes=64, source="linear_q4gsw_coop.glsl", weight_only=True)),
    ("linear_q4gsw_tiled_buffer_texture2d_float", None),
    ("linear_dq8ca_q4gsw_tiled_buffer_texture2d_float_zpint8", None),
])
def test_legacy_linear_variants(variant, declared):
    """``VEC4_T`` is half only with buffer I/O: texture fetches return float32 vectors."""
    assert arithmetic.legacy_linear(variant) == declared


def test_q4gsw_linear_declares_its_float32_gemv_only():
    gemv = arithmetic.q4gsw_linear("q4gsw_linear_gemv_coop__w_4x8_nc_buffer_g1w64_buffer_half")
    assert gemv == Arithmetic(accumulate="float32", source="q4gsw_linear_gemv_coop__w_4x8.glsl")
    assert arithmetic.q4gsw_linear("q4gsw_linear_gemm__tin__w_4x8_nc_buffer_half") is None
    assert arithmetic.q4gsw_linear("q4gsw_linear_gemv_coop__w_4x8_nc_buffer_g1w64_buffer_float") is None


def test_the_declarations_match_the_main_tree(et_tree):
    """A tree whose GLSL differs makes every result that used a declaration ``port-stale``."""
    ports = arithmetic.DQ8CA_PORTS + arithmetic.GEMV_W4X8_PORTS
    assert stale_files(ports, et_tree) == []
