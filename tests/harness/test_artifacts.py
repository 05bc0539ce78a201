"""``--save-artifacts`` on the full stack, ``--from-artifacts`` where torch and executorch cannot be imported."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.entry import cli
from vkdiff.subjects import artifacts
from vkdiff.store import read

pytestmark = [requires_vulkan, requires_tree]
CASES = r"^two_heads\[4w-vulkan\]$|^embedding_large_vocab\[fp32-vulkan\]$"
WITHOUT_TORCH = ("import sys\nfor name in ('torch', 'torchao', 'executorch'):\n    sys.modules[name] = None\n"
                 "from vkdiff.entry.cli import main\nsys.exit(main(sys.argv[1:]))")


def _device_results(path):
    return {(r.case, r.device): r for r in read([path]).results if r.rule == "device"}


@pytest.fixture(scope="module")
def saved(tmp_path_factory, et_tree):
    """(results of the full stack, artifacts folder) for ``CASES``."""
    folder = tmp_path_factory.mktemp("artifacts")
    full, artifacts = folder / "full.jsonl", folder / "artifacts"
    cli.main(["run", "--suite", "models", "--cases", CASES, "--et-src", str(et_tree), "--results", str(full),
              "--save-artifacts", str(artifacts)])
    return full, artifacts


def _without_torch(*argv: str) -> subprocess.CompletedProcess:
    """A GPU runner: no torch, torchao or executorch, and no glslc or spirv-opt on PATH (the cache is warm)."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as empty:
        return subprocess.run([sys.executable, "-c", WITHOUT_TORCH, *argv], capture_output=True, text=True,
                              env={**os.environ, "PATH": empty})


def test_a_runner_without_torch_judges_the_saved_delegates_like_the_full_stack(saved, tmp_path, et_tree):
    full, artifacts = saved
    bare = tmp_path / "bare.jsonl"
    done = _without_torch("run", "--suite", "models", "--from-artifacts", str(artifacts), "--et-src", str(et_tree),
                          "--results", str(bare))
    assert bare.exists(), done.stderr[-2000:]
    ours, theirs = _device_results(full), _device_results(bare)
    assert len(ours) == 2 and ours.keys() == theirs.keys()
    for key in ours:
        assert theirs[key].status == ours[key].status
        assert [n["status"] for n in theirs[key].metrics["nodes"]] == [n["status"] for n in ours[key].metrics["nodes"]]
        assert theirs[key].repro.startswith("vkdiff run --suite models --cases ") and "--from-artifacts" in \
            theirs[key].repro
    assert cli.main(["report", str(full), str(bare), "-o", str(tmp_path / "report")]) == 0


def test_a_runner_without_torch_writes_a_node_folder_from_the_artifacts(saved, tmp_path, et_tree):
    out = tmp_path / "node"
    done = _without_torch("repro", "embedding_large_vocab[fp32-vulkan]", "--from-artifacts", str(saved[1]),
                          "--et-src", str(et_tree), "-o", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "node 0 (aten.embedding.default" in done.stdout and "FAIL_NUMERIC alone, FAIL_NUMERIC in the model" in \
        done.stdout
    replayed = subprocess.run([sys.executable, str(out / "run_repro.py"), str(out)], capture_output=True, text=True)
    assert json.loads(replayed.stdout.strip().splitlines()[-1])["same_verdict"]
    missing = _without_torch("repro", "llama_proj[4w-vulkan]", "--from-artifacts", str(saved[1]), "-o", str(out))
    assert missing.returncode == cli.EXIT_USAGE and "not saved in --from-artifacts" in missing.stderr


def test_a_corrupt_artifact_is_one_line_before_any_device_work(tmp_path, et_tree, capsys):
    saved = tmp_path / "artifacts"
    cli.main(["run", "--suite", "models", "--cases", r"^two_heads\[4w-vulkan\]$", "--et-src", str(et_tree),
              "--results", str(tmp_path / "r.jsonl"), "--save-artifacts", str(saved)])
    files = json.loads((saved / "artifacts.json").read_text())["cases"]["two_heads[4w-vulkan]"]["files"]
    entry = saved / files["arrays"][0]
    data = bytearray(entry.read_bytes())
    data[-1] ^= 0xFF
    entry.write_bytes(bytes(data))
    capsys.readouterr()
    assert cli.main(["run", "--from-artifacts", str(saved), "--results", str(tmp_path / "b.jsonl")]) == cli.EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"vkdiff: error: --from-artifacts {saved}: two_heads[4w-vulkan]: ")
    assert err[0].endswith("save the artifacts again")


class _Payload:
    """Unpickling this runs ``touch`` on the marker: what a crafted artifact from a fork would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.marker}",)


def _craft(folder, document: dict, arrays: dict, pte: bytes = b"not a program") -> None:
    import hashlib
    import io

    import numpy as np

    (folder / "models").mkdir(parents=True)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    files = {"document": ("models/x.json", json.dumps(document).encode()), "arrays": ("models/x.npz", buffer.getvalue()),
             "pte": ("models/x.pte", pte)}
    for name, data in files.values():
        (folder / name).write_bytes(data)
    manifest = {"format": artifacts.FORMAT, "cases": {"evil[4w-vulkan]": {
        "ident": {"case": "evil[4w-vulkan]", "op": "evil", "rule": "device", "knobs": {}},
        "files": {role: [name, hashlib.sha256(data).hexdigest()] for role, (name, data) in files.items()}}}}
    (folder / "artifacts.json").write_text(json.dumps(manifest))


def test_a_crafted_pickle_in_an_artifact_is_refused_and_executes_nothing(tmp_path, capsys):
    import numpy as np

    marker = tmp_path / "pwned"
    folder = tmp_path / "artifacts"
    _craft(folder, {"case": "evil[4w-vulkan]"}, {"step/0/0": np.array([_Payload(marker)], dtype=object)})
    capsys.readouterr()
    assert cli.main(["run", "--from-artifacts", str(folder), "--results", str(tmp_path / "r.jsonl")]) == cli.EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("models/x.npz" in err[0] or "models/x.json" in err[0]), err
    assert not marker.exists(), "unpickling ran the payload"


def test_a_malformed_artifact_is_one_line_naming_the_file_and_the_field(tmp_path, capsys):
    import numpy as np

    folder = tmp_path / "artifacts"
    _craft(folder, {"case": "evil[4w-vulkan]", "method": "forward", "program": {"name": 3}},
           {"x": np.zeros(2)})
    capsys.readouterr()
    assert cli.main(["run", "--from-artifacts", str(folder), "--results", str(tmp_path / "r.jsonl")]) == cli.EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith("models/x.json: methods: expected an object, got NoneType"), err


def test_no_pickle_loads_on_any_path_that_reads_files():
    import re
    from pathlib import Path

    package = Path(cli.__file__).parents[1]
    found = [f"{p.relative_to(package)}:{i}" for p in package.rglob("*.py")
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"pickle\.loads?\(|allow_pickle=True|torch\.load\((?!.*weights_only=True)", line)]
    assert not found, found


def _forged(saved_folder, tmp_path, *, entry=None, document=None, pte=None):
    """A copy of ``saved_folder`` edited as an attacker would, every hash in the manifest made to match again."""
    import hashlib
    import shutil

    folder = tmp_path / "forged"
    shutil.copytree(saved_folder, folder)
    manifest = json.loads((folder / "artifacts.json").read_text())
    case = manifest["cases"]["two_heads[4w-vulkan]"]
    manifest["cases"] = {"two_heads[4w-vulkan]": case}
    if document is not None:
        path = folder / case["files"]["document"][0]
        doc = json.loads(path.read_text())
        document(doc)
        path.write_text(json.dumps(doc))
    if pte is not None:
        (folder / case["files"]["pte"][0]).write_bytes(pte)
    for role, (name, _) in case["files"].items():
        case["files"][role][1] = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    if entry is not None:
        entry(case)
    (folder / "artifacts.json").write_text(json.dumps(manifest))
    return folder


def _refused_line(capsys, folder, tmp_path) -> str:
    capsys.readouterr()
    assert cli.main(["run", "--from-artifacts", str(folder), "--results", str(tmp_path / "r.jsonl")]) == cli.EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert not (tmp_path / "r.jsonl").exists() or not (tmp_path / "r.jsonl").read_text().strip()
    return err[0]


def test_a_forged_status_is_refused_not_reported(saved, tmp_path, capsys):
    """The hole: an entry {"status": ["PASS", "trust me"]} with no files reported PASS, exit 0, having run nothing."""
    folder = _forged(saved[1], tmp_path, entry=lambda case: case.update(status=["PASS", "trust me"]))
    assert "carries 'status': artifacts carry inputs, never verdicts" in _refused_line(capsys, folder, tmp_path)
    folder = _forged(saved[1], tmp_path / "b", entry=lambda case: case["ident"].update(status="PASS"))
    assert "ident: unknown field 'status'" in _refused_line(capsys, folder, tmp_path)


def test_a_tolerance_in_the_document_is_refused(saved, tmp_path, capsys):
    """The hole: ``"atol": NaN`` passed outputs off by 1.24e3."""
    folder = _forged(saved[1], tmp_path, document=lambda doc: doc.update(tolerance={"atol": float("nan")}))
    assert "carries 'tolerance' (tolerances come from vkdiff's policy or --atol/--rtol)" in \
        _refused_line(capsys, folder, tmp_path)


def test_a_swapped_pte_is_refused(saved, tmp_path, capsys):
    manifest = json.loads((saved[1] / "artifacts.json").read_text())
    other = manifest["cases"]["embedding_large_vocab[fp32-vulkan]"]["files"]["pte"][0]
    folder = _forged(saved[1], tmp_path, pte=(saved[1] / other).read_bytes())
    assert "is not the program the document describes (sha256 differs)" in _refused_line(capsys, folder, tmp_path)


def test_a_fifo_or_a_wrong_typed_field_is_one_line(saved, tmp_path, capsys):
    import os

    folder = _forged(saved[1], tmp_path)
    case = json.loads((folder / "artifacts.json").read_text())["cases"]["two_heads[4w-vulkan]"]
    npz = folder / case["files"]["arrays"][0]
    npz.unlink()
    os.mkfifo(npz)
    assert "not a regular file" in _refused_line(capsys, folder, tmp_path)
    typed = _forged(saved[1], tmp_path / "b", document=lambda doc: doc["program"]["methods"]["forward"].update(
        inputs="0"))
    assert "methods.forward.inputs: expected a list, got str" in _refused_line(capsys, typed, tmp_path)
    deep = _forged(saved[1], tmp_path / "c", document=lambda doc: doc.update(case="x"))
    (deep / case["files"]["document"][0]).write_text("[" * 200_000 + "]" * 200_000)
    forged = json.loads((deep / "artifacts.json").read_text())
    import hashlib

    forged["cases"]["two_heads[4w-vulkan]"]["files"]["document"][1] = hashlib.sha256(
        (deep / case["files"]["document"][0]).read_bytes()).hexdigest()
    (deep / "artifacts.json").write_text(json.dumps(forged))
    assert "JSON nested too deeply" in _refused_line(capsys, deep, tmp_path)


def test_the_tolerance_of_saved_cases_is_the_policy_or_the_command_line(saved, tmp_path, et_tree):
    """The runner applies vkdiff's policy for the program, as the machine that saved it did, or ``--atol/--rtol``."""
    full, folder = saved
    policy = {(r.case, r.device): r.tolerance for r in read([full]).results if r.rule == "device"}
    again, given = tmp_path / "again.jsonl", tmp_path / "given.jsonl"
    cli.main(["check", str(folder), "--et-src", str(et_tree), "--results", str(again)])
    cli.main(["check", str(folder), "--et-src", str(et_tree), "--results", str(given), "--atol", "0.5"])
    assert {(r.case, r.device): r.tolerance for r in read([again]).results if r.rule == "device"} == policy
    assert {r.tolerance["atol"] for r in read([given]).results if r.rule == "device"} == {0.5}
