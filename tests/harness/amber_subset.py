"""A parser and wgpu executor for the subset of AmberScript that ``vkdiff.harness.amber`` writes.

Grammar followed (google/amber ``docs/amber_script.md``): ``#!amber`` first;
``SHADER compute NAME SPIRV-ASM`` ... ``END`` (assembled with spirv-as, validated with
spirv-val); ``BUFFER NAME DATA_TYPE TYPE DATA`` values ``END``; ``PIPELINE compute NAME`` with
``ATTACH``, ``BIND BUFFER NAME AS storage|uniform DESCRIPTOR_SET 0 BINDING N`` and
``BIND BUFFER NAME AS push_constant``, ``END``; ``RUN NAME X Y Z``; ``EXPECT NAME IDX BYTES
[TOLERANCE T] EQ VALUE``. Anything else is a parse error naming the line.
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


class AmberParseError(ValueError):
    pass


@dataclasses.dataclass
class Script:
    shaders: dict[str, bytes] = dataclasses.field(default_factory=dict)
    buffers: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    pipelines: dict[str, dict] = dataclasses.field(default_factory=dict)
    commands: list[tuple] = dataclasses.field(default_factory=list)


def _assemble(text: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp, "s.spvasm"), Path(tmp, "s.spv")
        src.write_text(text)
        subprocess.run([shutil.which("spirv-as"), "--target-env", "vulkan1.1", str(src), "-o", str(out)],
                       check=True, capture_output=True)
        subprocess.run([shutil.which("spirv-val"), "--target-env", "vulkan1.1", str(out)], check=True,
                       capture_output=True)
        return out.read_bytes()


def _value(token: str, dtype) -> int | float:
    if token.startswith("0x"):
        return np.array([int(token, 16)], np.uint64).astype(f"u{np.dtype(dtype).itemsize}").view(dtype)[0]
    return dtype(float(token)) if np.dtype(dtype).kind == "f" else dtype(int(token))


def parse(text: str) -> Script:
    lines = [ln.split("#", 1)[0].strip() if not ln.startswith("#!") else ln.strip() for ln in text.splitlines()]
    if not lines or lines[0] != "#!amber":
        raise AmberParseError("line 1: expected #!amber")
    script, i = Script(), 1
    while i < len(lines):
        words, i = lines[i].split(), i + 1
        if not words:
            continue
        if words[:2] == ["SHADER", "compute"] and words[3:] == ["SPIRV-ASM"]:
            end = lines.index("END", i)
            script.shaders[words[2]] = _assemble("\n".join(lines[i:end]))
            i = end + 1
        elif words[0] == "BUFFER" and words[2] == "DATA_TYPE" and words[4:] == ["DATA"]:
            end = lines.index("END", i)
            dtype = TYPES[words[3]]
            script.buffers[words[1]] = np.array([_value(t, dtype) for ln in lines[i:end] for t in ln.split()], dtype)
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
            if rest[0] != "EQ" or len(rest) != 2:
                raise AmberParseError(f"line {i}: expected EQ VALUE")
            script.commands.append(("EXPECT", words[1], int(words[3]), tol, rest[1]))
        else:
            raise AmberParseError(f"line {i}: unknown command {lines[i - 1]!r}")
    return script


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


def execute(script: Script, device) -> list[str]:
    """Run the script on a wgpu device; the failed EXPECTs, one line each."""
    import wgpu

    handles = {name: device.create_buffer_with_data(data=data.tobytes(), usage=wgpu.BufferUsage.STORAGE
                                                    | wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_SRC)
               for name, data in script.buffers.items()}
    failed = []
    for command in script.commands:
        if command[0] == "RUN":
            _run(script, device, handles, script.pipelines[command[1]], command[2])
            continue
        _, name, offset, tol, value = command
        dtype = script.buffers[name].dtype
        got = np.frombuffer(device.queue.read_buffer(handles[name]), dtype)[offset // dtype.itemsize]
        want = _value(value, dtype.type)
        ok = got == want if tol is None else abs(float(got) - float(want)) <= tol
        if not ok:
            failed.append(f"EXPECT {name} IDX {offset}: got {got}, want {want} (tolerance {tol})")
    return failed


def _run(script: Script, device, handles: dict, pipeline: dict, groups: tuple) -> None:
    import wgpu

    entries = [{"binding": b, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": kind}}
               for _, kind, b in pipeline["binds"]]
    layout = device.create_bind_group_layout(entries=entries)
    push = script.buffers[pipeline["push"]].tobytes() if pipeline["push"] else b""
    playout = device.create_pipeline_layout(bind_group_layouts=[layout], immediate_size=len(push))
    module = device.create_shader_module(code=script.shaders[pipeline["shader"]])
    compute_pipeline = device.create_compute_pipeline(layout=playout, compute={"module": module,
                                                                                "entry_point": "main"})
    group = device.create_bind_group(layout=layout, entries=[
        {"binding": b, "resource": {"buffer": handles[name], "offset": 0, "size": handles[name].size}}
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
