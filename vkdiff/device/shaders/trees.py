"""Which ExecuTorch tree's ET-VK sources to build: a checkout, ``REPO@REV``, a tarball, or by default the wheel's own.

vkdiff never ships ExecuTorch sources; it reads them at run time from:

* ``--et-src PATH`` / ``$VKDIFF_ET_SRC``: a checkout; ``REPO@REV`` (a git repository,
  local or URL, at a revision); or a ``.tar``/``.tar.gz``/``.tar.xz``/``.tar.bz2`` of a tree
  (``git archive REV backends/vulkan`` writes one). Repositories and tarballs are
  extracted once into ``<cache>/trees/``.
* nothing: the commit the installed executorch wheel records in ``executorch/version.py``,
  whose ``backends/vulkan`` is fetched once (sparse, blob-filtered, depth 1) from
  ``$VKDIFF_ET_REPO`` (default: the ExecuTorch repository on GitHub). Offline, the host
  is found unreachable within seconds, once per process, and kernel cases are ``NOT_RUN``
  with a line that says how to give a tree.
* ``none`` (``--et-src none`` or ``VKDIFF_ET_SRC=none``): no tree, no fetch.

A tree is code: its ``gen_vulkan_spv.py``, the ``$`` lines of its templates and its yaml (read with
PyYAML's full loader) run when variants are generated. So a tree kept in the cache is compared with
its source once per process before any of it runs (``cached_folder``'s ``check``): an extracted
tarball with the tarball's members, a git tree with the commit's blob ids read from the repository
with every object hashed again on the way from the commit id. A copy that differs is a recorded
repair (extracted or fetched again, results flagged ``cache-repaired``), never used; Python bytecode
(``__pycache__``), which no source covers, is deleted.
"""

from __future__ import annotations

import bz2
import concurrent.futures
import dataclasses
import gzip
import hashlib
import importlib.util
import io
import lzma
import os
import re
import shutil
import socket
import subprocess
import tarfile
import tempfile
import urllib.parse
import zlib
from pathlib import Path
from typing import Callable

from vkdiff.datamodel import REPAIRS, CacheCorruptError, cache_dir, cached_folder
from vkdiff.datamodel.cache import MANIFEST

GLSL_SUBDIR = Path("backends/vulkan/runtime/graph/ops/glsl")
ET_SRC_ENV = "VKDIFF_ET_SRC"
ET_REPO_ENV = "VKDIFF_ET_REPO"
DEFAULT_REPO = "https://github.com/pytorch/executorch.git"
OFF = "none"
CONNECT_TIMEOUT_S = 3.0
"""How long the default fetch waits for the repository's host before calling the machine offline."""
FETCH_TIMEOUT_S = 600.0
"""Upper bound of one git command of the default fetch (a slow link, not an offline one)."""
TARBALL_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2")
HOW_TO_GIVE = (f"pass --et-src PATH (an ExecuTorch checkout, REPO@REV or a .tar.* of one) or set {ET_SRC_ENV}")


class EtSourceError(ValueError):
    """The given path is not an ExecuTorch tree with ET-VK shader sources, or cannot be read."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class TreeChoice:
    """The tree a run uses, or why it has none."""

    path: Path | None
    """Root of the tree (holds ``backends/vulkan``), None when there is none."""
    note: str
    """One line for the user: where the tree came from, or why there is none and how to give one."""
    repaired: bool = False
    """The cached copy of the tree failed its check and was extracted or fetched again."""


ORIGINS: dict[Path, str] = {}
"""A tree in the cache → the ``--et-src`` it was resolved from in this process (what to pass to use it again)."""


def origin_of(root: Path) -> str:
    """What to pass as ``--et-src`` for ``root``: its source when this process resolved it from one, else itself."""
    return ORIGINS.get(root, str(root))


def is_tree(root: Path) -> bool:
    return (root / GLSL_SUBDIR).is_dir()


def choose_tree(path: str | os.PathLike | None) -> TreeChoice:
    """The tree for ``path`` (``--et-src``), else ``$VKDIFF_ET_SRC``, else the wheel's own commit.

    Raises:
        EtSourceError: an explicitly given tree cannot be used (names it and what is missing).
    """
    raw = str(path) if path is not None else os.environ.get(ET_SRC_ENV, "")
    if raw.strip().lower() == OFF:
        return TreeChoice(path=None, note=f"no ExecuTorch tree ({ET_SRC_ENV}=none / --et-src none): kernel cases are "
                                          f"NOT_RUN; {HOW_TO_GIVE}")
    repairs = len(REPAIRS)
    choice = TreeChoice(path=resolve_et_src(raw), note="") if raw else default_tree()
    note = choice.note or f"ExecuTorch tree: {choice.path}"
    return dataclasses.replace(choice, note=note, repaired=len(REPAIRS) > repairs)


def resolve_et_src(raw: str | os.PathLike) -> Path:
    """An explicitly given tree: a checkout, ``REPO@REV`` or a tarball.

    Raises:
        EtSourceError: it holds no ET-VK shaders, or the revision or archive cannot be read.
    """
    raw = str(raw)
    local = Path(raw).expanduser()
    if "@" in raw and not local.exists():
        repo, rev = raw.rsplit("@", 1)
        return checkout_revision(repo, rev)
    if local.is_file():
        if raw.endswith(TARBALL_SUFFIXES):
            return extract_tarball(local)
        raise EtSourceError(f"--et-src {raw} is a file, not a directory (give an ExecuTorch checkout, REPO@REV or "
                            f"a tarball ending in {', '.join(TARBALL_SUFFIXES)})")
    root = local.resolve()
    if not root.is_dir():
        raise EtSourceError(f"--et-src {raw}: no such directory or tarball ({HOW_TO_GIVE})")
    if not is_tree(root):
        raise EtSourceError(f"--et-src {raw} is not an ExecuTorch tree: missing {GLSL_SUBDIR}/")
    return root


def _trees() -> Path:
    path = cache_dir() / "trees"
    path.mkdir(parents=True, exist_ok=True)
    return path


OFFLINE = {"GIT_ALLOW_PROTOCOL": ""}
"""Environment of git commands that check a cached repository: no transport at all, so a forged config there
(a promisor remote with ``core.sshCommand``) cannot run a command through a lazy fetch."""


def _git(*args: str, timeout: float | None = None, offline: bool = False) -> str:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **(OFFLINE if offline else {})})
    except subprocess.TimeoutExpired:
        raise EtSourceError(f"git {' '.join(args[:3])}: no answer within {timeout:.0f} s") from None
    if done.returncode:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
        raise EtSourceError(f"git {' '.join(args[:3])}: {last}")
    return done.stdout.strip()


CLONE_KEYS = {"core.repositoryformatversion": ("0", "1"), "core.filemode": ("true", "false"),
              "core.bare": ("true",), "remote.origin.promisor": ("true",),
              "remote.origin.partialclonefilter": ("blob:none",), "extensions.partialclone": ("origin",)}
"""What ``git clone --bare --filter=blob:none`` writes into a clone's config, with the values it may take."""


def sanitize_clone(local: Path, url: str) -> None:
    """Make a cached clone's config what vkdiff's clone wrote (its remote at ``url``) and drop its hooks and
    attributes: the cache can come from elsewhere, and a clone's config (a smudge filter, an ``ext::`` remote,
    ``core.sshCommand``) or hooks run commands during ``git archive`` and ``git fetch``."""
    config = local / "config"
    listed = _git("config", "--file", str(config), "--list", "-z") if config.is_file() else ""
    kept = [item.split("\n", 1) for item in listed.split("\0") if "\n" in item]
    fresh = local / ".config-vkdiff"
    fresh.unlink(missing_ok=True)
    for key, value in [(k, v) for k, v in kept if v in CLONE_KEYS.get(k.lower(), ())] + [("remote.origin.url", url)]:
        _git("config", "--file", str(fresh), key, value)
    os.replace(fresh, config)
    shutil.rmtree(local / "hooks", ignore_errors=True)
    (local / "info" / "attributes").unlink(missing_ok=True)


def checkout_revision(repo: str, rev: str) -> Path:
    """Extract ``backends/vulkan`` of ``repo`` at ``rev`` into ``<cache>/trees/<commit>`` (once)."""
    if "://" in repo:
        local = cache_dir() / "repos" / hashlib.sha256(repo.encode()).hexdigest()[:16]
        if not local.exists():
            _git("clone", "--bare", "--filter=blob:none", repo, str(local))
        else:
            sanitize_clone(local, repo)
            _git("-C", str(local), "fetch", "--tags", "origin", rev)
        repo = str(local)
    if not Path(repo).expanduser().exists():
        raise EtSourceError(f"--et-src {repo}@{rev}: no such repository")
    try:
        commit = _git("-C", repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except EtSourceError:
        raise EtSourceError(f"--et-src {repo}@{rev}: no revision {rev!r} in {repo}") from None

    def extract(staging: Path) -> None:
        archive = subprocess.run(["git", "-C", repo, "archive", commit, "backends/vulkan"], capture_output=True)
        if archive.returncode:
            raise EtSourceError(f"--et-src {repo}@{rev}: {archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", str(staging)], input=archive.stdout, check=True)
        _faithful(staging, repo, commit, f"--et-src {repo}@{rev}")

    target = cached_folder(_trees() / commit[:16], extract, check=lambda folder, _: check_git(folder, repo, commit))
    if not is_tree(target):
        raise EtSourceError(f"--et-src {repo}@{rev} is not an ExecuTorch tree: missing {GLSL_SUBDIR}/")
    ORIGINS[target] = f"{repo}@{commit}"
    return target


def extract_tarball(archive: Path) -> Path:
    """Extract a tarball of an ExecuTorch tree once into ``<cache>/trees/tar-<content hash>``.

    The tree may sit at the archive's top level or under one folder (``executorch/``).
    """
    digest = hashlib.sha256()
    with open(archive, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)

    def extract(staging: Path) -> None:
        try:
            with tarfile.open(archive) as tar:
                tar.extractall(staging, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        except (tarfile.TarError, OSError) as exc:
            raise EtSourceError(f"--et-src {archive}: cannot extract: {exc}") from None

    folder = cached_folder(_trees() / f"tar-{digest.hexdigest()[:16]}", extract,
                           check=lambda found, digests: check_tarball(found, archive, digests))
    root = _tree_root(folder)
    if root is None:
        raise EtSourceError(f"--et-src {archive} is not a tarball of an ExecuTorch tree: missing {GLSL_SUBDIR}/")
    ORIGINS[root] = str(Path(archive).resolve())
    return root


def _tree_root(folder: Path) -> Path | None:
    """``folder`` if it is a tree, else its only subfolder if that is one."""
    if is_tree(folder):
        return folder
    subfolders = [p for p in folder.iterdir() if p.is_dir()]
    return subfolders[0] if len(subfolders) == 1 and is_tree(subfolders[0]) else None


def wheel_commit() -> tuple[str, str] | None:
    """``(version, git commit)`` the installed executorch records in ``executorch/version.py`` (read, not imported)."""
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        return None
    version_py = Path(list(spec.submodule_search_locations)[0], "version.py")
    if not version_py.is_file():
        return None
    text = version_py.read_text(encoding="utf-8")
    commit = re.search(r"git_version\b[^=]*=\s*['\"]([0-9a-f]{7,40})['\"]", text)
    version = re.search(r"__version__\s*=\s*['\"]([^'\"]+)['\"]", text)
    if commit is None:
        return None
    return (version.group(1) if version else "?"), commit.group(1)


def default_tree() -> TreeChoice:
    """The wheel's own commit, fetched once into the cache (see the module docstring)."""
    found = wheel_commit()
    if found is None:
        return TreeChoice(path=None, note=f"no ExecuTorch tree: executorch is not installed or records no git "
                                          f"commit; {HOW_TO_GIVE}")
    version, commit = found
    repo = os.environ.get(ET_REPO_ENV) or DEFAULT_REPO
    try:
        root = fetch_commit(repo, commit)
    except EtSourceError as exc:
        return TreeChoice(path=None, note=f"no ExecuTorch tree: could not fetch executorch {version}'s commit "
                                          f"{commit[:10]} from {repo} ({exc}); {HOW_TO_GIVE}")
    return TreeChoice(path=root, note=f"ExecuTorch tree: backends/vulkan of {commit[:10]} (the commit of the "
                                      f"installed executorch {version}) from {repo}, cached in {root}")


def _reachable(url: str) -> str | None:
    """None when ``url``'s host accepts a connection within ``CONNECT_TIMEOUT_S``, else why not."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme in ("", "file"):
        path = Path(parsed.path if parsed.scheme else url)
        return None if path.exists() else f"no repository at {path}"
    host = parsed.hostname or ""
    port = parsed.port or {"https": 443, "http": 80, "ssh": 22, "git": 9418}.get(parsed.scheme, 443)

    def connect() -> None:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="vkdiff-probe")
    try:
        pool.submit(connect).result(timeout=CONNECT_TIMEOUT_S + 1)
    except concurrent.futures.TimeoutError:
        return f"{host}:{port} did not answer within {CONNECT_TIMEOUT_S:.0f} s (offline?)"
    except OSError as exc:
        return f"{host}:{port} unreachable (offline?): {exc.strerror or exc}"
    finally:
        pool.shutdown(wait=False)
    return None


FETCH_ATTEMPTS: dict[tuple[str, str], Path | EtSourceError] = {}
"""Outcome of each (repository, commit) fetch of this process, failures included: a run tries once."""


def fetch_commit(repo: str, commit: str) -> Path:
    """``backends/vulkan`` of ``commit`` from ``repo`` into ``<cache>/trees/<commit>``; tried once per process.

    Raises:
        EtSourceError: the host is unreachable or git failed (the message says which).
    """
    key = (repo, commit)
    if key not in FETCH_ATTEMPTS:
        try:
            FETCH_ATTEMPTS[key] = _fetch(repo, commit)
        except EtSourceError as exc:
            FETCH_ATTEMPTS[key] = exc
    outcome = FETCH_ATTEMPTS[key]
    if isinstance(outcome, EtSourceError):
        raise outcome
    return outcome


def fetch_repository(commit: str) -> Path:
    """Where the default fetch keeps the repository it fetched ``commit`` into (the tree is checked against it)."""
    return cache_dir() / "repos" / f"fetch-{commit[:16]}"


def _fetch(repo: str, commit: str) -> Path:
    """``backends/vulkan`` of ``commit`` into the cache, from a sparse, blob-filtered, depth-1 fetch that is kept.

    What git guarantees about the kept repository: each object it received was hashed when it arrived (``git
    fetch`` indexes the pack), and an object's name is the hash of its content, so the trees reachable from the
    commit id (which comes from the installed wheel, not from the cache) name every blob of the tree. What it
    does not: objects at rest are not hashed again when read, so someone who can write the cache can edit the
    repository's objects, refs or config. That is why the check (``check_git``) reads only objects named by the
    commit id, hashes each again itself, and runs git there with every transport refused (``OFFLINE``).
    """
    kept = fetch_repository(commit)

    def fetch(staging: Path) -> None:
        why = _reachable(repo)
        if why is not None:
            raise EtSourceError(why)
        kept.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".fetch-", dir=kept.parent))
        try:
            _git("init", "-q", str(work))
            _git("-C", str(work), "remote", "add", "origin", repo)
            _git("-C", str(work), "sparse-checkout", "set", "backends/vulkan")
            _git("-C", str(work), "-c", "http.lowSpeedLimit=1000", "-c", "http.lowSpeedTime=30", "fetch", "-q",
                 "--depth", "1", "--filter=blob:none", "origin", commit, timeout=FETCH_TIMEOUT_S)
            _git("-C", str(work), "checkout", "-q", "FETCH_HEAD", timeout=FETCH_TIMEOUT_S)
            if not is_tree(work):
                raise EtSourceError(f"commit {commit[:10]} of {repo} has no {GLSL_SUBDIR}/")
            (staging / "backends").mkdir()
            (work / "backends" / "vulkan").rename(staging / "backends" / "vulkan")
            _faithful(staging, work, commit, f"commit {commit[:10]} of {repo}")
            _keep_repository(work, kept)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    root = cached_folder(_trees() / commit[:16], fetch, check=lambda folder, _: check_git(folder, kept, commit))
    ORIGINS[root] = f"{repo}@{commit}"
    return root


def _keep_repository(work: Path, kept: Path) -> None:
    """Publish the fetch's repository (its ``.git`` only) as ``kept``, replacing an older one."""
    for path in work.iterdir():
        if path.name != ".git":
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    shutil.rmtree(kept, ignore_errors=True)
    try:
        work.rename(kept)
    except OSError:
        if not kept.exists():
            raise


def _faithful(staging: Path, repo: str | Path, commit: str, source: str) -> None:
    """A fresh extraction must equal the commit's blobs, or every later check would find it changed."""
    try:
        check_git(staging, repo, commit)
    except CacheCorruptError as exc:
        raise EtSourceError(f"{source}: the extracted files differ from the commit's blobs ({exc.path.name}: "
                            f"{exc.why}; a .gitattributes export-subst or filter?)") from None


TreeFiles = dict[str, tuple[bool, str]]
"""Relative path → (is a symbolic link, digest of its content or link target)."""


def check_tarball(folder: Path, archive: Path, verified: dict[str, str] | None = None) -> None:
    """Compare an extracted tarball with the archive's members, hashing each while reading the archive.

    ``verified``: files' sha256 just checked against them (``datamodel.cache.verified_digests``), taken instead of
    reading those files again.

    Raises:
        CacheCorruptError: a file differs, is missing, or is not in the archive; or the archive cannot be read.
    """
    try:
        expected = _tarball_files(archive, folder)
    except (tarfile.TarError, OSError) as exc:
        raise CacheCorruptError(folder, f"cannot read {archive} to check it: {exc}") from None
    _compare(folder, expected, _sha256, str(archive), verified or {})


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


IN_MEMORY_BYTES = 64 << 20
"""Archives up to this size are decompressed in one call and their members hashed in memory; larger ones are read
as a stream. Streamed, tarfile decompresses in small reads between Python steps; in one call the decompression (31 ms
of a ``backends/vulkan`` tarball's 50 ms here) releases the GIL, which a first verdict's other threads need."""


def _tarball_files(archive: Path, dest: Path) -> TreeFiles:
    """What ``extractall(filter="data")`` writes for each member, by digest (members it refuses are left out)."""
    found: TreeFiles = {}
    links: set[str] = set()
    keep = getattr(tarfile, "data_filter", lambda member, path: member)
    data = _decompressed(archive)
    with (tarfile.open(archive, "r|*") if data is None else
          tarfile.open(fileobj=io.BytesIO(data), mode="r:")) as tar:
        for member in tar:
            if member.issym() or member.islnk():
                links.add(os.path.normpath(member.name))
            if not _plain(member, links):
                try:
                    member = keep(member, str(dest))
                except tarfile.FilterError:
                    continue
            name = os.path.normpath(member.name)
            if member.isfile():
                found[name] = (False, _stream_digest(tar.extractfile(member)) if data is None or member.issparse()
                               else _sha256(data[member.offset_data:member.offset_data + member.size]))
            elif member.issym():
                found[name] = (True, _sha256(member.linkname.encode()))
            elif member.islnk() and os.path.normpath(member.linkname) in found:
                found[name] = found[os.path.normpath(member.linkname)]
    return found


def _decompressed(archive: Path) -> bytes | None:
    """The archive's tar bytes, decompressed in one call (xz, gzip, bzip2 or none); None past ``IN_MEMORY_BYTES``.

    Raises:
        tarfile.ReadError: the compressed data is damaged.
    """
    if archive.stat().st_size > IN_MEMORY_BYTES:
        return None
    raw = archive.read_bytes()
    for magic, module in ((b"\xfd7zXZ\x00", lzma), (b"\x1f\x8b", gzip), (b"BZh", bz2)):
        if raw.startswith(magic):
            try:
                return module.decompress(raw)
            except (lzma.LZMAError, zlib.error, EOFError, OSError, ValueError) as exc:
                raise tarfile.ReadError(f"damaged {module.__name__} data: {exc}") from None
    return raw


def _plain(member: tarfile.TarInfo, links: set[str]) -> bool:
    """A regular file or folder with a relative name that never climbs out and no link among its parents: the data
    filter writes it as it is, so it need not run (it resolves real paths, 0.2 s of a first verdict for a tree's
    850 members)."""
    parts = member.name.replace("\\", "/").split("/")
    return ((member.isfile() or member.isdir()) and not member.name.startswith(("/", "\\"))
            and ":" not in member.name and ".." not in parts
            and not any(os.path.normpath("/".join(parts[:i])) in links for i in range(1, len(parts))))


def _stream_digest(handle) -> str:
    digest = hashlib.sha256()
    for block in iter(lambda: handle.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()


def check_git(folder: Path, repo: str | Path, commit: str) -> None:
    """Compare a cached tree with ``backends/vulkan`` of ``commit``: git blob ids, ``sha1(b"blob %d\\0" + data)``,
    against the commit's trees, each tree object hashed again on the way from the commit id.

    Raises:
        CacheCorruptError: a file differs, is missing or is extra; or the repository cannot show the commit.
    """
    if not Path(repo).exists():
        raise CacheCorruptError(folder, f"no repository {repo} to check it against")
    try:
        expected = commit_files(repo, commit, "backends/vulkan")
    except (EtSourceError, OSError) as exc:
        raise CacheCorruptError(folder, f"cannot check it against {repo}: {exc}") from None
    length = max((len(oid) for _, oid in expected.values()), default=40)
    _compare(folder, expected, lambda data: _git_id(b"blob", data, length), f"commit {commit[:10]}")


def _git_id(kind: bytes, data: bytes, length: int) -> str:
    """The object id git gives ``data`` (sha1, or sha256 in a repository of 64-digit ids)."""
    digest = hashlib.sha256() if length == 64 else hashlib.sha1()
    digest.update(kind + b" %d\0" % len(data) + data)
    return digest.hexdigest()


class _ObjectReader:
    """``git cat-file --batch`` in one process; every object read is hashed again and refused if it differs."""

    def __init__(self, repo: str | Path, id_length: int):
        self.repo, self.id_length = repo, id_length
        self.proc = subprocess.Popen(["git", "-C", str(repo), "cat-file", "--batch"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **OFFLINE})

    def read(self, oid: str, kind: bytes) -> bytes:
        self.proc.stdin.write(oid.encode() + b"\n")
        self.proc.stdin.flush()
        header = self.proc.stdout.readline().split()
        if len(header) != 3 or header[1] != kind:
            raise EtSourceError(f"{self.repo}: no {kind.decode()} {oid[:12]}")
        data = self.proc.stdout.read(int(header[2]) + 1)[:-1]
        if _git_id(kind, data, self.id_length) != oid:
            raise EtSourceError(f"{self.repo}: object {oid[:12]} does not hash to its name")
        return data

    def entries(self, oid: str) -> list[tuple[str, str, str]]:
        """(mode, name, object id) of each entry of tree ``oid``."""
        data, size, at, found = self.read(oid, b"tree"), self.id_length // 2, 0, []
        while at < len(data):
            space = data.index(b" ", at)
            nul = data.index(b"\0", space)
            found.append((data[at:space].decode(), data[space + 1:nul].decode("utf-8", "surrogateescape"),
                          data[nul + 1:nul + 1 + size].hex()))
            at = nul + 1 + size
        return found

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


FULL_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def commit_files(repo: str | Path, commit: str, subdir: str) -> TreeFiles:
    """Every file under ``subdir`` at ``commit`` with its blob id, read from the commit id down, hashes checked."""
    if not FULL_ID.fullmatch(commit):
        commit = _git("-C", str(repo), "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}", offline=True)
    reader = _ObjectReader(repo, len(commit))
    try:
        head = reader.read(commit, b"commit").split(b"\n", 1)[0].split()
        if len(head) != 2 or head[0] != b"tree":
            raise EtSourceError(f"{repo}: commit {commit[:12]} names no tree")
        oid = head[1].decode()
        for part in subdir.split("/"):
            entries = {name: (mode, sub) for mode, name, sub in reader.entries(oid)}
            if entries.get(part, ("",))[0] != "40000":
                raise EtSourceError(f"{repo}: commit {commit[:12]} has no {subdir}/")
            oid = entries[part][1]
        return {f"{subdir}/{path}": found for path, found in _walk(reader, oid, "")}
    finally:
        reader.close()


def _walk(reader: _ObjectReader, oid: str, prefix: str):
    """(path, (is a link, blob id)) of every file below tree ``oid`` (submodules have no files here)."""
    for mode, name, sub in reader.entries(oid):
        if mode == "40000":
            yield from _walk(reader, sub, f"{prefix}{name}/")
        elif mode != "160000":
            yield f"{prefix}{name}", (mode == "120000", sub)


def _compare(folder: Path, expected: TreeFiles, digest: Callable[[bytes], str], source: str,
             verified: dict[str, str] | None = None) -> None:
    """Raise ``CacheCorruptError`` unless ``folder`` holds exactly ``expected`` (bytecode is deleted first); a regular
    file in ``verified`` (its digest under ``digest``, just checked against it) is not read again."""
    found = _present(folder)
    for rel in sorted(set(found) | set(expected)):
        path = os.path.join(folder, rel)
        if rel not in expected:
            raise CacheCorruptError(Path(path), f"not in {source}")
        if rel not in found:
            raise CacheCorruptError(Path(path), f"missing ({source} has it)")
        link, want = expected[rel]
        if found[rel] != link:
            raise CacheCorruptError(Path(path), f"differs from {source}")
        if not link and verified and rel in verified:
            have = verified[rel]
        elif link:
            have = digest(os.readlink(path).encode())
        else:
            with open(path, "rb") as handle:
                have = digest(handle.read())
        if have != want:
            raise CacheCorruptError(Path(path), f"differs from {source}")


def _present(folder: Path) -> dict[str, bool]:
    """Relative path → is a symbolic link, for every file and link below ``folder`` (the manifest left out)."""
    present: dict[str, bool] = {}
    root = os.path.join(folder, "")
    for top, dirs, files in os.walk(folder):
        if "__pycache__" in dirs:
            shutil.rmtree(os.path.join(top, "__pycache__"))
            dirs.remove("__pycache__")
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            path = os.path.join(top, name)
            present[path[len(root):]] = os.path.islink(path)
    present.pop(MANIFEST, None)
    return present
