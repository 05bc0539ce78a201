"""Replay a vkdiff repro folder on any Vulkan device: numpy and wgpu only (this file is copied into each folder).

Usage: ``python run_repro.py [FOLDER] [--adapter SUBSTRING]``. The folder's
``manifest.json`` lists the buffers and textures to create, every write, every dispatch
(SPIR-V in ``spirv/``, bind-group layout, bindings, push constants, workgroup counts) and
the reads whose contents are judged against ``expected.npz`` with the element-wise
bounds vkdiff's tolerance policy gave. Prints one JSON line with the verdict; exit 0 when
it equals the verdict recorded where the folder was made, 1 when it differs. The replay
judges by tolerance only: where the spec envelope refined the recorded verdict
(``FAIL_DRIVER``, a ``spec-allowed`` pass), it is compared with the recorded tolerance status.

A folder recorded through raw Vulkan (``"transport": "vulkan"``: glslc's SPIR-V as built, spec constants and
workgroup size given at pipeline creation, combined image samplers) replays through vkdiff's raw transport, so
it needs vkdiff and the ``vulkan`` package; without them, ``case.amber`` (``vkdiff repro --amber``) replays it
exactly.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

POISON_BITS = {1: 0x5A, 2: 0x7E5A, 4: 0x7FA5A5A5}
"""vkdiff's poison pattern per element size: an element still equal to it was never written."""
FEATURES = ("immediates", "shader-f16", "texture-adapter-specific-format-features", "shader-int64", "subgroup")


def open_device(substring: str | None, transport: str = "wgpu"):
    """(adapter, device) of the transport the folder was recorded through (its manifest says which)."""
    if transport not in OPENERS:
        sys.exit(f"run_repro: the manifest names transport {transport!r}; this script replays {', '.join(OPENERS)}")
    return OPENERS[transport](substring)


def open_wgpu_device(substring: str | None):
    """A wgpu device on the first Vulkan adapter (matching ``substring``): numpy and wgpu are all it needs."""
    import wgpu

    adapters = [a for a in wgpu.gpu.enumerate_adapters_sync() if a.info.get("backend_type") == "Vulkan"]
    if substring:
        adapters = [a for a in adapters if substring.lower() in json.dumps(dict(a.info)).lower()]
    if not adapters:
        sys.exit(f"run_repro: no Vulkan adapter{' matching ' + repr(substring) if substring else ''}")
    adapter = adapters[0]
    features = [f for f in FEATURES if f in adapter.features]
    return adapter, adapter.request_device_sync(required_features=features, required_limits=dict(adapter.limits))


def open_raw_device(substring: str | None):
    """vkdiff's raw Vulkan transport: the same wgpu-shaped calls, on the exact SPIR-V."""
    try:
        from vkdiff.device.transports.vk_device import adapters as raw_adapters
    except ImportError as exc:
        sys.exit(f"run_repro: this folder was recorded through raw Vulkan; replaying it needs vkdiff and the 'vulkan' "
                 f"package ({exc}), or Amber with case.amber (vkdiff repro --amber)")
    adapters = [a for a in raw_adapters() if not substring or substring.lower() in json.dumps(a.info).lower()]
    if not adapters:
        sys.exit(f"run_repro: no Vulkan device{' matching ' + repr(substring) if substring else ''}")
    adapter = adapters[0]
    return adapter, adapter.request_device_sync(required_limits=dict(adapter.limits))


OPENERS = {"wgpu": open_wgpu_device, "vulkan": open_raw_device}


def make_resources(device, manifest: dict) -> list:
    handles = []
    for res in manifest["resources"]:
        if res["kind"] == "buffer":
            handles.append(device.create_buffer(size=res["size"], usage=res["usage"]))
        else:
            handles.append(device.create_texture(size=res["size"], dimension=res["dimension"], format=res["format"],
                                                 usage=res["usage"]))
    return handles


def dispatch(device, op: dict, handles: list, folder: Path, pipelines: dict) -> None:
    key = (op["module"], json.dumps(op["layout"], sort_keys=True), op["immediate_size"],
           json.dumps(op.get("spec"), sort_keys=True), str(op.get("local_size")))
    if key not in pipelines and "local_size" in op:  # raw Vulkan: specialised at pipeline creation
        spec = {int(k): v for k, v in op["spec"].items()}
        made = device.create_pipeline((folder / "spirv" / f"{op['module']}.spv").read_bytes(), spec,
                                      tuple(op["local_size"]), op["shader"])
        pipelines[key] = (made.handle, made.layout)
    if key not in pipelines:
        module = device.create_shader_module(code=(folder / "spirv" / f"{op['module']}.spv").read_bytes())
        layout = device.create_bind_group_layout(entries=op["layout"])
        playout = device.create_pipeline_layout(bind_group_layouts=[layout], immediate_size=op["immediate_size"])
        pipelines[key] = (device.create_compute_pipeline(layout=playout, compute={"module": module,
                                                                                    "entry_point": "main"}), layout)
    pipeline, layout = pipelines[key]
    entries = []
    for binding, res in op["bindings"]:
        handle = handles[res]
        resource = (handle.create_view() if hasattr(handle, "create_view")
                    else {"buffer": handle, "offset": 0, "size": handle.size})
        entries.append({"binding": binding, "resource": resource})
    group = device.create_bind_group(layout=layout, entries=entries)
    encoder = device.create_command_encoder()
    compute = encoder.begin_compute_pass()
    compute.set_pipeline(pipeline)
    compute.set_bind_group(0, group)
    if op["immediate_size"]:
        data = (folder / op["immediates"]).read_bytes()
        compute.set_immediates(0, data, 0, op["immediate_size"])
    if min(op["groups"]) > 0:
        compute.dispatch_workgroups(*op["groups"])
    compute.end()
    device.queue.submit([encoder.finish()])


def replay(device, manifest: dict, folder: Path) -> list[bytes]:
    """Issue every recorded operation; the raw bytes of each recorded read."""
    handles, pipelines, reads = make_resources(device, manifest), {}, []
    for op in manifest["ops"]:
        if op["op"] == "write_buffer":
            device.queue.write_buffer(handles[op["res"]], op["offset"], (folder / op["data"]).read_bytes())
        elif op["op"] == "write_texture":
            device.queue.write_texture({"texture": handles[op["res"]]}, (folder / op["data"]).read_bytes(),
                                       op["layout"], op["size"])
        elif op["op"] == "dispatch":
            dispatch(device, op, handles, folder, pipelines)
        elif "layout" in op:
            reads.append(bytes(device.queue.read_texture({"texture": handles[op["res"]]}, op["layout"], op["size"])))
        else:
            reads.append(bytes(device.queue.read_buffer(handles[op["res"]])))
    return reads


def judge(raw: bytes, out: dict, expected: np.lib.npyio.NpzFile) -> dict:
    """vkdiff's element-wise check: unwritten → FAIL_CHECK, NaN/Inf → FAIL_NAN, over the bound → FAIL_NUMERIC.

    An output marked ``"poison": false`` (a node's value, read through its staging copy) is judged as vkdiff
    judges nodes: the poison is a NaN there."""
    dtype = np.dtype(out["dtype"])
    flat = np.frombuffer(raw, dtype)[expected[f"{out['name']}.gather"].reshape(-1)]
    exp, bound = expected[f"{out['name']}.expected"].reshape(-1), expected[f"{out['name']}.bound"].reshape(-1)
    unwritten = np.zeros(flat.shape, bool)
    if out.get("poison", True):
        unwritten = flat.view(f"u{dtype.itemsize}") == POISON_BITS[dtype.itemsize]
    got = flat.astype(np.float64)
    with np.errstate(invalid="ignore"):
        diff = np.where(unwritten, 0.0, np.abs(got - exp))
        nonfinite = ~np.isfinite(got) & np.isfinite(exp) & ~unwritten
        over = (diff > bound) | nonfinite | unwritten
    status = ("FAIL_CHECK" if unwritten.any() else "FAIL_NAN" if nonfinite.any()
              else "FAIL_NUMERIC" if over.any() else "PASS")
    finite = diff[np.isfinite(diff)]
    return {"output": out["name"], "status": status, "mismatches": int(over.sum()), "total": int(exp.size),
            "unwritten": int(unwritten.sum()), "max_abs": float(finite.max()) if finite.size else 0.0}


ORDER = ("PASS", "FAIL_CHECK", "FAIL_NAN", "FAIL_NUMERIC")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Replay a vkdiff repro folder on a Vulkan device")
    parser.add_argument("folder", nargs="?", default=str(Path(__file__).parent))
    parser.add_argument("--adapter", default=None, help="Substring of the adapter's name or driver")
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    adapter, device = open_device(args.adapter, manifest.get("transport", "wgpu"))
    reads = replay(device, manifest, folder)
    expected = np.load(folder / "expected.npz", allow_pickle=False)
    outputs = [judge(reads[out["read"]], out, expected) for out in manifest["outputs"]]
    status = max((o["status"] for o in outputs), key=ORDER.index)
    same = status == manifest["verdict"].get("tolerance_status", manifest["verdict"]["status"])  # no envelope here
    print(json.dumps({"case": manifest["case"], "status": status, "recorded": manifest["verdict"],
                      "same_verdict": same, "adapter": adapter.info.get("device", ""),
                      "driver": adapter.info.get("description", ""), "outputs": outputs}))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
