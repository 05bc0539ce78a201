"""BUILD_FAIL reasons point at the tree's template line, not only at the generated variant's line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.testutils import requires_glslc
from vkdiff.device import build, trees

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
