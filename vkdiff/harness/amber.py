"""Export a repro folder (``vkdiff.harness.repro``) as an Amber script, for phones where Python does not run.

One ``SHADER compute ... SPIRV-ASM`` per module (``spirv-dis --raw-id`` of the SPIR-V
exactly as vkdiff loaded it), one ``BUFFER`` per buffer holding its contents as of its
first use (hex words: inputs, constants, params and vkdiff's poison), one ``PIPELINE``
and ``RUN`` per dispatch in order, push constants as ``push_constant`` buffers, and one
``EXPECT ... IDX <byte offset> TOLERANCE <bound> EQ <value>`` per output element with
the element-wise bound of vkdiff's tolerance policy (integers: exact ``EQ``). An element
the kernel never writes keeps the poison and fails its ``EXPECT``.

Amber initialises buffers before the first ``RUN``, so a trace whose host writes a
buffer after a dispatch used it, or that uses textures, is refused with the reason
(``run_repro.py`` replays those).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np

from vkdiff.device.spirv import spirv_opt

AMBER_TYPES = {"float32": "float", "float16": "float16", "int32": "int32", "uint32": "uint32", "int8": "int8",
               "uint8": "uint8", "int16": "int16"}


class AmberExportError(ValueError):
    """The trace cannot be written as an Amber script (the message says what it uses that Amber cannot)."""


def _initial_contents(manifest: dict, folder: Path) -> dict[int, bytearray]:
    """Each buffer's bytes before its first use; refuses writes to a buffer after a dispatch bound it."""
    contents = {i: bytearray(r["size"]) for i, r in enumerate(manifest["resources"]) if r["kind"] == "buffer"}
    used: set[int] = set()
    for op in manifest["ops"]:
        if op["op"] == "dispatch":
            used.update(res for _, res in op["bindings"])
        elif op["op"] == "write_buffer":
            if op["res"] in used:
                raise AmberExportError(f"buffer r{op['res']} is written by the host after a dispatch used it; "
                                       f"Amber initialises buffers once (replay with run_repro.py)")
            data = (folder / op["data"]).read_bytes()
            contents[op["res"]][op["offset"]: op["offset"] + len(data)] = data
    return contents


def _words(data: bytes, per_line: int = 8) -> str:
    words = np.frombuffer(bytes(data) + b"\0" * (-len(data) % 4), "<u4")
    return "\n".join(" ".join(f"0x{w:08x}" for w in words[i: i + per_line]) for i in range(0, len(words), per_line))


def _disassemble(spv: Path) -> str:
    dis = str(Path(spirv_opt()).with_name("spirv-dis"))
    return subprocess.run([dis, "--raw-id", "--no-header", str(spv)], check=True, capture_output=True,
                          text=True).stdout


def amber_script(folder: Path) -> str:
    """The Amber script of a repro folder.

    Raises:
        AmberExportError: the trace uses textures or rewrites a buffer after using it.
    """
    manifest = json.loads((folder / "manifest.json").read_text())
    textures = [i for i, r in enumerate(manifest["resources"]) if r["kind"] == "texture"]
    if textures:
        raise AmberExportError(f"{manifest['case']} uses {len(textures)} textures; the Amber export covers buffer "
                               f"traces (replay texture cases with run_repro.py)")
    contents = _initial_contents(manifest, folder)
    reads = [op for op in manifest["ops"] if op["op"] == "read"]
    typed = {reads[out["read"]]["res"]: out["dtype"] for out in manifest["outputs"]}
    lines = ["#!amber", f"# vkdiff repro of {manifest['case']} (recorded on {manifest['device']}: "
                        f"{manifest['verdict']['status']})", ""]
    for key in dict.fromkeys(op["module"] for op in manifest["ops"] if op["op"] == "dispatch"):
        lines += [f"SHADER compute s_{key[:12]} SPIRV-ASM", _disassemble(folder / "spirv" / f"{key}.spv").rstrip(),
                  "END", ""]
    for res, data in contents.items():
        kind = AMBER_TYPES[typed[res]] if res in typed else "uint32"
        lines += [f"BUFFER r{res} DATA_TYPE {kind} DATA", _words(data), "END"]
    for index, op in enumerate(o for o in manifest["ops"] if o["op"] == "dispatch"):
        lines += _pipeline(index, op, folder)
    expected = np.load(folder / "expected.npz")
    for out in manifest["outputs"]:
        lines += _expects(reads[out["read"]]["res"], out, expected)
    return "\n".join(lines) + "\n"


def _pipeline(index: int, op: dict, folder: Path) -> list[str]:
    lines = []
    if op["immediate_size"]:
        lines += [f"BUFFER pc{index} DATA_TYPE uint32 DATA", _words((folder / op["immediates"]).read_bytes()), "END"]
    lines += [f"PIPELINE compute p{index}  # {op['shader']}", f"  ATTACH s_{op['module'][:12]}"]
    kinds = {entry["binding"]: entry["buffer"]["type"] for entry in op["layout"]}
    for binding, res in op["bindings"]:
        lines.append(f"  BIND BUFFER r{res} AS {kinds[binding]} DESCRIPTOR_SET 0 BINDING {binding}")
    if op["immediate_size"]:
        lines.append(f"  BIND BUFFER pc{index} AS push_constant")
    return lines + ["END", f"RUN p{index} {' '.join(str(g) for g in op['groups'])}", ""]


def _expects(res: int, out: dict, expected) -> list[str]:
    dtype = np.dtype(out["dtype"])
    values = expected[f"{out['name']}.expected"].reshape(-1)
    bounds = expected[f"{out['name']}.bound"].reshape(-1)
    offsets = expected[f"{out['name']}.gather"].reshape(-1) * dtype.itemsize
    if dtype.kind in "iu":
        return [f"EXPECT r{res} IDX {o} EQ {int(v)}" for o, v in zip(offsets, values)]
    return [f"EXPECT r{res} IDX {o} TOLERANCE {b:.9g} EQ {v:.9g}" for o, v, b in zip(offsets, values, bounds)]


def write_amber(folder: Path) -> Path:
    path = folder / "case.amber"
    path.write_text(amber_script(folder))
    return path
