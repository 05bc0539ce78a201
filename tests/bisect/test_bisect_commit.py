"""``vkdiff bisect commit`` over a small git history made of the pinned trees (v1.3.1 → v1.4.1 → main).

Between v1.3.1 and v1.4.1 ExecuTorch selected dq8ca's zero-point binding by its
allocated dtype (d78d5e49dd, shaders and C++ only) and fused torchao's int4 embedding
(73c259eeb5, Python patterns only): the first needs the revision's shaders, the second
the revision's Python passes (re-lowered in a subprocess).
"""

from __future__ import annotations

import subprocess
import tarfile

import pytest

from tests.testutils import pinned_tarball, requires_tree, requires_vulkan
from vkdiff.entry import cli

pytestmark = [requires_vulkan, requires_tree]
HISTORY = ("v1.3.1", "v1.4.1", "main")


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """A repository with one commit per pinned tree, oldest first; and a bare clone of it."""
    repo = tmp_path_factory.mktemp("history") / "executorch"
    repo.mkdir()
    _git(repo, "init", "-q")
    for name in HISTORY:
        subprocess.run(["rm", "-rf", str(repo / "backends")], check=True)
        with tarfile.open(pinned_tarball(name)) as tar:
            tar.extractall(repo, filter="tar")
        _git(repo, "add", "-A")
        _git(repo, "-c", "user.name=vkdiff", "-c", "user.email=vkdiff@localhost", "commit", "-q", "-m",
             f"backends/vulkan as of {name}")
    bare = repo.parent / "executorch.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    return repo, bare


@pytest.mark.parametrize("which", ["checkout", "bare"])
def test_the_zero_point_binding_fix_is_found_by_its_shaders(history, which, capsys):
    repo = history[0] if which == "checkout" else history[1]
    code = cli.main(["bisect", "commit", "--et-src", str(repo), "--good", "HEAD~2", "--bad", "HEAD",
                     "linear_dq8ca_q4gsw[M13-K256-N64-g32-fp32-texture3d-fpzp]"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "good" in out and "DTYPE_MISMATCH" in out.splitlines()[0]
    first = _git(history[0], "rev-parse", "HEAD~1")
    assert f"first commit with the --bad verdict: {first} backends/vulkan as of v1.4.1" in out


def test_the_embedding_fusion_is_found_by_relowering_with_each_revisions_passes(history, capsys):
    code = cli.main(["bisect", "commit", "--et-src", str(history[0]), "--good", "HEAD~2", "--bad", "HEAD~1",
                     "embedding[emb4w-vulkan]"])
    out = capsys.readouterr().out
    assert code == 0, out
    good, bad = out.splitlines()[:2]
    assert "expected_fusions=FAIL_CHECK" in good and "expected_fusions=PASS" in bad
    assert "re-lowered with this revision's backends/vulkan Python" in good
    assert "first commit with the --bad verdict:" in out and "as of v1.4.1" in out.splitlines()[-1]


def test_a_revision_that_is_not_in_the_repository_is_one_line(history, capsys):
    code = cli.main(["bisect", "commit", "--et-src", str(history[0]), "--good", "nope", "--bad", "HEAD",
                     "add[B2-H5-W13-fp32-buffer]"])
    assert code == cli.EXIT_USAGE
    assert capsys.readouterr().err.startswith("vkdiff: error: no revision 'nope' in ")
