"""Garbled cache entries: every one is detected, discarded, rebuilt and flagged; none changes a verdict.

A baseline run (one kernel case on the pinned tree, one model case) fills a private cache.
Each test copies that cache, garbles one file of it, runs again in-process and compares:
same statuses, the results that used the entry flagged ``cache-repaired``, one line on
screen per repair, never a traceback or a silent ``NOT_SUPPORTED``.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from tests.testutils import main_tree, requires_tree, requires_vulkan
from vkdiff.datamodel import REPAIRED_FLAG, cache
from vkdiff.entry import cli
from vkdiff.store import load

pytestmark = [requires_tree, requires_vulkan]

CASES = r"^(linear_q4gsw\[M13-K64-N40-g32-fp32-buffer\]|embedding\[emb4w-perrow-vulkan\])$"


def run(cache_root: Path, results: Path, monkeypatch, capsys) -> tuple[int, list, str]:
    """One in-process ``vkdiff run`` on ``cache_root``: (exit code, results, stderr)."""
    monkeypatch.setenv("VKDIFF_CACHE_DIR", str(cache_root))
    cache.VERIFIED.clear()
    code = cli.main(["run", "--cases", CASES, "--et-src", main_tree()[0], "--results", str(results)])
    return code, list(load([results])), capsys.readouterr().err


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("baseline")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("VKDIFF_CACHE_DIR", str(root / "cache"))
        cache.VERIFIED.clear()
        assert cli.main(["run", "--cases", CASES, "--et-src", main_tree()[0],
                         "--results", str(root / "r.jsonl")]) == 0
    statuses = {(r.case, r.rule): r.status for r in load([root / "r.jsonl"])}
    assert statuses and REPAIRED_FLAG not in {f for r in load([root / "r.jsonl"]) for f in r.flags}
    return root / "cache", statuses


def entries(root: Path) -> dict[str, list[Path]]:
    """The baseline cache's files by kind."""
    files = [p for p in root.rglob("*") if p.is_file() and "repos" not in p.parts]
    kinds = {"spv": [p for p in files if p.parent.name == "spv"],
             "index": [p for p in files if "index" in p.parts],
             "include": [p for p in files if "include" in p.parts],
             "tree": [p for p in files if "trees" in p.parts],
             "lowering": [p for p in files if "lowered" in p.parts]}
    assert all(kinds.values()), {k: len(v) for k, v in kinds.items()}
    return kinds


def garble(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif how == "flip":
        middle = len(data) // 2
        path.write_bytes(data[:middle] + bytes([data[middle] ^ 0x5A]) + data[middle + 1:])
    else:
        path.unlink()


def check_repaired(baseline_statuses: dict, code: int, results: list, err: str) -> None:
    assert code == 0, err
    assert {(r.case, r.rule): r.status for r in results} == baseline_statuses
    assert "Traceback" not in err and "NOT_SUPPORTED" not in err
    assert any(REPAIRED_FLAG in r.flags for r in results)
    assert "cache repaired: " in err


@pytest.mark.parametrize("kind", ["spv", "index", "include", "tree", "lowering"])
@pytest.mark.parametrize("how", ["truncate", "flip"])
def test_garbled_entry_is_repaired(baseline, tmp_path, monkeypatch, capsys, kind, how):
    source, statuses = baseline
    root = tmp_path / "cache"
    shutil.copytree(source, root)
    kinds = entries(root)
    garble(random.Random(f"{kind}-{how}").choice(sorted(kinds[kind])), how)
    if kind == "include":  # headers are read when a variant compiles: drop the index so one does
        for index in kinds["index"]:
            index.unlink()
    check_repaired(statuses, *run(root, tmp_path / "r.jsonl", monkeypatch, capsys))
    code, again, err = run(root, tmp_path / "again.jsonl", monkeypatch, capsys)
    assert code == 0 and "cache repaired" not in err and not any(REPAIRED_FLAG in r.flags for r in again)


@pytest.mark.parametrize("seed", range(4))
def test_any_single_cache_file(baseline, tmp_path, monkeypatch, capsys, seed):
    """A seeded pick among every file of the cache (manifests and headers included): same verdicts; the
    garbled entry is repaired by the run when the run reads it, else reported by ``vkdiff cache verify``."""
    source, statuses = baseline
    root = tmp_path / "cache"
    shutil.copytree(source, root)
    files = sorted(p for kind in entries(root).values() for p in kind)
    garble(random.Random(seed).choice(files), "flip")
    code, results, err = run(root, tmp_path / "r.jsonl", monkeypatch, capsys)
    assert code == 0 and "Traceback" not in err
    assert {(r.case, r.rule): r.status for r in results} == statuses
    if not any(REPAIRED_FLAG in r.flags for r in results):
        assert cli.main(["cache", "verify"]) == 1
        assert "corrupt: " in capsys.readouterr().out
        assert cli.main(["cache", "verify", "--repair"]) == 0
    capsys.readouterr()
    assert cli.main(["cache", "verify"]) == 0


def test_cache_verify_and_clear(baseline, tmp_path, monkeypatch, capsys):
    source, _ = baseline
    root = tmp_path / "cache"
    shutil.copytree(source, root)
    monkeypatch.setenv("VKDIFF_CACHE_DIR", str(root))
    (root / "v2" / "spv" / ".tmp-leftover").write_bytes(b"half")
    assert cli.main(["cache", "verify"]) == 0
    out = capsys.readouterr().out
    assert "sound: spv " in out and "leftover of an interrupted write" in out
    assert cli.main(["cache", "clear"]) == 0
    assert not root.exists() and capsys.readouterr().out.startswith(f"removed {root}: ")


def test_unwritable_cache_is_one_usage_error(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("VKDIFF_CACHE_DIR", str(blocker / "cache"))
    assert cli.main(["run", "--suite", "kernels", "--cases", r"M1-K64-N40-g32-fp32-buffer\]$", "--et-src", "none"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"vkdiff: error: cache folder {blocker / 'cache'} cannot be written") and err.count("\n") == 1
    assert "VKDIFF_CACHE_DIR" in err
