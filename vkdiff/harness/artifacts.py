"""Model cases prepared where the full stack runs, judged on GPU runners that have only numpy and wgpu.

``vkdiff run --save-artifacts DIR`` (torch, torchao, executorch installed) writes, for
every Vulkan-delegated model case it runs, data only:

* ``models/<h>.pte``: the lowered program, byte for byte (for ExecuTorch's own tools);
* ``models/<h>.json``: the decoded program (methods, instructions, delegates, node sources),
  the case's identity, tolerance and greedy tokens;
* ``models/<h>.npz``: every constant, each call's inputs and eager PyTorch's outputs;
* ``artifacts.json``: the manifest, with the sha256 of every file.

``vkdiff run --from-artifacts DIR`` judges those programs on a runner's adapters exactly
as ``run`` would (host rules stay with the machine that lowered them). Nothing read from
the folder is executed: JSON and ``.npz`` loaded with ``allow_pickle=False``, every file
checked against the manifest, every field checked as it is read; a crafted or malformed
folder ends in one line naming the file.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from vkdiff.datamodel import PreparedProgram, ProgramFormatError, Status, versions
from vkdiff.datamodel.cache import write_atomic
from vkdiff.harness.programs import ProgramCase

MANIFEST = "artifacts.json"
FORMAT = "vkdiff-artifacts/2"


class ArtifactError(ValueError):
    """An artifacts folder cannot be used (named, with what to do)."""


def _stem(case_id: str) -> str:
    return "models/" + hashlib.sha256(case_id.encode()).hexdigest()[:20]


def _write(folder: Path, name: str, data: bytes) -> str:
    write_atomic(folder / name, data)
    return hashlib.sha256(data).hexdigest()


def save(case, folder: Path) -> str:
    """Prepare ``case`` (lowering is cached) and write its files; the document's name under ``folder``."""
    from vkdiff.harness.device_models import identity, prepare_or_status

    stem, entry = _stem(case.id), {"ident": identity(case), "files": {}}
    model = prepare_or_status(case)
    if isinstance(model, tuple):
        entry["status"] = [model[0].name, model[1]]
    else:
        doc, arrays = model.to_document()
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        entry["files"] = {"document": (f"{stem}.json", _write(folder, f"{stem}.json", json.dumps(doc).encode())),
                          "arrays": (f"{stem}.npz", _write(folder, f"{stem}.npz", buffer.getvalue()))}
        from vkdiff.lowering.lower import lower

        pte = lower(case).pte
        entry["files"]["pte"] = (f"{stem}.pte", _write(folder, f"{stem}.pte", pte))
    manifest = _manifest(folder) if (folder / MANIFEST).exists() else {"format": FORMAT, "versions": versions(),
                                                                        "cases": {}}
    manifest["cases"][case.id] = entry
    write_atomic(folder / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True, default=str).encode())
    return f"{stem}.json"


def _manifest(folder: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        raise ArtifactError(f"--from-artifacts {folder}: no {MANIFEST}; make one with 'vkdiff run --save-artifacts "
                            f"{folder}' where torch and executorch are installed") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"--from-artifacts {folder}: {MANIFEST} is not JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or not isinstance(manifest.get("cases"), dict):
        raise ArtifactError(f"--from-artifacts {folder}: {MANIFEST} is not a {FORMAT} manifest; save the artifacts "
                            f"again with this vkdiff")
    return manifest


def _read(folder: Path, case_id: str, files: Any, role: str) -> bytes:
    """A file of the case, inside the folder and equal to the manifest's hash."""
    try:
        name, digest = files[role]
        path = (folder / str(name)).resolve()
    except (KeyError, TypeError, ValueError):
        raise ArtifactError(f"--from-artifacts {folder}: {case_id}: the manifest names no {role} file") from None
    if folder.resolve() not in path.parents:
        raise ArtifactError(f"--from-artifacts {folder}: {case_id}: {name} is outside the folder")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ArtifactError(f"--from-artifacts {folder}: {case_id}: {name}: {exc.strerror}; save the artifacts "
                            f"again") from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise ArtifactError(f"--from-artifacts {folder}: {case_id}: {name} does not match its sha256 in {MANIFEST}; "
                            f"save the artifacts again")
    return data


def _load_case(folder: Path, case_id: str, entry: Any) -> ProgramCase:
    if not isinstance(entry, dict) or not isinstance(entry.get("ident"), dict):
        raise ArtifactError(f"--from-artifacts {folder}: {case_id}: malformed manifest entry")
    if "status" in entry:
        try:
            status, reason = Status[entry["status"][0]], str(entry["status"][1])
        except (KeyError, IndexError, TypeError):
            raise ArtifactError(f"--from-artifacts {folder}: {case_id}: malformed status in {MANIFEST}") from None
        return ProgramCase(id=case_id, ident=entry["ident"], model=(status, reason), source=str(folder))
    files = entry.get("files")
    document = _read(folder, case_id, files, "document")
    arrays = _read(folder, case_id, files, "arrays")
    name = files["document"][0]
    try:
        doc = json.loads(document)
        with np.load(io.BytesIO(arrays), allow_pickle=False) as npz:
            loaded = {key: npz[key] for key in npz.files}
        model = PreparedProgram.from_document(doc, loaded)
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError, OSError) as exc:
        what = "an object array (pickles are refused)" if "allow_pickle" in str(exc) else str(exc)
        raise ArtifactError(f"--from-artifacts {folder}: {name}: {what}") from None
    except ProgramFormatError as exc:
        raise ArtifactError(f"--from-artifacts {folder}: {name}: {exc}") from None
    return ProgramCase(id=case_id, ident=entry["ident"], model=model, source=str(folder))


def load(folder: Path, pattern: str | None = None) -> list[ProgramCase]:
    """Every saved case whose id matches ``pattern``, verified.

    Raises:
        ArtifactError: no manifest, or an entry is missing, fails its hash check or is malformed.
    """
    manifest = _manifest(folder)
    return [_load_case(folder, case_id, entry) for case_id, entry in sorted(manifest["cases"].items())
            if not pattern or re.search(pattern, case_id)]
