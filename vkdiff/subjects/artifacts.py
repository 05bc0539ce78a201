"""Model cases prepared where the full stack runs, judged on GPU runners that have only numpy and wgpu.

``vkdiff run --save-artifacts DIR`` (torch, torchao, executorch installed) writes, for
every Vulkan-delegated model case it can prepare, data only:

* ``models/<h>.pte``: the lowered program, byte for byte (for ExecuTorch's own tools);
* ``models/<h>.json``: the decoded program (methods, instructions, delegates, node sources),
  the case's identity and greedy tokens;
* ``models/<h>.npz``: every constant, each call's inputs and eager PyTorch's outputs;
* ``cache/``: for ``vkdiff check --save-artifacts``, the shader cache entries every routing
  profile asked for (``vkdiff.harness.artifact_shaders``), so a runner needs no glslc;
* ``artifacts.json``: the manifest, with the sha256 of every file.

``vkdiff run --from-artifacts DIR`` judges those programs on a runner's adapters exactly
as ``run`` would (host rules stay with the machine that lowered them). Artifacts carry
inputs, never conclusions: a status, a tolerance or any field vkdiff does not write is
refused, and the tolerance comes from vkdiff's policy for the program (or the command
line). Nothing read from the folder is executed: only regular files inside it are read,
each checked against the manifest's sha256 (the ``.pte`` also against the program the
document describes), JSON with bounded size, ``.npz`` headers checked before any array
is read (``vkdiff.datamodel.npz``), every field typed and bounded; a crafted or malformed
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

from vkdiff.datamodel import PreparedProgram, ProgramFormatError, Tolerance, versions
from vkdiff.datamodel.budget import BudgetError, host_budget
from vkdiff.datamodel import cache_dir
from vkdiff.datamodel.cache import CacheCorruptError, check_entry, write_atomic
from vkdiff.datamodel.files import NotRegularError, read_regular
from vkdiff.datamodel.npz import NpzError, read_npz
from vkdiff.datamodel.text import one_line
from vkdiff.datamodel.wellformed import check_program
from vkdiff.subjects import inputs as program_inputs
from vkdiff.cases.program_case import ProgramCase

MANIFEST = "artifacts.json"
FORMAT = "vkdiff-artifacts/3"
ROLES = ("document", "arrays", "pte")
DOCUMENT_KEYS = frozenset({"case", "method", "program", "steps", "expected", "tokens"})
IDENT_FIELDS = {"case": str, "op": str, "variant": str, "rule": str, "knobs": dict, "seed": int, "repro": str}
"""What a result's identity may say (``device_models.identity``); a saved case's rule is always ``device``."""
SHADER_FILE = re.compile(r"cache/(index/[0-9a-f]{8,64}(-mediump)?/[A-Za-z0-9_]{1,200}\.json"
                         r"|(spv|baked|traits/spv)/[0-9a-f]{16,64}\.spv)")
"""The only names a saved shader entry may have (cache folder, file name, nothing else)."""
MAX_TEXT = 512
MAX_KNOBS = 64
JSON_SHARE = 16
"""A JSON file may be at most this share of the memory budget (parsed, it takes about ten times its size)."""


class ArtifactError(ValueError):
    """An artifacts folder cannot be used (named, with what to do)."""


def _stem(case_id: str) -> str:
    return "models/" + hashlib.sha256(case_id.encode()).hexdigest()[:20]


def _write(folder: Path, name: str, data: bytes) -> str:
    write_atomic(folder / name, data)
    return hashlib.sha256(data).hexdigest()


def save(case, folder: Path) -> str | None:
    """Prepare ``case`` (lowering is cached) and write its files; the document's name under ``folder``, or None
    when the case cannot be prepared (its own results say why; the artifacts carry no verdicts)."""
    from vkdiff.harness.device_models import identity, prepare_or_status
    from vkdiff.lowering.lower import lower

    model = prepare_or_status(case)
    if isinstance(model, tuple):
        return None
    return write(folder, identity(case), model, lower(case).pte)


def write(folder: Path, ident: dict[str, Any], model: PreparedProgram, pte: bytes) -> str:
    """Add one prepared program (its ``.pte``, document and arrays) to the artifacts in ``folder``."""
    stem = _stem(model.case_id)
    doc, arrays = model.to_document()
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    files = {"document": (f"{stem}.json", json.dumps(doc).encode()), "arrays": (f"{stem}.npz", buffer.getvalue()),
             "pte": (f"{stem}.pte", pte)}
    written = {role: (name, _write(folder, name, data)) for role, (name, data) in files.items()}
    entry = {"ident": ident, "files": written}
    manifest = _manifest(folder) if (folder / MANIFEST).exists() else {"format": FORMAT, "versions": versions(),
                                                                        "cases": {}}
    manifest["cases"][model.case_id] = entry
    write_atomic(folder / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True, default=str).encode())
    return f"{stem}.json"


def write_shaders(folder: Path, files: dict[str, str]) -> None:
    """Name the shader cache entries copied into ``folder`` (relative path → sha256) in its manifest."""
    manifest = _manifest(folder)
    manifest["shaders"] = {**manifest.get("shaders", {}), **files}
    write_atomic(folder / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True, default=str).encode())


def save_shaders(folder: Path, cases: list[ProgramCase], tree: Any, settings: Any) -> list[Any]:
    """Sweep ``cases`` under every routing profile of each transport and add the SPIR-V they asked for to the
    folder (``vkdiff.harness.artifact_shaders``); each transport's ``Sweep``."""
    from vkdiff.harness.artifact_shaders import export, sweep

    sweeps = sweep(cases, tree, settings)
    write_shaders(folder, export(folder, sweeps))
    return sweeps


def import_shaders(folder: Path, manifest: dict[str, Any]) -> int:
    """Copy the folder's shader cache entries into this machine's cache, each checked first (its name, its sha256 in
    the manifest, its own header and hash); how many were new."""
    copied = 0
    for rel, digest in sorted(manifest.get("shaders", {}).items()):
        what = f"--from-artifacts {folder}: {one_line(rel, 80)}"
        if not isinstance(rel, str) or not isinstance(digest, str) or not SHADER_FILE.fullmatch(rel):
            raise ArtifactError(f"{what}: not a shader cache entry's name; save the artifacts again")
        data = _regular(folder / rel, what)
        if hashlib.sha256(data).hexdigest() != digest:
            raise ArtifactError(f"{what} does not match its sha256 in {MANIFEST}; save the artifacts again")
        try:
            check_entry(data, folder / rel)
        except CacheCorruptError as exc:
            raise ArtifactError(f"{what}: {exc.why}; save the artifacts again") from None
        target = cache_dir() / rel.split("/", 1)[1]
        if not target.exists() or target.read_bytes() != data:
            write_atomic(target, data)
            copied += 1
    return copied


def _json(data: bytes, what: str) -> Any:
    """Parsed JSON; malformed or too deeply nested is one line."""
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{what} is not JSON ({one_line(exc, 120)})") from None
    except RecursionError:
        raise ArtifactError(f"{what}: JSON nested too deeply") from None


def _regular(path: Path, what: str, limit: int | None = None) -> bytes:
    try:
        return read_regular(path, what, budget=limit)
    except (NotRegularError, BudgetError) as exc:
        raise ArtifactError(f"{exc}; save the artifacts again") from None


def _manifest(folder: Path) -> dict[str, Any]:
    what = f"--from-artifacts {folder}: {MANIFEST}"
    if not (folder / MANIFEST).exists():
        raise ArtifactError(f"--from-artifacts {folder}: no {MANIFEST}; make one with 'vkdiff run --save-artifacts "
                            f"{folder}' where torch and executorch are installed")
    manifest = _json(_regular(folder / MANIFEST, what, host_budget() // JSON_SHARE), what)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or \
            not isinstance(manifest.get("cases"), dict):
        raise ArtifactError(f"{what} is not a {FORMAT} manifest; save the artifacts again with this vkdiff")
    if not isinstance(manifest.get("shaders", {}), dict):
        raise ArtifactError(f"{what}: shaders is not an object; save the artifacts again")
    extra = sorted(set(manifest) - {"format", "versions", "cases", "shaders"})
    if extra:
        raise ArtifactError(f"{what}: unknown field {one_line(extra[0], 60)!r}; save the artifacts again")
    return manifest


def _read(folder: Path, case_id: str, files: dict[str, Any], role: str) -> bytes:
    """A file of the case: a regular file inside the folder, equal to the manifest's hash."""
    what = f"--from-artifacts {folder}: {case_id}"
    entry = files.get(role)
    if not (isinstance(entry, list) and len(entry) == 2 and all(isinstance(x, str) for x in entry)):
        raise ArtifactError(f"{what}: the manifest names no {role} file; save the artifacts again")
    name, digest = entry
    try:
        path = (folder / name).resolve()
    except (OSError, ValueError):  # a NUL byte, a loop of links
        raise ArtifactError(f"{what}: {one_line(repr(name), 80)} is not a file name") from None
    if folder.resolve() not in path.parents:
        raise ArtifactError(f"{what}: {one_line(name, 80)} is outside the folder")
    data = _regular(path, f"{what}: {one_line(name, 80)}", host_budget() // (JSON_SHARE if role == "document" else 1))
    if hashlib.sha256(data).hexdigest() != digest:
        raise ArtifactError(f"{what}: {one_line(name, 80)} does not match its sha256 in {MANIFEST}; save the artifacts "
                            f"again")
    return data


def _ident(folder: Path, case_id: str, ident: Any) -> dict[str, Any]:
    """The identity a saved case's results carry: known fields of the right type, rule ``device``, no verdict."""
    what = f"--from-artifacts {folder}: {MANIFEST}: {case_id}: ident"
    if not isinstance(ident, dict):
        raise ArtifactError(f"{what}: expected an object")
    for key, value in ident.items():
        kind = IDENT_FIELDS.get(key)
        if kind is None:
            raise ArtifactError(f"{what}: unknown field {one_line(key, 40)!r}; artifacts carry inputs, never verdicts")
        if not isinstance(value, kind) or isinstance(value, bool) or (kind is str and len(value) > MAX_TEXT):
            raise ArtifactError(f"{what}.{key}: expected {kind.__name__}")
    if ident.get("case") != case_id or ident.get("rule") != "device":
        raise ArtifactError(f"{what}: names case {one_line(ident.get('case'), 80)!r}, rule "
                            f"{one_line(ident.get('rule'), 20)!r} (a saved case is itself, rule 'device')")
    knobs = ident.get("knobs", {})
    scalar = (str, int, float, bool, type(None))
    if len(knobs) > MAX_KNOBS or any(not isinstance(k, str) or not (isinstance(v, scalar) or (
            isinstance(v, list) and all(isinstance(x, scalar) for x in v))) for k, v in knobs.items()):
        raise ArtifactError(f"{what}.knobs: expected at most {MAX_KNOBS} names with plain values")
    return {**ident, "repro": ""}


def _load_case(folder: Path, case_id: str, entry: Any, tolerance: tuple[float | None, float | None]) -> ProgramCase:
    where = f"--from-artifacts {folder}: {MANIFEST}: {one_line(case_id, 120)}"
    if not isinstance(entry, dict) or set(entry) != {"ident", "files"} or not isinstance(entry["files"], dict):
        unknown = sorted(set(entry) - {"ident", "files"}) if isinstance(entry, dict) else []
        raise ArtifactError(f"{where}: carries {one_line(unknown[0], 40)!r}: artifacts carry inputs, never verdicts; "
                            f"save the artifacts again" if unknown else f"{where}: malformed manifest entry")
    ident = _ident(folder, case_id, entry["ident"])
    files = entry["files"]
    document, arrays, pte = (_read(folder, case_id, files, role) for role in ROLES)
    name = f"--from-artifacts {folder}: {one_line(files['document'][0], 80)}"
    doc = _json(document, name)
    if not isinstance(doc, dict):
        raise ArtifactError(f"{name}: expected an object")
    extra = sorted(set(doc) - DOCUMENT_KEYS)
    if extra:
        why = "tolerances come from vkdiff's policy or --atol/--rtol" if "tolerance" in extra else \
            "artifacts carry inputs, never conclusions"
        raise ArtifactError(f"{name}: carries {one_line(extra[0], 40)!r} ({why}); save the artifacts again")
    if doc.get("case") != case_id:
        raise ArtifactError(f"{name}: describes case {one_line(doc.get('case'), 80)!r}, the manifest {case_id!r}")
    try:
        loaded = read_npz(arrays, f"{folder}: {files['arrays'][0]}")
        model = PreparedProgram.from_document(doc, loaded, Tolerance())
        check_program(model.program)
        _check_calls(model)
    except (NpzError, BudgetError, ProgramFormatError, program_inputs.InputError) as exc:
        raise ArtifactError(f"{name}: {one_line(exc)}") from None
    if hashlib.sha256(pte).hexdigest() != model.program.sha256:
        raise ArtifactError(f"{name}: its .pte ({one_line(files['pte'][0], 80)}) is not the program the document "
                            f"describes (sha256 differs); save the artifacts again")
    model.tolerance = _policy(model, tolerance)
    return ProgramCase(id=case_id, ident=ident, model=model, source=str(folder))


def _check_calls(model: PreparedProgram) -> None:
    """Each saved call's inputs against the method's input specs; outputs and tokens as plain numbers."""
    for k, step in enumerate(model.steps):
        program_inputs.check(step, model.plan, f"saved call {k}")
    for k, out in enumerate(model.expected or []):
        if out.dtype.kind not in "biuf" or out.ndim != 1:
            raise ProgramFormatError(f"expected/{k}: eager's outputs are a flat array of numbers, got "
                                     f"{out.dtype}{list(out.shape)}")
    if model.tokens and len(model.tokens) != len(model.steps):
        raise ProgramFormatError(f"tokens: {len(model.tokens)} for {len(model.steps)} calls")


def _policy(model: PreparedProgram, given: tuple[float | None, float | None]) -> Tolerance:
    """vkdiff's tolerance for the program's delegates, with the user's ``--atol``/``--rtol`` in place."""
    base = Tolerance.for_graphs(d.graph for m in model.program.methods.values() for d in m.delegates
                                if d.graph is not None)
    atol, rtol = given
    return Tolerance(atol=base.atol if atol is None else atol, rtol=base.rtol if rtol is None else rtol)


def load(folder: Path, pattern: str | None = None, *, atol: float | None = None,
         rtol: float | None = None) -> list[ProgramCase]:
    """Every saved case whose id matches ``pattern``, verified; tolerances from the policy or ``atol``/``rtol``.

    Raises:
        ArtifactError: no manifest, or an entry is missing, fails its hash check, is malformed or carries a
            conclusion (a status, a tolerance).
    """
    manifest = _manifest(folder)
    cases = [_load_case(folder, case_id, entry, (atol, rtol)) for case_id, entry in sorted(manifest["cases"].items())
             if not pattern or re.search(pattern, case_id)]
    import_shaders(folder, manifest)
    return cases
