"""Which ExecuTorch tree a run uses: checkouts, REPO@REV, tarballs, and the wheel's commit fetched by default."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from vkdiff.datamodel import cache
from vkdiff.device.shaders import build, trees

GLSL = trees.GLSL_SUBDIR


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VKDIFF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(trees.ET_SRC_ENV, raising=False)
    trees.FETCH_ATTEMPTS.clear()
    yield
    trees.FETCH_ATTEMPTS.clear()


def new_process() -> None:
    """Forget what this process verified and loaded, as a fresh ``vkdiff`` process would have."""
    cache.VERIFIED.clear()
    trees.FETCH_ATTEMPTS.clear()
    build._load_codegen.cache_clear()


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


FAKE_TREE = Path(__file__).parent / "fake_tree"


def codegen_tree(root: Path) -> Path:
    """A tree with the project's test templates and a copy of the installed executorch's ``gen_vulkan_spv.py``."""
    (root / GLSL).mkdir(parents=True)
    for path in FAKE_TREE.iterdir():
        shutil.copy(path, root / GLSL / path.name)
    if importlib.util.find_spec("executorch") is None:
        pytest.skip("NOT_RUN: executorch is not installed (its gen_vulkan_spv.py is the codegen under test)")
    shutil.copy(build.codegen_path(root), root / build.CODEGEN_IN_TREE)
    return root


def committed(root: Path) -> str:
    """Make ``root`` a git repository holding it in one commit (fetchable by id); returns the commit."""
    git("init", "-q", "-b", "main", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-qm", "tree", cwd=root)
    git("config", "uploadpack.allowFilter", "true", cwd=root)
    git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=root)
    return git("rev-parse", "HEAD", cwd=root)


SOURCES = ("tarball", "repo@rev", "default fetch")


def into_cache(kind: str, tmp_path: Path, monkeypatch) -> tuple[str | None, Path]:
    """(``--et-src``, the tree's copy in the cache) for a tree that comes into the cache from source ``kind``."""
    source = codegen_tree(tmp_path / "src")
    if kind == "tarball":
        spec = str(tmp_path / "et.tar.gz")
        with tarfile.open(spec, "w:gz") as tar:
            tar.add(source / "backends", arcname="backends")
    else:
        commit = committed(source)
        spec = f"{source}@{commit}" if kind == "repo@rev" else None
        monkeypatch.setattr(trees, "wheel_commit", lambda: ("1.5.1", commit))
        monkeypatch.setenv(trees.ET_REPO_ENV, f"file://{source}")
    choice = trees.choose_tree(spec)
    assert choice.path is not None and choice.path.parent.name == "trees" and not choice.repaired, choice.note
    return spec, choice.path


@pytest.fixture(params=SOURCES)
def cached_tree(request, tmp_path, monkeypatch) -> tuple[str | None, Path]:
    """``into_cache`` for each source."""
    return into_cache(request.param, tmp_path, monkeypatch)


PAYLOAD = "\nimport pathlib\npathlib.Path({marker!r}).write_text('the cached codegen ran')\n"


def tamper(tree: Path, marker: Path) -> tuple[bytes, bytes]:
    """Edit the cached codegen (a marker-writing payload) and a template, then hash the folder's manifest again the
    way vkdiff writes it; returns the two files' original bytes."""
    codegen, template = tree / build.CODEGEN_IN_TREE, tree / GLSL / "vk_axpy.glsl"
    originals = codegen.read_bytes(), template.read_bytes()
    codegen.write_text(codegen.read_text() + PAYLOAD.format(marker=str(marker)))
    template.write_text(template.read_text().replace("twice(", "3.0 * twice("))
    cache.write_manifest(tree)
    assert cache.verify_manifest(tree) > 0, "the manifest alone cannot tell"
    return originals


def test_tampered_cached_tree_is_extracted_again_and_never_run(cached_tree, tmp_path):
    spec, tree = cached_tree
    marker = tmp_path / "marker"
    assert "vk_axpy_buffer_float" in build.ShaderBuilder(tree).variants()
    originals = tamper(tree, marker)
    checkout = tmp_path / "checkout"
    shutil.copytree(tree, checkout)
    new_process()
    repairs = len(cache.REPAIRS)
    choice = trees.choose_tree(spec)
    assert choice.path == tree and choice.repaired
    assert len(cache.REPAIRS) == repairs + 1 and cache.REPAIRS[-1].why.startswith("differs from ")
    assert ((tree / build.CODEGEN_IN_TREE).read_bytes(), (tree / GLSL / "vk_axpy.glsl").read_bytes()) == originals
    assert "vk_axpy_buffer_float" in build.ShaderBuilder(tree).variants()
    assert not marker.exists(), "the tampered codegen ran"
    build.ShaderBuilder(checkout).variants()
    assert marker.exists(), "control: the payload runs from a checkout (the user's own tree, trusted as given)"


def test_sound_cached_tree_is_checked_once_per_process(cached_tree, monkeypatch):
    spec, tree = cached_tree
    new_process()
    calls = []
    compare = trees._compare
    monkeypatch.setattr(trees, "_compare", lambda *a: calls.append(a) or compare(*a))
    first, second = trees.choose_tree(spec), trees.choose_tree(spec)
    assert first.path == second.path == tree and not first.repaired and not second.repaired
    assert len(calls) == 1


@pytest.mark.parametrize("edit", ["extra file", "missing file", "symlink"])
def test_any_difference_from_the_source_is_a_repair(cached_tree, edit):
    spec, tree = cached_tree
    template = tree / GLSL / "vk_dot.glsl"
    if edit == "extra file":
        (tree / GLSL / "vk_new.yaml").write_text("vk_new: !!python/object/apply:os.getpid []\n")
    elif edit == "missing file":
        template.unlink()
    else:
        template.unlink()
        template.symlink_to(tree / GLSL / "vk_axpy.glsl")
    cache.write_manifest(tree)
    new_process()
    assert trees.choose_tree(spec).repaired
    assert not (tree / GLSL / "vk_new.yaml").exists() and not template.is_symlink() and template.is_file()


def test_planted_bytecode_never_runs(cached_tree, tmp_path):
    """A ``__pycache__`` beside the cached codegen, valid for its source's mtime and size, is no source's file: it is
    deleted, and the codegen runs from its checked source."""
    spec, tree = cached_tree
    marker = tmp_path / "marker"
    codegen = tree / build.CODEGEN_IN_TREE
    stat = codegen.stat()
    code = compile(codegen.read_text() + PAYLOAD.format(marker=str(marker)), str(codegen), "exec")
    from importlib import _bootstrap_external

    planted = Path(importlib.util.cache_from_source(str(codegen)))
    planted.parent.mkdir()
    planted.write_bytes(_bootstrap_external._code_to_timestamp_pyc(code, stat.st_mtime, stat.st_size))
    new_process()
    assert not trees.choose_tree(spec).repaired and not planted.parent.exists()
    planted.parent.mkdir()
    planted.write_bytes(_bootstrap_external._code_to_timestamp_pyc(code, stat.st_mtime, stat.st_size))
    build._load_codegen.cache_clear()
    assert "vk_axpy_buffer_float" in build.ShaderBuilder(tree).variants()
    assert not marker.exists()


def test_default_fetch_keeps_its_repository(tmp_path, monkeypatch):
    _, tree = into_cache("default fetch", tmp_path, monkeypatch)
    kept = trees.fetch_repository(tree.name)
    assert (kept / ".git").is_dir() and [p.name for p in kept.iterdir()] == [".git"]
    shutil.rmtree(kept)
    new_process()
    choice = trees.choose_tree(None)
    assert choice.repaired and (kept / ".git").is_dir() and choice.path == tree
    assert "no repository" in cache.REPAIRS[-1].why


def test_swapped_repository_object_is_refused(tmp_path):
    """git serves a loose object whose content was swapped under its name (it does not hash objects at rest); the
    check hashes every object it reads from the commit id down, so such a repository cannot vouch for a tree."""
    source = make_tree(tmp_path / "src")
    commit = committed(source)
    tree = trees.resolve_et_src(f"{source}@{commit}")
    glsl, parent = (git("rev-parse", f"{commit}:{path}", cwd=source) for path in (GLSL, GLSL.parent))
    loose = source / ".git" / "objects" / glsl[:2] / glsl[2:]
    loose.chmod(0o644)
    loose.write_bytes((source / ".git" / "objects" / parent[:2] / parent[2:]).read_bytes())
    assert git("cat-file", "-t", glsl, cwd=source) == "tree", "git itself serves the swapped object"
    with pytest.raises(cache.CacheCorruptError, match=f"object {glsl[:12]} does not hash to its name"):
        trees.check_git(tree, source, commit)


def test_forged_repository_config_runs_nothing(tmp_path):
    """A cached partial clone whose config was forged (an ssh promisor with ``core.sshCommand``) and whose tree object
    was deleted would run that command through git's lazy fetch; the check refuses every transport."""
    source = make_tree(tmp_path / "src")
    commit = committed(source)
    tree = trees.resolve_et_src(f"file://{source}@{commit}")
    clone = next((trees.cache_dir() / "repos").iterdir())
    packs = tmp_path / "packs"
    shutil.move(clone / "objects" / "pack", packs)
    for pack in packs.glob("*.pack"):
        subprocess.run(["git", "-C", str(clone), "unpack-objects", "-q"], stdin=pack.open("rb"), check=True)
    glsl = git("rev-parse", f"{commit}:{GLSL}", cwd=source)
    (clone / "objects" / glsl[:2] / glsl[2:]).unlink()
    marker = tmp_path / "ran"
    for key, value in [("remote.origin.url", "ssh://vkdiff.invalid/x"), ("protocol.ssh.allow", "always"),
                       ("core.sshCommand", f"touch {marker}; false")]:
        git("config", key, value, cwd=clone)
    with pytest.raises(cache.CacheCorruptError, match=f"no tree {glsl[:12]}"):
        trees.check_git(tree, clone, commit)
    assert not marker.exists()


def test_a_forged_clone_config_runs_nothing_on_fetch_or_archive(tmp_path):
    """A cached clone of ``URL@REV`` whose config runs commands (an ``ext::`` remote for ``git fetch``, a smudge filter
    for ``git archive``) and whose hooks would too: vkdiff puts back the config its clone wrote before using it."""
    source = make_tree(tmp_path / "src")
    commit = committed(source)
    url = f"file://{source}"
    trees.resolve_et_src(f"{url}@{commit}")
    clone = next((trees.cache_dir() / "repos").iterdir())
    marker = tmp_path / "ran"
    for key, value in [("protocol.ext.allow", "always"), ("remote.origin.url", f"ext::sh -c touch% {marker}"),
                       ("filter.evil.smudge", f"sh -c 'touch {marker}; cat'")]:
        git("config", key, value, cwd=clone)
    (clone / "info" / "attributes").write_text("* filter=evil\n")
    (clone / "hooks" / "reference-transaction").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (clone / "hooks" / "reference-transaction").chmod(0o755)
    shutil.rmtree(trees.cache_dir() / "trees")
    new_process()
    tree = trees.resolve_et_src(f"{url}@{commit}")
    assert (tree / GLSL / "marker.glsl").exists() and not marker.exists()
    assert git("config", "--file", str(clone / "config"), "remote.origin.url", cwd=tmp_path) == url


@pytest.mark.parametrize("name, kind, links, plain", [
    ("backends/vulkan/a.glsl", tarfile.REGTYPE, set(), True),
    ("backends/vulkan", tarfile.DIRTYPE, set(), True),
    ("./backends/a.glsl", tarfile.REGTYPE, set(), True),
    ("/etc/passwd", tarfile.REGTYPE, set(), False),
    ("backends/../../x", tarfile.REGTYPE, set(), False),
    ("c:/x", tarfile.REGTYPE, set(), False),
    ("out/x.glsl", tarfile.REGTYPE, {"out"}, False),
    ("backends/link", tarfile.SYMTYPE, set(), False),
    ("backends/hard", tarfile.LNKTYPE, set(), False),
])
def test_only_members_the_data_filter_keeps_as_they_are_skip_it(tmp_path, name, kind, links, plain):
    """A member taken as plain must be one ``tarfile.data_filter`` returns unchanged in name and type."""
    member = tarfile.TarInfo(name)
    member.type = kind
    assert trees._plain(member, links) is plain
    if plain and hasattr(tarfile, "data_filter"):
        kept = tarfile.data_filter(member, str(tmp_path))
        assert (kept.name, kept.type) == (member.name, member.type)


@pytest.mark.parametrize("compression", ["xz", "gz", "bz2", ""])
def test_a_tarball_read_in_memory_gives_what_streaming_it_gives(tmp_path, compression, monkeypatch):
    """The check of a cached tarball reads an archive below ``IN_MEMORY_BYTES`` in one decompression: every member's
    digest (files, a symbolic link, a hard link, a sparse-free nested folder) is the one streaming gives."""
    src = make_tree(tmp_path / "src")
    (src / GLSL / "big.glsl").write_bytes(bytes(range(256)) * 700)
    (src / GLSL / "link.glsl").symlink_to("marker.glsl")
    archive = tmp_path / f"et.tar{'.' + compression if compression else ''}"
    with tarfile.open(archive, f"w:{compression}") as tar:
        tar.add(src / "backends", arcname="backends")
        hard = tar.gettarinfo(src / GLSL / "marker.glsl", arcname="backends/hard.glsl")
        hard.type, hard.linkname, hard.size = tarfile.LNKTYPE, f"{GLSL}/marker.glsl", 0
        tar.addfile(hard)
    in_memory = trees._tarball_files(archive, tmp_path / "dest")
    monkeypatch.setattr(trees, "IN_MEMORY_BYTES", 0)
    assert in_memory == trees._tarball_files(archive, tmp_path / "dest")
    assert in_memory[f"{GLSL}/link.glsl"][0] and in_memory["backends/hard.glsl"] == in_memory[f"{GLSL}/marker.glsl"]
    assert len(in_memory) == 4


def test_a_damaged_compressed_tarball_is_a_repair_not_a_crash(tmp_path):
    """Damaged xz data in a cached tarball's source is the check failing (``CacheCorruptError``), as when streamed."""
    src = make_tree(tmp_path / "src")
    archive = tmp_path / "et.tar.xz"
    with tarfile.open(archive, "w:xz") as tar:
        tar.add(src / "backends", arcname="backends")
    raw = bytearray(archive.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    archive.write_bytes(bytes(raw))
    with pytest.raises(cache.CacheCorruptError, match="cannot read"):
        trees.check_tarball(src, archive)


def test_a_tarball_check_takes_the_digests_the_manifest_check_just_verified(tmp_path):
    """Files whose sha256 the manifest check has just verified are not read again: the digest given is the one
    compared with the archive's (a wrong one is a difference, though the file on disk is sound); files it does not
    list are read."""
    src = make_tree(tmp_path / "src")
    archive = tmp_path / "et.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(src / "backends", arcname="backends")
    marker = f"{GLSL}/marker.glsl"
    sound = trees._sha256((src / marker).read_bytes())
    trees.check_tarball(src, archive, {marker: sound})
    trees.check_tarball(src, archive, {})
    with pytest.raises(cache.CacheCorruptError, match="differs from"):
        trees.check_tarball(src, archive, {marker: "0" * 64})
