"""Shader build through executorch's codegen, on a small tree of the project's own templates."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tests.testutils import requires_glslc, requires_tree, requires_vulkan
from vkdiff.device.shaders import build
from vkdiff.device.runtime import resources
from vkdiff.device.shaders.dispatch import dispatch


pytestmark = requires_glslc


def test_variants_come_from_the_yaml(tree):
    names = build.ShaderBuilder(tree).variants()
    assert {"vk_axpy_buffer_float", "vk_axpy_buffer_half", "vk_dot", "vk_broken"} <= names
    assert "vk_helpers" not in names


def test_build_is_cached_and_indexed(tree):
    builder = build.ShaderBuilder(tree)
    first = builder.build("vk_axpy_buffer_float")
    assert first.spv[:4] == b"\x03\x02\x23\x07"
    assert "-O" in first.flags and "--target-env=vulkan1.1" in first.flags
    assert not first.polyfilled
    assert builder.has_prebuilt()
    fresh = build.ShaderBuilder(tree)

    def no_compile(*args, **kwargs):
        raise AssertionError("compiled again although the cache holds the module")

    fresh._compile = no_compile
    again = fresh.build("vk_axpy_buffer_float")
    assert again.spv == first.spv


def test_broken_shader_is_build_fail_with_compiler_message(tree):
    with pytest.raises(build.BuildError, match="vk_broken: glslc failed: .*undeclared_identifier"):
        build.ShaderBuilder(tree).build("vk_broken")


def test_unknown_variant_is_build_error(tree):
    with pytest.raises(build.BuildError, match="no such shader variant"):
        build.ShaderBuilder(tree).build("vk_absent")


def test_glslc_missing_names_the_package(monkeypatch):
    build.glslc_version.cache_clear()
    monkeypatch.setenv("PATH", "/nonexistent")
    try:
        with pytest.raises(build.GlslcMissingError, match=r"install Debian package 'glslc'"):
            build.glslc_version()
    finally:
        build.glslc_version.cache_clear()


@requires_vulkan
@pytest.mark.parametrize("dtype", (np.float32, np.float16))
def test_codegen_variant_runs(tree, gpu, pipelines, rng, dtype):
    if dtype == np.float16 and "shader-f16" not in gpu.features:
        pytest.skip("NOT_SUPPORTED: adapter lacks shader-f16")
    name = f"vk_axpy_buffer_{'float' if dtype == np.float32 else 'half'}"
    shader = build.ShaderBuilder(tree).build(name)
    pipeline = pipelines.get(shader.spv, {3: 3}, (64, 1, 1), label=name)
    x = rng.standard_normal(50).astype(dtype)
    out = resources.poisoned(gpu, (50,), dtype, "buffer")
    dispatch(gpu, pipeline, [out, resources.buffer_tensor(gpu, x),
                             resources.uniform(gpu, np.array([50, 1, 1, 1], np.int32).tobytes())], (50, 1, 1))
    np.testing.assert_array_equal(resources.read(gpu, out), (x.astype(np.float32) * 6).astype(dtype))


def _dot_reference(a: np.ndarray, b: np.ndarray, acc: np.ndarray) -> np.ndarray:
    va = a.view(np.int8).reshape(-1, 4).astype(np.int64)
    vb = b.view(np.int8).reshape(-1, 4).astype(np.int64)
    total = acc.astype(np.int64) + (va * vb).sum(1)
    return np.clip(total, -2**31, 2**31 - 1).astype(np.int32)


@requires_vulkan
def test_dot_product_polyfill_is_exact_and_saturates(tree, gpu, pipelines, rng):
    shader = build.ShaderBuilder(tree).build("vk_dot")
    assert shader.polyfilled == (not build.glslc_has_dot_product())
    n = 256
    a = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    b = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    acc = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    acc[:8] = [2**31 - 1, 2**31 - 10, -2**31, -2**31 + 10, 0, 1, -1, 2**30]
    a[:4] = b[:4] = np.int32(0x7F7F7F7F)
    a[2:4] = np.array([0x81818181] * 2, np.uint32).view(np.int32)
    pipeline = pipelines.get(shader.spv, {3: n}, (64, 1, 1), label="vk_dot")
    out = resources.poisoned(gpu, (n,), np.int32, "buffer")
    dispatch(gpu, pipeline, [out, *(resources.buffer_tensor(gpu, v) for v in (a, b, acc))], (n, 1, 1))
    np.testing.assert_array_equal(resources.read(gpu, out), _dot_reference(a, b, acc))


def test_codegen_comes_from_the_tree_when_it_has_one(tree):
    """Templates and codegen must match: a tree's own gen_vulkan_spv.py wins over the installed wheel's."""
    wheel = build.codegen_path(tree)
    assert wheel.name == "gen_vulkan_spv.py" and tree not in wheel.parents
    in_tree = tree / build.CODEGEN_IN_TREE
    shutil.copy(wheel, in_tree)
    assert build.codegen_path(tree) == in_tree
    assert "vk_axpy_buffer_float" in build.ShaderBuilder(tree).variants()


def test_repointed_index_is_repaired_not_used(tree):
    """An index entry re-hashed after pointing it at another module passes its own hash; the key derived from the
    variant's source does not match, so the entry is a repair and the right module is built."""
    from tests.faults.forgery import repoint_index
    from vkdiff.datamodel import REPAIRS, read_entry

    builder = build.ShaderBuilder(tree)
    right, other = builder.build("vk_axpy_buffer_float"), builder.build("vk_axpy_buffer_half")
    index = builder.index_dir / "vk_axpy_buffer_float.json"
    repoint_index(index, json.loads(read_entry(builder.index_dir / "vk_axpy_buffer_half.json"))["key"])
    repairs = len(REPAIRS)
    again = build.ShaderBuilder(tree).build("vk_axpy_buffer_float")
    assert again.spv == right.spv != other.spv
    assert len(REPAIRS) == repairs + 1 and REPAIRS[-1].path == str(index)
    assert "which vk_axpy_buffer_float's source, headers, flags and glslc do not derive" in REPAIRS[-1].why


def test_forged_headers_are_regenerated(tree):
    """Generated headers in the cache are compared with the codegen's output before glslc reads them."""
    from vkdiff.datamodel import REPAIRS, cache

    builder = build.ShaderBuilder(tree)
    helpers = builder.include_dir / "vk_helpers.h"
    original = helpers.read_text()
    helpers.write_text(original.replace("2.0 * v", "3.0 * v"))
    cache.write_manifest(builder.include_dir)
    cache.VERIFIED.clear()
    repairs = len(REPAIRS)
    assert (build.ShaderBuilder(tree).include_dir / "vk_helpers.h").read_text() == original
    assert len(REPAIRS) == repairs + 1 and "differs from what the tree's codegen generates" in REPAIRS[-1].why


def test_rebuild_catches_a_patched_module(tree):
    """A patched module re-hashed is served by the cache (its hash is its own); compiling again catches it."""
    from tests.faults.forgery import forge_module

    builder = build.ShaderBuilder(tree)
    good = builder.build("vk_axpy_buffer_float").spv
    builder.build("vk_dot")
    key = json.loads((builder.index_dir / "vk_axpy_buffer_float.json").read_bytes().partition(b"\n")[2])["key"]
    module = builder.cache / "spv" / f"{key}.spv"
    forge_module(module)
    assert build.ShaderBuilder(tree).build("vk_axpy_buffer_float").spv != good, "the trust boundary, as documented"
    found = {r.name: r for r in build.ShaderBuilder(tree).rechecked()}
    assert found["vk_dot"].state == "sound"
    assert (found["vk_axpy_buffer_float"].state, found["vk_axpy_buffer_float"].path) == ("corrupt", module)
    assert found["vk_axpy_buffer_float"].why == "differs from a fresh compile of vk_axpy_buffer_float"
    assert build.ShaderBuilder(tree).rechecked(repair=True)[0].why.endswith("; replaced")
    assert {r.state for r in build.ShaderBuilder(tree).rechecked()} == {"sound"}
    assert build.ShaderBuilder(tree).build("vk_axpy_buffer_float").spv == good


def test_rebuild_lists_the_trees_it_did_not_check(tree, tmp_path):
    from vkdiff.entry import cache_admin

    other = tmp_path / "other"
    shutil.copytree(tree, other)
    (other / build.GLSL_SUBDIR / "vk_dot.glsl").write_text((tree / build.GLSL_SUBDIR / "vk_dot.glsl").read_text() + "\n")
    build.ShaderBuilder(tree).build("vk_dot")
    build.ShaderBuilder(other).build("vk_dot")
    builder = build.ShaderBuilder(tree)
    report = cache_admin.verify(builder.cache, rebuild=builder)
    assert report.rebuilt == 1 and not report.corrupt
    assert report.unchecked == [f"1 module of another tree (index/{build.ShaderBuilder(other).tree}, last built from "
                                f"{other}): pass that tree with --et-src",
                                "1 of 2 modules in spv/ belong to no variant of this tree (pass their tree with --et-src)"]


@requires_tree
def test_mediump_builds_half_variants_as_etvk_mediump_builds_do(et_tree, tmp_path, monkeypatch):
    """``--mediump`` (EXECUTORCH_VULKAN_USE_MEDIUMP_FOR_FP16): a texture half variant's float32 locals become
    RelaxedPrecision; float variants do not change, and the two builds keep indexes of their own."""
    from vkdiff.device.shaders import spirv

    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "cache"))
    highp, mediump = build.ShaderBuilder(et_tree), build.ShaderBuilder(et_tree, mediump=True)
    assert not spirv.relaxed_precision(highp.build("binary_add_texture3d_half").spv)
    assert spirv.relaxed_precision(mediump.build("binary_add_texture3d_half").spv)
    assert highp.build("binary_add_buffer_float").spv == mediump.build("binary_add_buffer_float").spv
    assert highp.index_dir != mediump.index_dir


def test_mediump_is_a_setting_children_inherit():
    from vkdiff.datamodel.settings import RunSettings, SettingsError
    from vkdiff.entry.options import run_settings

    settings = run_settings({"mediump": True})
    assert settings.mediump and RunSettings.from_environment(settings.environment()) == settings
    with pytest.raises(SettingsError, match="VKDIFF_MEDIUMP='yes': give 1 or 0"):
        RunSettings.from_environment({"VKDIFF_MEDIUMP": "yes"})
