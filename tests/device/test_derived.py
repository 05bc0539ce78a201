"""What the codegen derived, kept per exact inputs (``vkdiff.device.shaders.derived``): a warm builder names variants
and trusts module keys without running the codegen, and only for the very inputs they were derived from."""

from __future__ import annotations

import json
from pathlib import Path

from tests.testutils import requires_glslc
from vkdiff.datamodel.cache import REPAIRS
from vkdiff.device.shaders import build

NAME = "vk_axpy_buffer_float"

pytestmark = requires_glslc


def _warm(tree: Path) -> tuple[build.ShaderBuilder, build.BuiltShader]:
    """A builder made after another process built ``NAME`` (the first builder is gone, its data stored)."""
    import gc

    first = build.ShaderBuilder(tree)
    first.variants()
    built = first.build(NAME)
    del first
    gc.collect()
    return build.ShaderBuilder(tree), built


def test_a_warm_builder_names_variants_and_reads_modules_without_the_codegen(tree):
    warm, built = _warm(tree)
    assert {NAME, "vk_dot", "vk_broken"} <= warm.variants()
    assert warm.build(NAME).spv == built.spv
    assert "_loaded" not in warm.__dict__, "the codegen ran although its derivations were stored"


def test_a_changed_template_is_derived_again(tree):
    _warm(tree)
    template = tree / build.GLSL_SUBDIR / "vk_dot.glsl"
    template.write_text(template.read_text() + "\n// edited\n")
    edited = build.ShaderBuilder(tree)
    assert NAME in edited.variants()
    assert "_loaded" in edited.__dict__, "new inputs name a new entry, so the codegen runs"


def test_a_repointed_index_is_not_vouched_for(tree):
    """The stored keys vouch only for the key each variant derives: an index pointing elsewhere is re-derived and
    repaired, as without them."""
    warm, _ = _warm(tree)
    other = warm.build("vk_dot")
    index = warm.index_dir / f"{NAME}.json"
    record = json.loads(build.read_entry(index))
    build.write_entry(index, json.dumps({**record, "key": warm.requested()["vk_dot"]}).encode())
    before = len(REPAIRS)
    fresh = build.ShaderBuilder(tree)
    assert fresh.build(NAME).spv != other.spv
    assert len(REPAIRS) == before + 1 and "do not derive" in REPAIRS[-1].why


def test_a_damaged_entry_is_a_repair_and_the_codegen_runs(tree):
    warm, _ = _warm(tree)
    path = warm._derived.path
    path.write_bytes(path.read_bytes()[:-3] + b"xyz")
    before = len(REPAIRS)
    fresh = build.ShaderBuilder(tree)
    assert NAME in fresh.variants()
    assert "_loaded" in fresh.__dict__
    assert len(REPAIRS) == before + 1
    assert (REPAIRS[-1].path, REPAIRS[-1].why) == (str(path), "content hash mismatch")
