"""Garbled cache entries: every one is detected, discarded, rebuilt and flagged; none changes a verdict.

A baseline run (one kernel case on the pinned tree, one model case) fills a private cache.
Each test copies that cache, garbles one file of it, runs again in-process and compares:
same statuses, the results that used the entry flagged ``cache-repaired``, one line on
screen per repair, never a traceback or a silent ``NOT_SUPPORTED``.
"""

from __future__ import annotations

import gc
import json
import random
import shutil
from pathlib import Path

import pytest

from tests.faults.forgery import PATCHES, forge_one, patch_module, repoint_index
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
        gc.collect()  # the builder's derived data is stored when it goes (``derived.Derived``)
    statuses = {(r.case, r.rule): r.status for r in load([root / "r.jsonl"])}
    assert statuses and REPAIRED_FLAG not in {f for r in load([root / "r.jsonl"]) for f in r.flags}
    return root / "cache", statuses


def entries(root: Path) -> dict[str, list[Path]]:
    """The baseline cache's files by kind."""
    files = [p for p in root.rglob("*") if p.is_file() and "repos" not in p.parts]
    kinds = {"spv": [p for p in files if p.parent.name == "spv" and "traits" not in p.parts],
             "traits": [p for p in files if "traits" in p.parts],
             "index": [p for p in files if "index" in p.parts],
             "include": [p for p in files if "include" in p.parts],
             "tree": [p for p in files if "trees" in p.parts],
             "lowering": [p for p in files if "lowered" in p.parts],
             "derived": [p for p in files if "derived" in p.parts]}
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


@pytest.mark.parametrize("kind", ["spv", "index", "include", "tree", "lowering", "derived"])
@pytest.mark.parametrize("how", ["truncate", "flip"])
def test_garbled_entry_is_repaired(baseline, tmp_path, monkeypatch, capsys, kind, how):
    source, statuses = baseline
    root = tmp_path / "cache"
    shutil.copytree(source, root)
    kinds = entries(root)
    garble(random.Random(f"{kind}-{how}").choice(sorted(kinds[kind])), how)
    if kind == "include":  # glslc reads the headers folder only when a variant compiles: drop the modules so one does
        for entry in kinds["index"] + kinds["spv"]:
            entry.unlink()
    check_repaired(statuses, *run(root, tmp_path / "r.jsonl", monkeypatch, capsys))
    code, again, err = run(root, tmp_path / "again.jsonl", monkeypatch, capsys)
    assert code == 0 and "cache repaired" not in err and not any(REPAIRED_FLAG in r.flags for r in again)


def test_a_tree_repaired_before_the_cases_are_selected_is_still_reported(baseline, tmp_path, monkeypatch, capsys):
    """The tree is checked on a thread started before ``vkdiff run`` selects its cases (``inputs_ahead``): a repair
    it makes that early is counted as this run's and printed."""
    import threading

    from vkdiff.cases import kernels
    from vkdiff.device.shaders import trees

    source, statuses = baseline
    root = tmp_path / "cache"
    shutil.copytree(source, root)
    garble(sorted(entries(root)["tree"])[0], "flip")
    checked, real_tree, real_cases = threading.Event(), trees.choose_tree, kernels.all_cases

    def choose_tree(*args, **kwargs):
        try:
            return real_tree(*args, **kwargs)
        finally:
            checked.set()

    monkeypatch.setattr(trees, "choose_tree", choose_tree)
    monkeypatch.setattr(kernels, "all_cases", lambda *a, **k: (checked.wait(30), real_cases(*a, **k))[1])
    check_repaired(statuses, *run(root, tmp_path / "r.jsonl", monkeypatch, capsys))


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


def test_repointed_index_is_caught_on_use(baseline, tmp_path, monkeypatch, capsys):
    """An index entry pointed at another variant's module and hashed again passes ``cache verify``; the run derives
    the key from the variant's source, so it repairs the entry instead of running the wrong shader."""
    source, statuses = baseline
    root = tmp_path / "cache"
    shutil.copytree(source, root)
    indexes = sorted(entries(root)["index"])
    first, second = (json.loads(cache.read_entry(p))["key"] for p in indexes[:2])
    assert first != second
    repoint_index(indexes[0], second)
    monkeypatch.setenv("VKDIFF_CACHE_DIR", str(root))
    assert cli.main(["cache", "verify"]) == 0, "the forged entry's own hash is sound"
    capsys.readouterr()
    check_repaired(statuses, *run(root, tmp_path / "r.jsonl", monkeypatch, capsys))


def test_patched_module_is_caught_by_verify_rebuild(baseline, tmp_path, monkeypatch, capsys):
    """A module patched (``FAbs`` → ``FSign``, else a constant negated) and hashed again passes ``cache verify`` and is
    used by a run (the documented trust boundary); ``cache verify --rebuild`` compiles it again and finds it."""
    source, statuses = baseline
    root = tmp_path / "cache"
    shutil.copytree(source, root)
    monkeypatch.setenv("VKDIFF_CACHE_DIR", str(root))
    module, _ = forge_one(sorted(entries(root)["spv"]))
    assert cli.main(["cache", "verify"]) == 0
    assert "module bytes were checked against their own hash only" in capsys.readouterr().out
    rebuild = ["cache", "verify", "--rebuild", "--et-src", main_tree()[0]]
    assert cli.main(rebuild) == 1
    out = capsys.readouterr().out
    assert f"corrupt: {module} (differs from a fresh compile of " in out, out
    assert "transformed again, identical: " in out
    assert cli.main([*rebuild, "--repair"]) == 0 and "; replaced)" in capsys.readouterr().out
    assert cli.main(rebuild) == 0
    assert f"compiled again, identical: {len(entries(root)['index'])}" in capsys.readouterr().out
    code, results, err = run(root, tmp_path / "r.jsonl", monkeypatch, capsys)
    assert code == 0 and {(r.case, r.rule): r.status for r in results} == statuses, err


def test_rebuild_names_what_it_cannot_check(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VKDIFF_CACHE_DIR", str(tmp_path / "cache"))
    assert cli.main(["cache", "verify", "--et-src", "none"]) == 2
    assert "add --rebuild" in capsys.readouterr().err
    assert cli.main(["cache", "verify", "--rebuild", "--et-src", "none"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vkdiff: error: vkdiff cache verify --rebuild needs the tree the modules were built from: "
                          "no ExecuTorch tree") and err.count("\n") == 1


def test_forged_transformed_module_is_caught_by_verify_rebuild(baseline, tmp_path, monkeypatch, capsys):
    """A transformed module (``baked/``, what wgpu runs) patched and hashed again: ``cache verify --rebuild`` makes
    it again from the source module it records and finds it; ``--repair`` deletes it, and it is made again."""
    from vkdiff.datamodel import read_entry, write_entry
    from vkdiff.device.shaders.dispatch import baked_record

    source, statuses = baseline
    root = tmp_path / "cache"
    shutil.copytree(source, root)
    monkeypatch.setenv("VKDIFF_CACHE_DIR", str(root))
    baked = sorted(p for p in (root / "v2" / "baked").glob("*.spv"))
    assert baked, "the baseline run transformed modules for naga"
    patchable = [(path, how) for how in PATCHES for path in baked if _patches(path, how)]
    assert patchable, "a transformed module with a constant to change"
    path, how = patchable[0]
    made_from, clamped, module = baked_record(read_entry(path))
    write_entry(path, json.dumps(made_from).encode() + b"\n" + clamped.to_bytes(4, "little") +
                patch_module(module, how))
    assert cli.main(["cache", "verify"]) == 0, "the forged entry's own hash is sound"
    rebuild = ["cache", "verify", "--rebuild", "--et-src", main_tree()[0]]
    capsys.readouterr()
    code = cli.main(rebuild)
    out = capsys.readouterr().out
    assert code == 1, out
    assert f"corrupt: {path} (differs from its source module transformed again)" in out
    assert cli.main([*rebuild, "--repair"]) == 0 and "; deleted)" in capsys.readouterr().out
    assert cli.main(rebuild) == 0 and f"transformed again, identical: {len(baked) - 1}" in capsys.readouterr().out
    code, results, err = run(root, tmp_path / "r.jsonl", monkeypatch, capsys)
    assert code == 0 and {(r.case, r.rule): r.status for r in results} == statuses, err


def _patches(path: Path, how: str) -> bool:
    """Whether ``patch_module`` can change the transformed module of baked entry ``path`` that way."""
    from vkdiff.device.shaders.dispatch import baked_record

    try:
        patch_module(baked_record(cache.read_entry(path))[2], how)
    except ValueError:
        return False
    return True


def test_a_forged_trait_probe_module_is_caught_by_verify_rebuild(baseline, tmp_path, monkeypatch, capsys):
    """A probe's cached SPIR-V replaced and hashed again (its own hash is sound): ``--rebuild`` compiles the probe
    again and finds it; ``--repair`` writes the probe's own module back."""
    from vkdiff.datamodel import read_entry, write_entry

    source, _ = baseline
    root = tmp_path / "cache"
    shutil.copytree(source, root)
    monkeypatch.setenv("VKDIFF_CACHE_DIR", str(root))
    probes = sorted((root / "v2" / "traits" / "spv").glob("*.spv"))
    assert probes, "the baseline run probed the device's traits"
    head, _, module = read_entry(probes[0]).partition(b"\n")
    write_entry(probes[0], head + b"\n" + module[:-4] + bytes(4))
    assert cli.main(["cache", "verify"]) == 0, "the forged entry's own hash is sound"
    rebuild = ["cache", "verify", "--rebuild", "--et-src", main_tree()[0]]
    capsys.readouterr()
    assert cli.main(rebuild) == 1
    assert f"corrupt: {probes[0]} (differs from the probe's source compiled again)" in capsys.readouterr().out
    assert cli.main([*rebuild, "--repair"]) == 0
    capsys.readouterr()
    assert cli.main(rebuild) == 0 and read_entry(probes[0]).partition(b"\n")[2] == module
