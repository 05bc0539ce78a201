"""``spirv.rewrite_integer_smod``: the floored remainder naga cannot translate, rewritten exactly.

ET-VK's conv weight prepack shaders (``conv2d_prepack_weights``, ``conv2d_dw_prepack_weights``,
``conv_transpose2d_prepack_weights``) take ``%`` of ``ivec4``s; glslc emits ``OpSMod``, which naga lowers
through ``floor`` and rejects on integer vectors ("Call to builtin Floor has incorrect or ambiguous arguments").
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from vkdiff.device.shaders import spirv

GLSL = """#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer B { ivec4 v[]; };
void main() { v[0] = v[1] % v[2]; v[3].x = v[1].x % 3; }
"""


def _c_srem(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``OpSRem``: truncated remainder (sign of the dividend)."""
    return np.fmod(a, b)


def test_the_rewrite_is_the_floored_remainder_for_every_sign():
    a = np.arange(-40, 41, dtype=np.int64)[:, None]
    b = np.array([-7, -4, -3, -1, 1, 2, 3, 5, 8], np.int64)[None, :]
    rewritten = _c_srem(_c_srem(a, b) + b, b)
    np.testing.assert_array_equal(rewritten, np.mod(a, b))
    with pytest.raises(AssertionError, match="Mismatched elements"):
        np.testing.assert_array_equal(_c_srem(a, b), np.mod(a, b))


@pytest.mark.skipif(shutil.which("glslc") is None or shutil.which("spirv-val") is None,
                    reason="NOT_RUN: needs glslc and spirv-val (apt install glslc spirv-tools)")
def test_every_smod_is_replaced_and_the_module_stays_valid(tmp_path):
    src, spv = tmp_path / "m.comp", tmp_path / "m.spv"
    src.write_text(GLSL)
    subprocess.run(["glslc", "-fshader-stage=compute", str(src), "-o", str(spv)], check=True)
    module = spv.read_bytes()
    opcodes = lambda m: [op for _, op, _ in spirv.instructions(spirv.words_of(m))]  # noqa: E731
    assert opcodes(module).count(spirv.OP_SMOD) == 2
    out = spirv.rewrite_integer_smod(module)
    assert spirv.OP_SMOD not in opcodes(out) and opcodes(out).count(spirv.OP_SREM) == 4
    assert spirv.words_of(out)[3] == spirv.words_of(module)[3] + 4
    (tmp_path / "out.spv").write_bytes(out)
    subprocess.run(["spirv-val", str(tmp_path / "out.spv")], check=True)
    assert spirv.rewrite_integer_smod(out) == out
