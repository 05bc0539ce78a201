"""Hostile inputs: seeded mutants of every file vkdiff reads from elsewhere end in one line or a verdict.

Each kind gets ``MUTANTS`` mutants of a real file (a ``.pte`` of ``two_partitions``, its
artifacts folder, an ``.npz`` and a ``.pt`` of its inputs), fed to the function the CLI
calls for it. Every mutant must end in the command's one-line error (no line break,
the exception type the CLI turns into exit 2) or in something runnable; any other
exception fails the test naming the mutant's seed and index, and the mutant is kept
under the test's tmp folder. A sample of the runnable ones then runs on the device and
must end in a result. ``VKDIFF_FUZZ_SEED`` picks another seed (printed by every test).
"""

from __future__ import annotations

import collections
import hashlib
import io
import json
import os
import random
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from tests.faults.mutants import byte_mutants, json_mutant
from tests.testutils import requires_tree, requires_vulkan
from vkdiff.subjects import artifacts
from vkdiff.subjects import inputs as program_inputs
from vkdiff.subjects.programs import CheckOptions, SubjectError, pte_cases

MUTANTS = 2000
SEED = int(os.environ.get("VKDIFF_FUZZ_SEED", "0"))
ON_DEVICE = 12
"""Runnable mutants of each kind run on the device (each takes tens of milliseconds on lavapipe)."""
COMMAND = ("vkdiff", "check")


class Campaign:
    """Outcomes of one kind's mutants: refusals (one line each), runnable ones, and failures with their seed."""

    def __init__(self, kind: str, folder: Path):
        self.kind, self.folder = kind, folder
        self.refused, self.runnable, self.failures = 0, [], []
        self.started = time.monotonic()
        print(f"fuzz {kind}: seed {SEED} (VKDIFF_FUZZ_SEED)")

    def refuse(self, index: int, exc: BaseException) -> None:
        self.refused += 1
        if "\n" in str(exc):
            self.failures.append(f"mutant {index}: a refusal of {str(exc).count(chr(10)) + 1} lines: {exc!s:.300}")

    def crash(self, index: int, exc: BaseException, data: bytes | None = None) -> None:
        kept = self.folder / f"{self.kind}-{SEED}-{index}"
        if data is not None:
            kept.write_bytes(data)
        self.failures.append(f"mutant {index} (seed {SEED}, kept as {kept}): {type(exc).__name__}: {exc!s:.300}")

    def check(self, count: int) -> None:
        seconds = time.monotonic() - self.started
        print(f"fuzz {self.kind}: {count} mutants in {seconds:.1f} s: {self.refused} refused in one line, "
              f"{len(self.runnable)} runnable, {len(self.failures)} failures")
        assert count >= MUTANTS
        assert not self.failures, "\n".join(self.failures[:10])


def test_pte_mutants_end_in_one_line_or_a_program(two_partitions, tmp_path):
    data = two_partitions[0].read_bytes()
    campaign = Campaign("pte", tmp_path)
    path = tmp_path / "mutant.pte"
    for index, mutant in byte_mutants(data, SEED, MUTANTS):
        path.write_bytes(mutant)
        try:
            campaign.runnable.append(pte_cases(path, CheckOptions(int_range=(0, 4)), COMMAND))
        except SubjectError as exc:
            campaign.refuse(index, exc)
        except Exception as exc:  # anything else is the hole this test looks for
            campaign.crash(index, exc, mutant)
    campaign.check(MUTANTS)


def _write_folder(folder: Path, ident: dict, document: dict, arrays: bytes, pte: bytes,
                  manifest_edit=None) -> None:
    """An artifacts folder holding ``document``, re-hashed as a forger would (so mutants reach the parsers)."""
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "models").mkdir(parents=True)
    files = {"document": ("models/x.json", json.dumps(document).encode()), "arrays": ("models/x.npz", arrays),
             "pte": ("models/x.pte", pte)}
    for name, data in files.values():
        (folder / name).write_bytes(data)
    manifest = {"format": artifacts.FORMAT, "cases": {ident["case"]: {
        "ident": ident, "files": {role: [name, hashlib.sha256(data).hexdigest()] for role, (name, data) in
                                  files.items()}}}}
    if manifest_edit is not None:
        manifest = manifest_edit(manifest)
    (folder / "artifacts.json").write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def saved_parts(two_partitions):
    """(ident, document, npz bytes, pte bytes, prepared program) of ``two_partitions`` as artifacts hold it."""
    [case] = pte_cases(two_partitions[0], CheckOptions(), COMMAND)
    document, arrays = case.model.to_document()
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return dict(case.ident, repro=""), document, buffer.getvalue(), two_partitions[0].read_bytes(), case.model


def _artifact_campaign(kind: str, tmp_path: Path, saved_parts, make) -> "Campaign":
    """Load ``MUTANTS`` folders, each made by ``make(rng) -> (document, arrays, manifest_edit)``."""
    ident, document, arrays, pte, _ = saved_parts
    campaign = Campaign(kind, tmp_path)
    folder = tmp_path / "artifacts"
    for index in range(MUTANTS):
        rng = random.Random(f"{SEED}:{kind}:{index}")
        doc, npz, edit = make(rng, document, arrays)
        _write_folder(folder, ident, doc, npz, pte, edit)
        try:
            campaign.runnable.append(artifacts.load(folder))
        except artifacts.ArtifactError as exc:
            campaign.refuse(index, exc)
        except Exception as exc:  # anything else is the hole this test looks for
            kept = tmp_path / f"{kind}-{SEED}-{index}"
            shutil.copytree(folder, kept)
            campaign.crash(index, exc)
    return campaign


def test_artifact_document_and_manifest_mutants_end_in_one_line_or_a_program(saved_parts, tmp_path):
    def make(rng, document, arrays):
        roll = rng.random()
        if roll < 0.5:
            return json_mutant(document, rng), arrays, None
        if roll < 0.75:
            return document, arrays, lambda manifest: json_mutant(manifest, rng)
        index, npz = next(byte_mutants(arrays, rng.randrange(1 << 30), 1))
        return document, npz, None

    _artifact_campaign("artifacts", tmp_path, saved_parts, make).check(MUTANTS)


def test_vkgraph_field_mutants_end_in_one_line_or_a_program(saved_parts, tmp_path):
    """The delegate's fields (values, tensors, ops, ids) as a crafted program can set them."""
    def make(rng, document, arrays):
        delegates = [i for i, d in enumerate(document["program"]["methods"]["forward"]["delegates"])
                     if d.get("graph")]
        within = ("program", "methods", "forward", "delegates", rng.choice(delegates), "graph")
        return json_mutant(document, rng, within=within), arrays, None

    campaign = _artifact_campaign("vkgraph", tmp_path, saved_parts, make)
    campaign.check(MUTANTS)


def _inputs_campaign(kind: str, data: bytes, suffix: str, tmp_path: Path, method) -> "Campaign":
    campaign = Campaign(kind, tmp_path)
    path = tmp_path / f"mutant{suffix}"
    for index, mutant in byte_mutants(data, SEED, MUTANTS):
        path.write_bytes(mutant)
        try:
            campaign.runnable.append(program_inputs.load(path, method))
        except program_inputs.InputError as exc:
            campaign.refuse(index, exc)
        except Exception as exc:  # anything else is the hole this test looks for
            campaign.crash(index, exc, mutant)
    return campaign


def test_npz_and_pt_input_mutants_end_in_one_line_or_inputs(saved_parts, tmp_path):
    import torch

    model = saved_parts[4]
    inputs = model.steps[0]
    buffer = io.BytesIO()
    np.savez(buffer, *inputs)
    _inputs_campaign("npz", buffer.getvalue(), ".npz", tmp_path, model.plan).check(MUTANTS)
    buffer = io.BytesIO()
    torch.save(tuple(torch.from_numpy(np.asarray(x)) for x in inputs), buffer)
    _inputs_campaign("pt", buffer.getvalue(), ".pt", tmp_path, model.plan).check(MUTANTS)


def _runnable_documents(saved_parts, folder: Path) -> list:
    """``(mutant index, case)`` of the first ``ON_DEVICE`` delegate-field mutants that load."""
    ident, document, arrays, pte, _ = saved_parts
    found = []
    for index in range(MUTANTS):
        if len(found) >= ON_DEVICE:
            break
        rng = random.Random(f"{SEED}:device:{index}")
        _write_folder(folder, ident, json_mutant(document, rng, within=("program", "methods", "forward",
                                                                        "delegates")), arrays, pte)
        try:
            found += [(f"document {index}", c) for c in artifacts.load(folder)]
        except artifacts.ArtifactError:
            continue
    return found


def _runnable_ptes(data: bytes, path: Path) -> list:
    found = []
    for index, mutant in byte_mutants(data, SEED, MUTANTS):
        if len(found) >= ON_DEVICE:
            break
        path.write_bytes(mutant)
        try:
            found += [(f"pte {index}", c) for c in pte_cases(path, CheckOptions(int_range=(0, 4)), COMMAND)]
        except SubjectError:
            continue
    return found


@requires_vulkan
@requires_tree
def test_runnable_mutants_end_in_a_verdict_on_the_device(saved_parts, two_partitions, tmp_path, et_ctx, et_tree):
    """A sample of the mutants that load runs node by node on the device: each ends in a verdict, never ``ERROR``
    (a harness bug) nor an exception; a program ET-VK itself would refuse is ``FAIL_CHECK``."""
    from vkdiff.harness.device_models import run_prepared

    cases = _runnable_ptes(two_partitions[0].read_bytes(), tmp_path / "mutant.pte")
    cases += _runnable_documents(saved_parts, tmp_path / "artifacts")
    outcomes = []
    for which, case in cases:
        result = run_prepared(et_ctx, model=case.model, ident=case.ident, tree=et_tree)
        outcomes.append((which, result.status, result.reason.splitlines()[0][:200] if result.reason else ""))
    print(f"fuzz device: seed {SEED}: {len(cases)} runnable mutants: "
          f"{sorted(collections.Counter(s for _, s, _ in outcomes).items())}")
    assert len(outcomes) == 2 * ON_DEVICE
    assert not [o for o in outcomes if o[1] == "ERROR"], [o for o in outcomes if o[1] == "ERROR"]
