"""Which ExecuTorch tree a run uses: checkouts, REPO@REV, tarballs, and the wheel's commit fetched by default."""

from __future__ import annotations

import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from vkdiff.device import trees

GLSL = trees.GLSL_SUBDIR


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VKDIFF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(trees.ET_SRC_ENV, raising=False)
    trees.FETCH_ATTEMPTS.clear()
    yield
    trees.FETCH_ATTEMPTS.clear()


def make_tree(root: Path, marker: str = "v1") -> Path:
    (root / GLSL).mkdir(parents=True)
    (root / GLSL / "marker.glsl").write_text(f"// {marker}\n")
    return root


def git(*args: str, cwd: Path) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout.strip()


@pytest.fixture
def repo(tmp_path) -> tuple[Path, str, str]:
    """A local git repository with two commits of a tree (and one file outside backends/vulkan)."""
    root = make_tree(tmp_path / "repo", "first")
    (root / "README.md").write_text("not part of the tree\n")
    git("init", "-q", "-b", "main", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-qm", "first", cwd=root)
    first = git("rev-parse", "HEAD", cwd=root)
    (root / GLSL / "marker.glsl").write_text("// second\n")
    git("commit", "-qam", "second", cwd=root)
    git("config", "uploadpack.allowFilter", "true", cwd=root)
    git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=root)
    return root, first, git("rev-parse", "HEAD", cwd=root)


def test_checkout_errors_name_path_and_missing_part(tmp_path):
    with pytest.raises(trees.EtSourceError, match=f"--et-src {tmp_path} is not an ExecuTorch tree: missing "
                                                  r"backends/vulkan/runtime/graph/ops/glsl/"):
        trees.resolve_et_src(tmp_path)
    with pytest.raises(trees.EtSourceError, match="no such directory or tarball"):
        trees.resolve_et_src(tmp_path / "absent")


def test_env_names_the_tree(tmp_path, monkeypatch):
    tree = make_tree(tmp_path / "et")
    monkeypatch.setenv(trees.ET_SRC_ENV, str(tree))
    assert trees.choose_tree(None).path == tree.resolve()


@pytest.mark.parametrize("off", ["none", "None"])
def test_none_turns_the_tree_and_the_fetch_off(monkeypatch, off):
    monkeypatch.setattr(trees, "fetch_commit", lambda *a: pytest.fail("fetched although the tree is off"))
    choice = trees.choose_tree(off)
    assert choice.path is None and "kernel cases are NOT_RUN" in choice.note and "--et-src PATH" in choice.note


@pytest.mark.parametrize("nested", [False, True])
def test_tarball_is_extracted_once(tmp_path, nested):
    tree = make_tree(tmp_path / "src" / ("executorch" if nested else ""))
    archive = tmp_path / "et.tar.xz"
    with tarfile.open(archive, "w:xz") as tar:
        tar.add(tmp_path / "src" / ("executorch" if nested else "") / "backends",
                arcname=("executorch/" if nested else "") + "backends")
    root = trees.resolve_et_src(archive)
    assert (root / GLSL / "marker.glsl").read_text() == "// v1\n"
    stamp = (root / GLSL / "marker.glsl").stat().st_mtime_ns
    assert trees.resolve_et_src(str(archive)) == root and (root / GLSL / "marker.glsl").stat().st_mtime_ns == stamp
    assert tree.exists()


def test_tarball_without_a_tree_is_one_error(tmp_path):
    (tmp_path / "junk").write_text("x")
    archive = tmp_path / "junk.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "junk", arcname="junk")
    with pytest.raises(trees.EtSourceError, match="is not a tarball of an ExecuTorch tree"):
        trees.resolve_et_src(archive)


def test_repo_at_revision(repo):
    root, first, _ = repo
    tree = trees.resolve_et_src(f"{root}@{first}")
    assert (tree / GLSL / "marker.glsl").read_text() == "// first\n"
    assert tree.parent.name == "trees" and tree.name == first[:16]


def test_default_fetches_the_wheel_commit_from_a_file_repository(repo, monkeypatch):
    """Sparse, blob-filtered, depth 1: only backends/vulkan of that commit arrives, once."""
    root, first, _ = repo
    monkeypatch.setattr(trees, "wheel_commit", lambda: ("1.5.1", first))
    monkeypatch.setenv(trees.ET_REPO_ENV, f"file://{root}")
    choice = trees.choose_tree(None)
    assert choice.path is not None and (choice.path / GLSL / "marker.glsl").read_text() == "// first\n"
    assert not (choice.path / "README.md").exists() and not (choice.path / ".git").exists()
    assert choice.note.startswith(f"ExecuTorch tree: backends/vulkan of {first[:10]} (the commit of the installed "
                                  f"executorch 1.5.1)")
    trees.FETCH_ATTEMPTS.clear()
    monkeypatch.setenv(trees.ET_REPO_ENV, f"file://{root}-moved")
    assert trees.choose_tree(None).path == choice.path  # cached: no second fetch


def test_default_offline_is_one_line_within_seconds_and_tried_once(monkeypatch):
    monkeypatch.setattr(trees, "wheel_commit", lambda: ("1.5.1", "3b60683923245cf472b7323426920e15623ba361"))
    monkeypatch.setenv(trees.ET_REPO_ENV, "https://vkdiff-no-such-host.invalid/executorch.git")
    calls = []
    reachable = trees._reachable
    monkeypatch.setattr(trees, "_reachable", lambda url: calls.append(url) or reachable(url))
    start = time.perf_counter()
    first = trees.choose_tree(None)
    second = trees.choose_tree(None)
    assert time.perf_counter() - start < 10
    assert first.path is None and first == second and len(calls) == 1
    assert "\n" not in first.note and first.note.startswith("no ExecuTorch tree: could not fetch executorch 1.5.1's "
                                                            "commit 3b60683923 from https://vkdiff-no-such-host")
    assert first.note.endswith(f"{trees.HOW_TO_GIVE}")


def test_wheel_commit_is_read_from_version_py():
    version, commit = trees.wheel_commit()
    assert version.startswith("1.5.1") and len(commit) == 40
