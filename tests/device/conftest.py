"""Fixtures of the device tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vkdiff.device.shaders import build

FAKE_TREE = Path(__file__).parent / "fake_tree"
"""The project's own small templates and yaml, laid out as an ExecuTorch tree's shader folder."""


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """An ExecuTorch-shaped tree holding the project's test templates, and a private cache."""
    glsl = tmp_path / "et" / build.GLSL_SUBDIR
    glsl.mkdir(parents=True)
    for path in FAKE_TREE.iterdir():
        shutil.copy(path, glsl / path.name)
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "et"
