"""BUILD_FAIL reasons point at the tree's template line, not only at the generated variant's line; a broken yaml,
template or header is BUILD_FAIL for the variants it affects, and the rest of the tree (and of the run) goes on."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.testutils import pinned_tarball, requires_glslc, requires_vulkan
from vkdiff.device.shaders import build, trees

FAKE_TREE = Path(__file__).parents[1] / "device" / "fake_tree"

SHIFTED = """#version 450 core
// The $for below expands to more lines than it takes, so generated and template lines differ.
$for i in range(6):
  // generated comment ${i}
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

void main() {
  int fine = 1;
  undeclared_identifier = fine;
}
"""


@pytest.fixture
def tree(tmp_path, monkeypatch):
    glsl = tmp_path / "et" / trees.GLSL_SUBDIR
    glsl.mkdir(parents=True)
    shutil.copy(FAKE_TREE / "vk_helpers.h", glsl)
    (glsl / "vk_shifted.glsl").write_text(SHIFTED)
    monkeypatch.setenv("VKDIFF_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "et"


@requires_glslc
def test_glslc_error_names_the_template_line(tree):
    with pytest.raises(build.BuildError) as info:
        build.ShaderBuilder(tree).build("vk_shifted")
    message = str(info.value)
    template_line = SHIFTED.splitlines().index("  undeclared_identifier = fine;") + 1
    generated_line = template_line - 2 + 6  # the $for and its body (2 lines) became 6 comments
    assert (f"vk_shifted:{generated_line}: (template backends/vulkan/runtime/graph/ops/glsl/vk_shifted.glsl:"
            f"{template_line}) error: 'undeclared_identifier'" in message), message


def test_template_line_falls_back_to_the_closest_line():
    generated = "#version 450\nconst float scale = float(t_scales[embedding_idx * groups_per_row + dim / group_size]);\n"
    template = "#version 450\n  const float scale = ${LOAD}(t_scales[embedding_idx * groups_per_row + dim / group_size]);\n"
    assert build.template_line(generated, template, 2) == (2, False)
    assert build.template_line(generated, "#version 450\nsomething else entirely\n", 2) is None


GOOD_YAML = (FAKE_TREE / "vk_axpy.yaml").read_text()
BROKEN_YAMLS = {
    "indentation": (GOOD_YAML.replace("      - VALUE: half", "     - VALUE: half"),
                    "vk_axpy.yaml:8: while parsing a block mapping, "),
    "tab": (GOOD_YAML.replace("    DTYPE: float", "\tDTYPE: float"),
            "vk_axpy.yaml:3: while scanning for the next token, found character "),
    "duplicate key": (GOOD_YAML.replace("    STORAGE: buffer", "    STORAGE: buffer\n    STORAGE: texture3d"),
                      "vk_axpy.yaml:5: while constructing a mapping, found duplicate key"),
    "no shader_variants": (GOOD_YAML.replace("  shader_variants:", "  shader_variant:"),
                           "vk_axpy.yaml: KeyError: 'shader_variants'"),
    "a list": ("- vk_axpy\n- NAME: vk_axpy_buffer\n", "vk_axpy.yaml: AttributeError: 'list' object has no attribute"),
    "no template": (GOOD_YAML.replace("vk_axpy:", "vk_axpyy:", 1) + "    - NAME: vk_axpy_buffer\n",
                    "vk_axpy.yaml: ValueError: key 'vk_axpyy' names no template vk_axpyy.glsl"),
}
"""Broken yaml → the start of its one-line problem (the rest of a parser's message differs between libyaml and
PyYAML's pure-Python parser)."""


@pytest.fixture
def fake_tree(tmp_path, monkeypatch):
    """The project's test templates in an ExecuTorch-shaped tree, with a private cache."""
    glsl = tmp_path / "et" / trees.GLSL_SUBDIR
    shutil.copytree(FAKE_TREE, glsl)
    monkeypatch.setenv("VKDIFF_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "et"


@requires_glslc
@pytest.mark.parametrize("kind", sorted(BROKEN_YAMLS))
def test_broken_yaml_fails_its_variants_only(fake_tree, kind):
    text, problem = BROKEN_YAMLS[kind]
    (fake_tree / trees.GLSL_SUBDIR / "vk_axpy.yaml").write_text(text)
    builder = build.ShaderBuilder(fake_tree)
    names = builder.variants()
    assert "vk_dot" in names and "vk_axpy_buffer_float" in names
    assert not {n for n in names if n.startswith("vk_axpy")}, "a broken yaml's template is no variant of its own"
    assert builder.unreadable_yamls() and problem in builder.unreadable_yamls()[0]
    where = f"backends/vulkan/runtime/graph/ops/glsl/{problem}"
    with pytest.raises(build.BuildError, match=re.escape(f"vk_axpy_buffer_float: not generated: its shader yaml is "
                                                         f"unreadable: {where}")):
        builder.build("vk_axpy_buffer_float")
    assert builder.build("vk_dot").spv[:4] == b"\x03\x02\x23\x07"
    assert "vk_helpers.h" in {p.name for p in builder.include_dir.iterdir()}
    with pytest.raises(build.BuildError, match=r"vk_absent: no such shader variant in .* \(1 unreadable shader yaml"):
        builder.build("vk_absent")


@requires_glslc
def test_template_whose_code_raises_fails_that_variant_only(fake_tree):
    glsl = fake_tree / trees.GLSL_SUBDIR
    (glsl / "vk_raises.glsl").write_text("#version 450 core\n$raise_here = 1 // 0\nvoid main() {}\n")
    builder = build.ShaderBuilder(fake_tree)
    with pytest.raises(build.BuildError, match=re.escape("vk_raises: codegen failed: ZeroDivisionError: integer "
                                                         "division or modulo by zero")):
        builder.build("vk_raises")
    assert builder.build("vk_axpy_buffer_float").spv[:4] == b"\x03\x02\x23\x07"


@requires_glslc
def test_header_whose_code_raises_fails_its_includers_only(fake_tree):
    glsl = fake_tree / trees.GLSL_SUBDIR
    (glsl / "vk_bad.glslh").write_text("$raise_here = [][1]\nfloat bad() { return 1.0; }\n")
    (glsl / "vk_user.glsl").write_text("#version 450 core\n#include \"vk_bad.glslh\"\n"
                                       "layout(local_size_x = 1) in;\nvoid main() { bad(); }\n")
    builder = build.ShaderBuilder(fake_tree)
    assert builder.build("vk_axpy_buffer_float").spv[:4] == b"\x03\x02\x23\x07"
    with pytest.raises(build.BuildError, match=re.escape("vk_user: its header vk_bad.glslh was not generated: "
                                                         "backends/vulkan/runtime/graph/ops/glsl/vk_bad.glslh: codegen "
                                                         "failed: IndexError: list index out of range")):
        builder.build("vk_user")


def _broken_main_tree(tmp_path: Path) -> Path:
    """A copy of the pinned main tree whose ``binary_op_buffer.yaml`` has a mis-indented line (line 22)."""
    tarball = pinned_tarball("main")
    if tarball is None:
        pytest.skip("NOT_RUN: no pinned ExecuTorch trees (../shared/et)")
    source = trees.resolve_et_src(tarball)
    copy = tmp_path / "broken"
    shutil.copytree(source / "backends", copy / "backends")
    yaml_file = copy / trees.GLSL_SUBDIR / "binary_op_buffer.yaml"
    text = yaml_file.read_text()
    assert text.splitlines()[21] == "      OPERATOR: X - A * Y"
    yaml_file.write_text(text.replace("      OPERATOR: X - A * Y", "     OPERATOR: X - A * Y", 1))
    return copy


BROKEN_MAIN = ("binary_op_buffer.yaml:22: while parsing a block collection, did not find expected '-' indicator")


@requires_glslc
def test_broken_yaml_in_a_real_tree(tmp_path, monkeypatch):
    monkeypatch.setenv("VKDIFF_CACHE_DIR", str(tmp_path / "cache"))
    builder = build.ShaderBuilder(_broken_main_tree(tmp_path))
    with pytest.raises(build.BuildError, match=re.escape(BROKEN_MAIN)):
        builder.build("binary_add_buffer_float")
    assert builder.build("binary_add_texture3d_float").spv[:4] == b"\x03\x02\x23\x07"
    assert len(builder.variants()) > 1000


CASES = {"add[B1-H7-W64-fp32-buffer]": "BUILD_FAIL", "abs[W67-fp32-buffer]": "PASS"}


@requires_glslc
@requires_vulkan
def test_run_goes_on_past_a_broken_yaml(tmp_path):
    """The README's promise, through the command line: BUILD_FAIL for the broken yaml's op, a verdict for the other."""
    tree = _broken_main_tree(tmp_path)
    pattern = "^(" + "|".join(re.escape(case) for case in CASES) + ")$"
    env = {**os.environ, "VKDIFF_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "vkdiff.entry.cli", "run", "--et-src", str(tree), "--cases", pattern,
                           "--results", str(tmp_path / "r.jsonl")], capture_output=True, text=True, env=env,
                          timeout=600)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    results = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines() if line.strip()]
    assert {r["case"]: r["status"] for r in results} == CASES, done.stdout + done.stderr
    assert BROKEN_MAIN in next(r["reason"] for r in results if r["status"] == "BUILD_FAIL")
    assert done.returncode == 1
