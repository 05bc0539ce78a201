"""A parser and wgpu executor for the subset of AmberScript that ``vkdiff.repro.amber`` writes.

Grammar followed (google/amber ``docs/amber_script.md``): ``#!amber`` first;
``SHADER compute NAME SPIRV-HEX`` bytes ``END`` (``END`` right after the last byte, as Amber's
hex decoder needs; validated with spirv-val); ``BUFFER NAME DATA_TYPE TYPE DATA`` values ``END``;
``IMAGE NAME FORMAT F DIM_3D WIDTH W HEIGHT H DEPTH D DATA`` (or ``DIM_2D``) values ``END``;
``PIPELINE compute NAME`` with ``ATTACH``, ``BIND BUFFER NAME AS
storage|uniform|sampled_image|storage_image DESCRIPTOR_SET 0 BINDING N`` and ``BIND BUFFER NAME
AS push_constant``, ``END``; ``RUN NAME X Y Z``; ``EXPECT NAME IDX BYTES [TOLERANCE T] EQ
VALUE...``. Float values are literals with a ``.`` or ``nan`` (as Amber's tokenizer needs);
hex words are bit patterns of integer data only. Anything else is a parse error naming the line.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

TYPES = {"float": np.float32, "float16": np.float16, "int32": np.int32, "uint32": np.uint32, "int8": np.int8,
         "uint8": np.uint8, "int16": np.int16}
FORMATS = {"R32G32B32A32_SFLOAT": ("rgba32float", np.float32), "R16G16B16A16_SFLOAT": ("rgba16float", np.float16),
           "R32G32B32A32_SINT": ("rgba32sint", np.int32), "R32G32B32A32_UINT": ("rgba32uint", np.uint32),
           "R8G8B8A8_SINT": ("rgba8sint", np.int8), "R8G8B8A8_UINT": ("rgba8uint", np.uint8)}


class AmberParseError(ValueError):
    pass


@dataclasses.dataclass
class Script:
    shaders: dict[str, bytes] = dataclasses.field(default_factory=dict)
    buffers: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    images: dict[str, tuple[str, str, tuple[int, int, int]]] = dataclasses.field(default_factory=dict)
    """Name → (wgpu format, dimension, extent); their data is in ``buffers``."""
    pipelines: dict[str, dict] = dataclasses.field(default_factory=dict)
    commands: list[tuple] = dataclasses.field(default_factory=list)


def _decode_hex(lines: list[str], first: int) -> bytes:
    """The module of a ``SPIRV-HEX`` block, validated with spirv-val."""
    text = " ".join(lines)
    if not text.endswith("END") or not text[:-3] or text[-4] in " \t":
        raise AmberParseError(f"line {first}: SPIRV-HEX must end with END right after the last byte (Amber's hex "
                              f"decoder loops on trailing whitespace)")
    spv = bytes(int(t, 16) for t in text[:-3].split())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "s.spv")
        path.write_bytes(spv)
        subprocess.run([shutil.which("spirv-val"), "--target-env", "vulkan1.1", str(path)], check=True,
                       capture_output=True)
    return spv


def _value(token: str, dtype) -> int | float:
    kind = np.dtype(dtype).kind
    if token.startswith("0x"):
        if kind == "f":
            raise AmberParseError(f"{token}: Amber reads hex in float data as a number, not a bit pattern")
        return np.array([int(token, 16)], np.uint64).astype(f"u{np.dtype(dtype).itemsize}").view(dtype)[0]
    if kind == "f":
        if token != "nan" and "." not in token:
            raise AmberParseError(f"{token}: Amber's tokenizer reads a float only with a '.'")
        return dtype(float(token))
    return dtype(int(token))


def _data(lines: list[str], dtype) -> np.ndarray:
    return np.array([_value(t, dtype) for ln in lines for t in ln.split()], dtype)


def parse(text: str) -> Script:
    lines = [ln.split("#", 1)[0].strip() if not ln.startswith("#!") else ln.strip() for ln in text.splitlines()]
    if not lines or lines[0] != "#!amber":
        raise AmberParseError("line 1: expected #!amber")
    script, i = Script(), 1
    while i < len(lines):
        words, i = lines[i].split(), i + 1
        if not words:
            continue
        if words[:2] == ["SHADER", "compute"] and words[3:] == ["SPIRV-HEX"]:
            end = next(j for j in range(i, len(lines)) if lines[j].endswith("END"))
            script.shaders[words[2]] = _decode_hex(lines[i:end + 1], i + 1)
            i = end + 1
        elif words[0] == "BUFFER" and words[2] == "DATA_TYPE" and words[4:] == ["DATA"]:
            end = lines.index("END", i)
            script.buffers[words[1]] = _data(lines[i:end], TYPES[words[3]])
            i = end + 1
        elif words[0] == "IMAGE" and words[2] == "FORMAT" and words[-1] == "DATA":
            end = lines.index("END", i)
            script.images[words[1]], dtype = _image(words, i)
            script.buffers[words[1]] = _data(lines[i:end], dtype)
            i = end + 1
        elif words[:2] == ["PIPELINE", "compute"]:
            end = lines.index("END", i)
            script.pipelines[words[2]] = _pipeline(lines[i:end], i)
            i = end + 1
        elif words[0] == "RUN" and len(words) == 5:
            script.commands.append(("RUN", words[1], tuple(int(w) for w in words[2:])))
        elif words[0] == "EXPECT" and words[2] == "IDX":
            tol = float(words[5]) if words[4] == "TOLERANCE" else None
            rest = words[6:] if tol is not None else words[4:]
            if rest[0] != "EQ" or len(rest) < 2:
                raise AmberParseError(f"line {i}: expected EQ VALUE...")
            script.commands.append(("EXPECT", words[1], int(words[3]), tol, rest[1:]))
        else:
            raise AmberParseError(f"line {i}: unknown command {lines[i - 1]!r}")
    return script


def _image(words: list[str], line: int) -> tuple[tuple[str, str, tuple[int, int, int]], type]:
    three = words[4] == "DIM_3D"
    if words[4] not in ("DIM_3D", "DIM_2D") or words[3] not in FORMATS:
        raise AmberParseError(f"line {line}: expected IMAGE NAME FORMAT F DIM_3D|DIM_2D WIDTH W HEIGHT H [DEPTH D] DATA")
    fields = dict(zip(words[5:-1:2], words[6:-1:2]))
    extent = (int(fields["WIDTH"]), int(fields["HEIGHT"]), int(fields["DEPTH"]) if three else 1)
    fmt, dtype = FORMATS[words[3]]
    return (fmt, "3d" if three else "2d", extent), dtype


def _pipeline(lines: list[str], first: int) -> dict:
    pipeline = {"shader": None, "binds": [], "push": None}
    for offset, line in enumerate(lines):
        words = line.split()
        if not words:
            continue
        if words[0] == "ATTACH" and len(words) == 2:
            pipeline["shader"] = words[1]
        elif words[:2] == ["BIND", "BUFFER"] and words[3:] == ["AS", "push_constant"]:
            pipeline["push"] = words[2]
        elif words[:2] == ["BIND", "BUFFER"] and words[3] == "AS" and words[5:8:2] == ["DESCRIPTOR_SET", "BINDING"]:
            pipeline["binds"].append((words[2], words[4], int(words[8])))
        else:
            raise AmberParseError(f"line {first + offset + 1}: unknown pipeline command {line!r}")
    return pipeline


def _create(script: Script, device, name: str):
    import wgpu

    data = script.buffers[name]
    if name not in script.images:
        return device.create_buffer_with_data(data=data.tobytes(), usage=wgpu.BufferUsage.STORAGE
                                              | wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_SRC)
    fmt, dimension, (width, height, depth) = script.images[name]
    texture = device.create_texture(size=(width, height, depth), dimension=dimension, format=fmt,
                                    usage=wgpu.TextureUsage.STORAGE_BINDING | wgpu.TextureUsage.TEXTURE_BINDING
                                    | wgpu.TextureUsage.COPY_DST | wgpu.TextureUsage.COPY_SRC)
    row = width * 4 * data.dtype.itemsize
    device.queue.write_texture({"texture": texture}, data.tobytes(), {"bytes_per_row": row, "rows_per_image": height},
                               (width, height, depth))
    return texture


def _contents(script: Script, device, handles: dict, name: str) -> np.ndarray:
    dtype = script.buffers[name].dtype
    if name not in script.images:
        return np.frombuffer(device.queue.read_buffer(handles[name]), dtype)
    _, _, (width, height, depth) = script.images[name]
    raw = device.queue.read_texture({"texture": handles[name]}, {"bytes_per_row": width * 4 * dtype.itemsize,
                                                                 "rows_per_image": height}, (width, height, depth))
    return np.frombuffer(raw, dtype)


def execute(script: Script, device) -> list[str]:
    """Run the script on a wgpu device; the failed EXPECTs, one line each (Amber's checks: an absolute
    ``TOLERANCE`` for every value, exact otherwise; NaN equals only NaN)."""
    handles = {name: _create(script, device, name) for name in script.buffers}
    failed = []
    for command in script.commands:
        if command[0] == "RUN":
            _run(script, device, handles, script.pipelines[command[1]], command[2])
            continue
        _, name, offset, tol, values = command
        dtype = script.buffers[name].dtype
        start = offset // dtype.itemsize
        got = _contents(script, device, handles, name)[start: start + len(values)]
        want = np.array([_value(v, dtype.type) for v in values], dtype)
        with np.errstate(invalid="ignore"):
            close = (got == want) if tol is None else (np.abs(got.astype(np.float64) - want) <= tol)
        ok = got.size == want.size and bool(np.all(close | (np.isnan(got) & np.isnan(want)) if dtype.kind == "f"
                                                   else close))
        if not ok:
            failed.append(f"EXPECT {name} IDX {offset}: got {got.tolist()}, want {want.tolist()} (tolerance {tol})")
    return failed


def _entry(script: Script, name: str, kind: str, binding: int) -> dict:
    import wgpu

    entry = {"binding": binding, "visibility": wgpu.ShaderStage.COMPUTE}
    if kind in ("storage", "uniform"):
        return {**entry, "buffer": {"type": kind}}
    fmt, dimension, _ = script.images[name]
    if kind == "storage_image":
        return {**entry, "storage_texture": {"access": "write-only", "format": fmt, "view_dimension": dimension}}
    sample = {"f": "unfilterable-float", "i": "sint", "u": "uint"}[script.buffers[name].dtype.kind]
    return {**entry, "texture": {"sample_type": sample, "view_dimension": dimension}}


def _run(script: Script, device, handles: dict, pipeline: dict, groups: tuple) -> None:
    layout = device.create_bind_group_layout(entries=[_entry(script, name, kind, b)
                                                      for name, kind, b in pipeline["binds"]])
    push = script.buffers[pipeline["push"]].tobytes() if pipeline["push"] else b""
    playout = device.create_pipeline_layout(bind_group_layouts=[layout], immediate_size=len(push))
    module = device.create_shader_module(code=script.shaders[pipeline["shader"]])
    compute_pipeline = device.create_compute_pipeline(layout=playout, compute={"module": module,
                                                                                "entry_point": "main"})
    group = device.create_bind_group(layout=layout, entries=[
        {"binding": b, "resource": handles[name].create_view() if name in script.images
         else {"buffer": handles[name], "offset": 0, "size": handles[name].size}}
        for name, _, b in pipeline["binds"]])
    encoder = device.create_command_encoder()
    compute = encoder.begin_compute_pass()
    compute.set_pipeline(compute_pipeline)
    compute.set_bind_group(0, group)
    if push:
        compute.set_immediates(0, push, 0, len(push))
    compute.dispatch_workgroups(*groups)
    compute.end()
    device.queue.submit([encoder.finish()])
