"""The static bounds check (``vkdiff lint``): buffer and image accesses no check against tensor metadata guards."""

from __future__ import annotations

import shutil

import pytest

from tests.testutils import compile_glsl, requires_glslc, requires_tree
from vkdiff.device.shaders.bounds import UncheckedAccess, unchecked_accesses

pytestmark = pytest.mark.skipif(shutil.which("spirv-dis") is None, reason="NOT_RUN: spirv-dis missing (apt spirv-tools)")


@requires_glslc
def test_an_unguarded_write_is_flagged_and_a_guarded_or_clamped_one_is_not():
    found = unchecked_accesses(compile_glsl("bounds_three_ways.glsl"))
    assert [(a.binding, a.access, a.kind) for a in found] == [(0, "write", "buffer"), (5, "write", "image")]
    assert found[0].describe({0: "t_out"}) == ("buffer write of binding 0 (t_out) in main: no bounds check against "
                                               "tensor metadata guards it")


@requires_tree
def test_the_pinned_tree_guards_its_elementwise_writes_and_flags_the_single_element_ones(et_tree, tmp_path):
    """A binary op returns past its limits (guarded); ``scalar_tensor`` writes element 0 with no check (flagged).
    Taking the early return out of a copy of the unary shader makes its write unchecked."""
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.shaders.trees import GLSL_SUBDIR

    pinned = ShaderBuilder(et_tree)
    assert unchecked_accesses(pinned.build("binary_add_texture3d_float").spv) == []
    (write,) = [a for a in unchecked_accesses(pinned.build("scalar_tensor_float_buffer_float").spv)]
    assert isinstance(write, UncheckedAccess) and (write.binding, write.access) == (0, "write")
    copy = tmp_path / "et"
    shutil.copytree(et_tree / "backends", copy / "backends")
    shader = copy / GLSL_SUBDIR / "unary_op.glsl"
    text = shader.read_text()
    guard = "  if (any(greaterThanEqual(pos, out_limits.xyz))) {\n    return;\n  }\n"
    assert text.count(guard) >= 1, "the pinned unary_op.glsl changed: update the guard this test removes"
    shader.write_text(text.replace(guard, ""))
    name = "abs_float_texture3d"
    assert unchecked_accesses(pinned.build(name).spv) == []
    assert sorted(a.access for a in unchecked_accesses(ShaderBuilder(copy).build(name).spv)) == ["read", "write"]


@requires_tree
def test_vkdiff_lint_reports_both_checks_by_binding_name(et_tree, capsys):
    import json

    from vkdiff.entry.cli import main

    code = main(["lint", "--et-src", str(et_tree), "--variants", "^(scalar_tensor_float_buffer_float|sum_float)$",
                 "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert list(report["skippable_barriers"]) == ["sum_float"]
    assert report["unchecked_accesses"] == {"scalar_tensor_float_buffer_float": [
        "buffer write of binding 0 (t_outBuffer) in main: no bounds check against tensor metadata guards it"]}
