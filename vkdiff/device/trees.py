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
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import tarfile
import tempfile
import urllib.parse
from pathlib import Path

from vkdiff.datamodel import REPAIRS, cache_dir, cached_folder

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


def _git(*args: str, timeout: float | None = None) -> str:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    except subprocess.TimeoutExpired:
        raise EtSourceError(f"git {' '.join(args[:3])}: no answer within {timeout:.0f} s") from None
    if done.returncode:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
        raise EtSourceError(f"git {' '.join(args[:3])}: {last}")
    return done.stdout.strip()


def checkout_revision(repo: str, rev: str) -> Path:
    """Extract ``backends/vulkan`` of ``repo`` at ``rev`` into ``<cache>/trees/<commit>`` (once)."""
    if "://" in repo:
        local = cache_dir() / "repos" / hashlib.sha256(repo.encode()).hexdigest()[:16]
        if not local.exists():
            _git("clone", "--bare", "--filter=blob:none", repo, str(local))
        else:
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

    target = cached_folder(_trees() / commit[:16], extract)
    if not is_tree(target):
        raise EtSourceError(f"--et-src {repo}@{rev} is not an ExecuTorch tree: missing {GLSL_SUBDIR}/")
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

    root = _tree_root(cached_folder(_trees() / f"tar-{digest.hexdigest()[:16]}", extract))
    if root is None:
        raise EtSourceError(f"--et-src {archive} is not a tarball of an ExecuTorch tree: missing {GLSL_SUBDIR}/")
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


def _fetch(repo: str, commit: str) -> Path:
    def fetch(staging: Path) -> None:
        why = _reachable(repo)
        if why is not None:
            raise EtSourceError(why)
        work = Path(tempfile.mkdtemp(prefix=".fetch-", dir=_trees()))
        try:
            _git("init", "-q", str(work))
            _git("-C", str(work), "remote", "add", "origin", repo)
            _git("-C", str(work), "sparse-checkout", "set", "backends/vulkan")
            _git("-C", str(work), "-c", "http.lowSpeedLimit=1000", "-c", "http.lowSpeedTime=30", "fetch", "-q",
                 "--depth", "1", "--filter=blob:none", "origin", commit, timeout=FETCH_TIMEOUT_S)
            _git("-C", str(work), "checkout", "-q", "FETCH_HEAD", timeout=FETCH_TIMEOUT_S)
            if not is_tree(work):
                raise EtSourceError(f"commit {commit[:10]} of {repo} has no {GLSL_SUBDIR}/")
            (work / "backends").rename(staging / "backends")
        finally:
            shutil.rmtree(work, ignore_errors=True)

    return cached_folder(_trees() / commit[:16], fetch)
