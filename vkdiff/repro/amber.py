"""Export a repro folder (``vkdiff.repro.kernel``) as an Amber script, for phones where Python does not run.

One ``SHADER compute ... SPIRV-HEX`` per module (the bytes of the SPIR-V exactly as vkdiff
loaded it: Amber decodes them as they are, with no assembler, whatever SPIR-V version and
target environment); one ``BUFFER`` per buffer and one ``IMAGE`` (``DIM_3D`` or ``DIM_2D``)
per texture holding its contents as of its first use (inputs, constants, params and vkdiff's
poison; float data as float literals, the poison as ``nan``, other data as hex words); one
``PIPELINE`` and ``RUN`` per dispatch in order (textures bound ``AS sampled_image`` or
``AS storage_image``, push constants as ``push_constant`` buffers); and ``EXPECT ... IDX <byte
offset> TOLERANCE <bound> EQ`` per output element with the element-wise bound of vkdiff's
tolerance policy (integers: exact ``EQ``). Amber addresses an image a whole texel at a time
with one tolerance per ``EXPECT``, so a texture output gets one ``EXPECT`` per texel: its
logical elements (padding left out) held to the largest of their bounds. An element the
kernel never writes keeps the poison and fails its ``EXPECT``.

Facts about Amber (google/amber at fc02f9bad7, read and run on lavapipe) the format follows:
hex words are bit patterns only for integer types (a float ``DATA`` value must be a literal
with a ``.``, ``nan`` allowed, infinities not); ``IDX`` is a byte offset; Amber initialises
each resource once from the script, so a trace whose host writes a resource after a dispatch
used it is refused with the reason (``run_repro.py`` replays those).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

AMBER_TYPES = {"float32": "float", "float16": "float16", "int32": "int32", "uint32": "uint32", "int8": "int8",
               "uint8": "uint8", "int16": "int16"}
IMAGE_FORMATS = {"rgba32float": ("R32G32B32A32_SFLOAT", np.float32), "rgba16float": ("R16G16B16A16_SFLOAT", np.float16),
                 "rgba32sint": ("R32G32B32A32_SINT", np.int32), "rgba32uint": ("R32G32B32A32_UINT", np.uint32),
                 "rgba8sint": ("R8G8B8A8_SINT", np.int8), "rgba8uint": ("R8G8B8A8_UINT", np.uint8)}
"""wgpu texel format → Amber image format and its component dtype."""


class AmberExportError(ValueError):
    """The trace cannot be written as an Amber script (the message says what it uses that Amber cannot)."""


def _nbytes(resource: dict) -> int:
    if resource["kind"] == "buffer":
        return resource["size"]
    width, height, depth = resource["size"]
    return width * height * depth * 4 * np.dtype(IMAGE_FORMATS[resource["format"]][1]).itemsize


def _initial_contents(manifest: dict, folder: Path) -> dict[int, bytearray]:
    """Each resource's bytes before its first use; refuses host writes to a resource after a dispatch bound it."""
    resources = manifest["resources"]
    unknown = {r["format"] for r in resources if r["kind"] == "texture" and r["format"] not in IMAGE_FORMATS}
    if unknown:
        raise AmberExportError(f"texture formats {sorted(unknown)} have no Amber image format here")
    contents = {i: bytearray(_nbytes(r)) for i, r in enumerate(resources)}
    used: set[int] = set()
    for op in manifest["ops"]:
        if op["op"] == "dispatch":
            used.update(res for _, res in op["bindings"])
        elif op["op"] in ("write_buffer", "write_texture"):
            if op["res"] in used:
                raise AmberExportError(f"r{op['res']} is written by the host after a dispatch used it; Amber "
                                       f"initialises resources once (replay with run_repro.py)")
            if op["op"] == "write_texture" and op["size"] != resources[op["res"]]["size"]:
                raise AmberExportError(f"r{op['res']}: a write of part of a texture ({op['size']})")
            data = (folder / op["data"]).read_bytes()
            offset = op.get("offset", 0)
            contents[op["res"]][offset: offset + len(data)] = data
    return contents


def _float(value: float) -> str:
    """A float literal Amber's tokenizer reads as one (it needs a ``.``; ``nan`` is allowed, infinities are not)."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        raise AmberExportError("an infinity in the data: Amber scripts cannot state one")
    text = repr(float(value))
    mantissa, _, exponent = text.partition("e")
    return (mantissa if "." in mantissa else mantissa + ".0") + (f"e{exponent}" if exponent else "")


def _values(data: bytes, dtype, per_line: int = 8) -> str:
    """``data`` as Amber ``DATA`` values of ``dtype``: float literals, or hex words for integer data."""
    if np.dtype(dtype).kind != "f":
        words = np.frombuffer(bytes(data) + b"\0" * (-len(data) % 4), "<u4")
        items = [f"0x{w:08x}" for w in words] if np.dtype(dtype).itemsize == 4 else [
            str(int(v)) for v in np.frombuffer(bytes(data), dtype)]
    else:
        with np.errstate(invalid="ignore"):
            items = [_float(v) for v in np.frombuffer(bytes(data), dtype).astype(np.float64)]
    return "\n".join(" ".join(items[i: i + per_line]) for i in range(0, len(items), per_line))


def _spirv_hex(spv: bytes, per_line: int = 32) -> str:
    """The module's bytes, ``END`` glued to the last one: Amber's hex decoder (``ShaderCompiler::ParseHex``) never
    advances past trailing whitespace and allocates until it dies."""
    lines = [" ".join(f"{b:02x}" for b in spv[i: i + per_line]) for i in range(0, len(spv), per_line)]
    return "\n".join(lines) + "END"


def _has_infinity(data: bytes, typed: str | None) -> bool:
    if not typed or np.dtype(typed).kind != "f":
        return False
    usable = len(data) - len(data) % np.dtype(typed).itemsize
    return bool(np.isinf(np.frombuffer(bytes(data[:usable]), typed)).any())


def _declaration(res: int, resource: dict, data: bytes, typed: str | None) -> list[str]:
    if resource["kind"] == "buffer":
        if _has_infinity(data, typed):  # Amber cannot state an infinity: the same bytes as words
            typed = None
        kind = AMBER_TYPES[typed] if typed else "uint32"
        return [f"BUFFER r{res} DATA_TYPE {kind} DATA", _values(data, np.dtype(typed) if typed else np.uint32), "END"]
    amber_format, dtype = IMAGE_FORMATS[resource["format"]]
    width, height, depth = resource["size"]
    dims = f"DIM_3D WIDTH {width} HEIGHT {height} DEPTH {depth}" if resource["dimension"] == "3d" else (
        f"DIM_2D WIDTH {width} HEIGHT {height}")
    return [f"IMAGE r{res} FORMAT {amber_format} {dims} DATA", _values(data, dtype), "END"]


def amber_script(folder: Path) -> str:
    """The Amber script of a repro folder.

    Raises:
        AmberExportError: the trace rewrites a resource after using it, or uses what Amber cannot state.
    """
    manifest = json.loads((folder / "manifest.json").read_text())
    contents = _initial_contents(manifest, folder)
    reads = [op for op in manifest["ops"] if op["op"] == "read"]
    typed = {reads[out["read"]]["res"]: out["dtype"] for out in manifest["outputs"]}
    lines = ["#!amber", f"# vkdiff repro of {manifest['case']} (recorded on {manifest['device']}: "
                        f"{manifest['verdict']['status']})", ""]
    for key in dict.fromkeys(op["module"] for op in manifest["ops"] if op["op"] == "dispatch"):
        lines += [f"SHADER compute s_{key[:12]} SPIRV-HEX", _spirv_hex((folder / "spirv" / f"{key}.spv").read_bytes()),
                  ""]
    raw = manifest.get("transport") == "vulkan"
    if raw:
        lines += [RAW_SAMPLER, ""]
    for res, data in contents.items():
        lines += _declaration(res, manifest["resources"][res], data, typed.get(res))
    for index, op in enumerate(o for o in manifest["ops"] if o["op"] == "dispatch"):
        lines += _pipeline(index, op, folder, raw)
    expected = np.load(folder / "expected.npz", allow_pickle=False)
    for out in manifest["outputs"]:
        res = reads[out["read"]]["res"]
        resource = manifest["resources"][res]
        lines += (_expects(res, out, expected) if resource["kind"] == "buffer"
                  else _texel_expects(res, out, expected, IMAGE_FORMATS[resource["format"]][1]))
    return "\n".join(lines) + "\n"


RAW_SAMPLER = ("SAMPLER etvk_sampler MAG_FILTER nearest MIN_FILTER nearest ADDRESS_MODE_U repeat ADDRESS_MODE_V repeat "
               "ADDRESS_MODE_W repeat")
"""ET-VK's image sampler (``vTensorStorage``: nearest, repeat), for the combined image samplers of a raw trace."""


def _binding_kind(entry: dict, raw: bool = False) -> str:
    if "buffer" in entry:
        return entry["buffer"]["type"]
    if "storage_texture" in entry:
        return "storage_image"
    return "combined_image_sampler SAMPLER etvk_sampler" if raw else "sampled_image"


def _specialize(op: dict, folder: Path) -> str:
    """A raw trace's workgroup size (ids 0–2) and spec constants, each as its module declares it (32-bit)."""
    from vkdiff.device.shaders.spirv import spec_constant_types

    declared = spec_constant_types((folder / "spirv" / f"{op['module']}.spv").read_bytes())
    values = {**dict(zip((0, 1, 2), op["local_size"])), **{int(k): v for k, v in op["spec"].items()}}
    parts = []
    for sid, value in sorted(values.items()):
        if sid not in declared:  # ET-VK passes every id; glslc keeps only those the shader reads
            continue
        kind, bits = declared[sid]
        if bits != 32:
            raise AmberExportError(f"{op['shader']}: spec constant {sid} is {bits}-bit; Amber specialises 32-bit only")
        amber = {"float": "float", "int": "int32"}.get(kind, "uint32")
        parts.append(f"SPECIALIZE {sid} AS {amber} {_float(float(value)) if amber == 'float' else int(value)}")
    return (" " + " ".join(parts)) if parts else ""


def _pipeline(index: int, op: dict, folder: Path, raw: bool = False) -> list[str]:
    lines = []
    if op["immediate_size"]:
        lines += [f"BUFFER pc{index} DATA_TYPE uint32 DATA", _values((folder / op["immediates"]).read_bytes(),
                                                                     np.uint32), "END"]
    bound = [res for _, res in op["bindings"]]
    if len(set(bound)) != len(bound):
        raise AmberExportError(f"{op['shader']} binds one resource twice; Amber creates each once per pipeline")
    attach = f"  ATTACH s_{op['module'][:12]}" + (_specialize(op, folder) if raw else "")
    lines += [f"# {op['shader']}", f"PIPELINE compute p{index}", attach]
    kinds = {entry["binding"]: _binding_kind(entry, raw) for entry in op["layout"]}
    for binding, res in op["bindings"]:
        lines.append(f"  BIND BUFFER r{res} AS {kinds[binding]} DESCRIPTOR_SET 0 BINDING {binding}")
    if op["immediate_size"]:
        lines.append(f"  BIND BUFFER pc{index} AS push_constant")
    return lines + ["END", f"RUN p{index} {' '.join(str(g) for g in op['groups'])}", ""]


def _literal(value: float, dtype: np.dtype) -> str:
    return str(int(value)) if dtype.kind in "iu" else _float(value)


def _expects(res: int, out: dict, expected) -> list[str]:
    dtype = np.dtype(out["dtype"])
    values = expected[f"{out['name']}.expected"].reshape(-1)
    bounds = expected[f"{out['name']}.bound"].reshape(-1)
    offsets = expected[f"{out['name']}.gather"].reshape(-1) * dtype.itemsize
    if dtype.kind in "iu":
        return [f"EXPECT r{res} IDX {o} EQ {_literal(v, dtype)}" for o, v in zip(offsets, values)]
    return [f"EXPECT r{res} IDX {o} TOLERANCE {_float(b)} EQ {_float(v)}" if not math.isinf(v) else
            f"# r{res} IDX {o}: {v} expected, which Amber cannot state (run_repro.py checks it)"
            for o, v, b in zip(offsets, values, np.broadcast_to(bounds, values.shape))]


def _texel_expects(res: int, out: dict, expected, component) -> list[str]:
    """One ``EXPECT`` per texel holding output elements: its components 0..k-1, the largest bound of the k."""
    dtype = np.dtype(component)
    values = expected[f"{out['name']}.expected"].reshape(-1)
    bounds = np.broadcast_to(expected[f"{out['name']}.bound"], expected[f"{out['name']}.expected"].shape).reshape(-1)
    gather = expected[f"{out['name']}.gather"].reshape(-1)
    order = np.argsort(gather, kind="stable")
    texels = gather[order] // 4
    starts = np.flatnonzero(np.r_[True, texels[1:] != texels[:-1]])
    lines = []
    for start, end in zip(starts, [*starts[1:], len(order)]):
        held, texel = order[start:end], int(texels[start])
        if (gather[held] % 4).tolist() != list(range(len(held))):
            raise AmberExportError(f"{out['name']}: texel {texel} holds output elements in components "
                                   f"{(gather[held] % 4).tolist()}; Amber compares leading components only")
        wanted = " ".join(_literal(v, dtype) for v in values[held])
        tolerance = "" if dtype.kind in "iu" else f" TOLERANCE {_float(float(bounds[held].max()))}"
        lines.append(f"EXPECT r{res} IDX {texel * 4 * dtype.itemsize}{tolerance} EQ {wanted}")
    return lines


def write_amber(folder: Path) -> Path:
    path = folder / "case.amber"
    path.write_text(amber_script(folder))
    return path
