"""SPIR-V reflection and the transforms naga needs, on the project's own shaders."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.testutils import compile_glsl, requires_test_spirv
from vkdiff.device.shaders import spirv

pytestmark = requires_test_spirv


def disassemble(spv: bytes, tmp_path) -> str:
    path = tmp_path / "m.spv"
    path.write_bytes(spv)
    return subprocess.run(["spirv-dis", str(path)], capture_output=True, text=True, check=True).stdout


def validate(spv: bytes, tmp_path) -> None:
    path = tmp_path / "v.spv"
    path.write_bytes(spv)
    subprocess.run(["spirv-val", str(path)], check=True, capture_output=True)


def test_reflect_buffer_shader():
    refl = spirv.reflect(compile_glsl("scale_add.glsl"))
    assert [(b.binding, b.kind) for b in refl.bindings] == [
        (0, "storage-buffer"), (1, "storage-buffer"), (2, "uniform-buffer")]
    assert refl.immediate_size == 8
    assert refl.spec_ids == (0, 1, 2, 3)
    assert refl.local_size == (1, 1, 1)


def test_reflect_texture_shader():
    refl = spirv.reflect(compile_glsl("texel_copy3d.glsl"))
    out, inp, ubo = refl.bindings
    assert (out.kind, out.format, out.access, out.dim) == ("storage-texture", "rgba32float", "write-only", "3d")
    assert (inp.kind, inp.sample_type, inp.dim) == ("sampled-texture", "float", "3d")
    assert ubo.kind == "uniform-buffer"
    assert refl.immediate_size == 0


def test_reflect_int_texture2d():
    out, inp = spirv.reflect(compile_glsl("int_texel2d.glsl")).bindings
    assert (out.format, out.dim) == ("rgba32sint", "2d")
    assert (inp.sample_type, inp.dim) == ("sint", "2d")


def test_bake_sets_values_and_local_size(tmp_path):
    baked = spirv.bake_spec_constants(compile_glsl("scale_add.glsl"), {3: 5, 9: 1}, (16, 1, 1))
    validate(baked, tmp_path)
    refl = spirv.reflect(baked)
    assert refl.spec_ids == ()
    assert refl.local_size == (16, 1, 1)
    text = disassemble(baked, tmp_path)
    assert "OpSpecConstant" not in text
    assert re.search(r"OpConstant %int 10\b", text), "add_k * 2 must fold to 10"


@pytest.mark.skipif(shutil.which("spirv-opt") is None, reason="NOT_RUN: spirv-opt missing (apt-get install spirv-tools)")
def test_bake_rejects_bad_module():
    with pytest.raises(spirv.SpirvError, match="not a SPIR-V module"):
        spirv.bake_spec_constants(b"\0" * 64, {}, (1, 1, 1))


def test_rewrite_combined_samplers(tmp_path):
    original = compile_glsl("texel_copy3d.glsl")
    assert "OpTypeSampledImage" in disassemble(original, tmp_path)
    assert disassemble(original, tmp_path).count("OpImage ") >= 1
    rewritten = spirv.rewrite_combined_samplers(original)
    validate(rewritten, tmp_path)
    text = disassemble(rewritten, tmp_path)
    assert "OpImage " not in text
    assert not re.search(r"OpTypePointer UniformConstant %\w*sampled", text, re.I)
    assert len(rewritten) == len(original)


def test_rewrite_is_identity_without_samplers():
    spv = compile_glsl("scale_add.glsl")
    assert spirv.rewrite_combined_samplers(spv) == spv


def test_words_of_rejects_garbage():
    with pytest.raises(spirv.SpirvError, match=re.escape("not a SPIR-V module: magic 0x0")):
        spirv.words_of(b"\0" * 20)
    with pytest.raises(spirv.SpirvError, match="not a whole number of words"):
        spirv.words_of(b"\0" * 21)


def _float_constants(spv: bytes) -> set[int]:
    words = spirv.words_of(spv)
    floats = {int(ops[0]) for _, op, ops in spirv.instructions(words) if op == spirv.OP_TYPE_FLOAT}
    return {int(words[at + 3]) for at, op, ops in spirv.instructions(words) if op == spirv.OP_CONSTANT
            and int(ops[0]) in floats}


def test_infinite_literals_become_the_largest_finite_value_and_nothing_else_changes(tmp_path):
    spv = compile_glsl("inf_literals.glsl")
    assert {0x7F800000, 0xFF800000} <= _float_constants(spv), "glslc folds -1.0/0.0 into a -inf constant"
    clamped, count = spirv.clamp_infinite_constants(spv)
    assert count == 2
    constants = _float_constants(clamped)
    assert {0x7F7FFFFF, 0xFF7FFFFF} <= constants and not {0x7F800000, 0xFF800000} & constants
    assert 0x40000000 in constants, "the finite 2.0 is kept"
    assert len(clamped) == len(spv)
    validate(clamped, tmp_path)
    finite = compile_glsl("scale_add.glsl")
    assert spirv.clamp_infinite_constants(finite) == (finite, 0)


def test_relaxed_precision_is_read_from_the_module():
    assert spirv.relaxed_precision(compile_glsl("mediump_scale.glsl"))
    assert not spirv.relaxed_precision(compile_glsl("scale_add.glsl"))
