"""Model cases prepared where the full stack runs, judged on GPU runners that have only numpy and wgpu.

``vkdiff run --save-artifacts DIR`` (torch, torchao, executorch installed) writes, for
every Vulkan-delegated model case it runs, what its device verdict needs: the decoded
delegate with its constants, each call's seeded inputs, eager PyTorch's outputs and
tokens, the model tolerance, and the case's identity. ``vkdiff run --from-artifacts DIR``
on a runner without torch or executorch judges those delegates on its adapters
exactly as ``run`` would (host rules stay with the machine that lowered them); both
results files merge into one report (``vkdiff report A.jsonl B.jsonl``). Entries carry
their sha256 and are verified when read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
import re
from pathlib import Path
from typing import Any

from vkdiff.datamodel import CacheCorruptError, read_entry, versions, write_entry
from vkdiff.datamodel.cache import write_atomic

MANIFEST = "artifacts.json"


class ArtifactError(ValueError):
    """An artifacts folder cannot be used (named, with what to do)."""


@dataclasses.dataclass(kw_only=True)
class Artifact:
    """One model case as saved: its identity and what a device needs to judge it."""

    id: str
    ident: dict[str, Any]
    """``device_models.identity`` of the case."""
    model: Any
    """``ModelInputs``, or the (status, reason) the case ended with when it could not be prepared."""
    source: str = ""
    """The folder it came from (for repro commands)."""


def _file(case_id: str) -> str:
    return "models/" + hashlib.sha256(case_id.encode()).hexdigest()[:20] + ".pkl"


def save(case, folder: Path) -> str:
    """Prepare ``case`` (lowering is cached) and write its artifact; the file name under ``folder``."""
    from vkdiff.harness.device_models import identity, prepare_or_status

    name = _file(case.id)
    payload = pickle.dumps({"ident": identity(case), "model": prepare_or_status(case)})
    (folder / "models").mkdir(parents=True, exist_ok=True)
    write_entry(folder / name, payload)
    manifest = _manifest(folder) if (folder / MANIFEST).exists() else {"versions": versions(), "cases": {}}
    manifest["cases"][case.id] = name
    write_atomic(folder / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode())
    return name


def _manifest(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        raise ArtifactError(f"--from-artifacts {folder}: no {MANIFEST}; make one with 'vkdiff run --save-artifacts "
                            f"{folder}' where torch and executorch are installed") from None
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"--from-artifacts {folder}: {MANIFEST} is not JSON ({exc})") from None


def load(folder: Path, pattern: str | None = None) -> list[Artifact]:
    """Every saved case whose id matches ``pattern``, verified.

    Raises:
        ArtifactError: no manifest, or an entry is missing or fails its hash check.
    """
    manifest = _manifest(folder)
    found = []
    for case_id, name in sorted(manifest["cases"].items()):
        if pattern and not re.search(pattern, case_id):
            continue
        try:
            saved = pickle.loads(read_entry(folder / name))
        except (FileNotFoundError, CacheCorruptError) as exc:
            raise ArtifactError(f"--from-artifacts {folder}: {case_id}: {exc}; save the artifacts again") from None
        found.append(Artifact(id=case_id, ident=saved["ident"], model=saved["model"], source=str(folder)))
    return found
