"""The static barrier check (``vkdiff lint``): barriers some invocations of a workgroup can skip."""

from __future__ import annotations

import shutil

import pytest

from tests.testutils import compile_glsl, requires_glslc, requires_tree
from vkdiff.device.shaders.uniformity import SkippableBarrier, skippable_barriers

pytestmark = pytest.mark.skipif(shutil.which("spirv-dis") is None, reason="NOT_RUN: spirv-dis missing (apt spirv-tools)")

EARLY_RETURN = """  if (any(greaterThanEqual(scan_pos, tin_limits))) {
    return;
  }
"""
FIXED = """  scan_pos = min(scan_pos, tin_limits - 1);
"""
"""The fix applied to the copy: out-of-range invocations redo an in-range position (writing the same value) and
reach every barrier, instead of returning before them."""


@requires_glslc
def test_an_early_return_on_the_global_id_before_a_barrier_is_flagged_and_a_clamp_is_not():
    (found,) = skippable_barriers(compile_glsl("skip_barrier.glsl"))
    assert found.sources == ("GlobalInvocationId.x",)
    assert found.skippable_with((64, 1, 1)) and not found.skippable_with((1, 64, 1))
    assert skippable_barriers(compile_glsl("skip_barrier.glsl", "-DCLAMPED")) == []


@requires_glslc
def test_a_barrier_after_a_loop_with_a_divergent_trip_count_is_not_flagged_one_inside_it_is():
    assert skippable_barriers(compile_glsl("skip_barrier.glsl", "-DCLAMPED", "-DLOOP_BEFORE")) == []
    (found,) = skippable_barriers(compile_glsl("skip_barrier.glsl", "-DCLAMPED", "-DLOOP_AROUND"))
    assert found.sources == ("LocalInvocationId.x",)


@requires_tree
def test_the_pinned_reduce_variants_are_flagged_and_the_fixed_copy_is_not(et_tree, tmp_path):
    """ExecuTorch #22325: reduce returns out-of-range invocations before its barrier (device lost on Mali)."""
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.shaders.trees import GLSL_SUBDIR

    pinned = ShaderBuilder(et_tree)
    for name in ("sum_float", "mean_half", "amax_float"):
        found = skippable_barriers(pinned.build(name).spv)
        assert found and all(isinstance(b, SkippableBarrier) for b in found)
        assert set(found[0].sources) == {"GlobalInvocationId.x", "GlobalInvocationId.y", "GlobalInvocationId.z"}
    copy = tmp_path / "et"
    shutil.copytree(et_tree / "backends", copy / "backends")
    shader = copy / GLSL_SUBDIR / "reduce.glsl"
    text = shader.read_text()
    assert text.count(EARLY_RETURN) == 1, "the pinned reduce.glsl changed: update the fix this test applies"
    shader.write_text(text.replace(EARLY_RETURN, FIXED))
    fixed = ShaderBuilder(copy)
    for name in ("sum_float", "mean_half", "amax_float"):
        assert skippable_barriers(fixed.build(name).spv) == []
