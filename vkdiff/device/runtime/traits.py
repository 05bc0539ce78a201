"""Device traits, probed once per driver: what a device does where the Vulkan spec leaves it a choice.

``device_traits`` gives the record results carry as ``device_info["traits"]``: every trait of
``trait_probes.TRAITS`` (what each value means is there) and ``probe`` (the probe version, the glslc that built
the probes, how long the cold probe took). The record is read from vkdiff's cache when this driver, device,
transport and probe version were measured before; a corrupt entry is reported, discarded and measured again,
never trusted. Otherwise the probes run now: vkdiff's own shaders compiled by glslc (their SPIR-V cached too),
dispatched together in one submission through the transport interface and read back with one copy.

A probe the device cannot run (it lacks a feature, or naga or the driver names a missing capability) records
``{"not_measured": why}`` for its traits; one that fails records ``{"error": why}``, and a record with an error
is not cached. Nothing here raises: a probe never aborts a run.
"""

from __future__ import annotations

import concurrent.futures

import dataclasses
import functools
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from vkdiff.datamodel import CacheCorruptError, cache_dir, read_entry, record_repair, write_entry
from vkdiff.device.boundary import DeviceError, DispatchError, ShaderUnsupportedError
from vkdiff.device.runtime import resources, trait_probes
from vkdiff.device.runtime.resources import Tensor
from vkdiff.device.runtime.trait_probes import LOCAL_SIZE, TRAITS, Probe
from vkdiff.device.shaders.build import BASE_FLAGS, BuildError, glslc_version
from vkdiff.device.shaders.dispatch import Pipeline, workgroup_count
from vkdiff.device.transports import watchdog
from vkdiff.device.transports.adapters import DeviceInfo
from vkdiff.device.transports.transport import Transport

TRAITS_DIR = "traits"
"""Cache folder of trait records (``<key>.json``) and of the probes' SPIR-V (``spv/<key>.spv``)."""
SPV_FLAGS = (*BASE_FLAGS, "--target-env=vulkan1.1")
"""glslc flags of every probe (subgroup builtins need SPIR-V 1.3); no ``-O``, so the driver gets the arithmetic as
written."""


@functools.lru_cache(maxsize=None)
def probe_version() -> str:
    """A hash of the probes and of how they are read: changing either measures every device again."""
    digest = hashlib.sha256()
    for module in (trait_probes.__file__, __file__):
        digest.update(Path(module).read_bytes())
    return digest.hexdigest()[:12]


def cache_key(info: DeviceInfo) -> str:
    """The trait cache key: driver (with its version), device, transport, the features it was opened with, probes,
    and the device profile's rewrite (its rules and the rewriter's own version)."""
    from vkdiff.device.shaders.device_profiles import profile_version

    identity = {"driver": info.driver, "name": info.name, "vendor_id": info.vendor_id, "backend": info.backend,
                "transport": info.transport, "features": sorted(info.features), "probe": probe_version(),
                "profile": info.profile, "rewrite": profile_version(info.profile)}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:32]


def record_path(info: DeviceInfo) -> Path:
    """Where ``info``'s trait record is cached."""
    return cache_dir() / TRAITS_DIR / f"{cache_key(info)}.json"


def probe_path(source: str) -> Path:
    """Where a probe's SPIR-V is cached: keyed by its GLSL and glslc's flags."""
    key = hashlib.sha256("\0".join((source, *SPV_FLAGS)).encode()).hexdigest()[:32]
    return cache_dir() / TRAITS_DIR / "spv" / f"{key}.spv"


def compile_probe(source: str) -> tuple[bytes, str]:
    """(SPIR-V, the glslc that built it) of a probe's GLSL, cached by source and flags (a runner without glslc uses a
    cache built elsewhere; a corrupt entry is reported and built again).

    Raises:
        BuildError: glslc is missing (``GlslcMissingError``) or refuses the source.
    """
    path = probe_path(source)
    try:
        head, newline, spv = read_entry(path).partition(b"\n")
        if newline and spv:
            return spv, head.decode()
        raise CacheCorruptError(path, "no glslc line")
    except FileNotFoundError:
        pass
    except CacheCorruptError as exc:
        record_repair(exc)
        path.unlink(missing_ok=True)
    glslc = glslc_version()
    spv = glslc_compile(source)
    write_entry(path, glslc.encode() + b"\n" + spv)
    return spv, glslc


def glslc_compile(source: str) -> bytes:
    """glslc's module for a probe's GLSL (no cache).

    Raises:
        BuildError: glslc refuses the source.
    """
    done = subprocess.run(["glslc", *SPV_FLAGS, "-o", "-", "-"], input=source.encode(), capture_output=True)
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.decode(errors="replace").splitlines() if ln.strip()]
        raise BuildError("trait probe: glslc failed: " + " | ".join(lines[:4]))
    return done.stdout


def rechecked_probes(repair: bool = False) -> tuple[list[tuple[Path, str]], dict[str, bytes]]:
    """Every probe compiled again by glslc and compared with its cached module: (corrupt entries and why, the fresh
    modules by sha256, what transformed probe modules are made from). With ``repair`` a differing entry is replaced.

    Raises:
        BuildError: glslc is missing or refuses a probe.
    """
    corrupt, modules = [], {}
    glslc = glslc_version()
    for probe in trait_probes.probes():
        spv = glslc_compile(probe.source)
        modules[hashlib.sha256(spv).hexdigest()] = spv
        path = probe_path(probe.source)
        try:
            cached = read_entry(path).partition(b"\n")[2]
        except (FileNotFoundError, CacheCorruptError):
            continue
        if cached != spv:
            corrupt.append((path, "differs from the probe's source compiled again"))
            if repair:
                write_entry(path, glslc.encode() + b"\n" + spv)
    return corrupt, modules


@dataclasses.dataclass(kw_only=True)
class Loaded:
    """A probe ready to dispatch on one device."""

    probe: Probe
    pipeline: Pipeline
    bind_group: Any
    output: Tensor
    """The buffer read back (the probe's last)."""


def load(device: Transport, probe: Probe) -> tuple[Loaded, str]:
    """The probe's pipeline, buffers and bind group on ``device``, and the glslc that built it.

    Raises:
        BuildError: its SPIR-V cannot be built.
        ShaderUnsupportedError: naga or the device lacks a capability it needs.
        DeviceError: the device refuses the pipeline or a buffer.
    """
    label = f"trait probe {probe.name}"
    spv, glslc = compile_probe(probe.source)
    pipeline = device.create_pipeline(spv, {}, (LOCAL_SIZE, 1, 1), label)
    tensors = [resources.buffer_tensor(device, data, f"{label} binding {i}") for i, data in enumerate(probe.buffers)]
    entries = [{"binding": i, "resource": {"buffer": t.handle, "offset": 0,
                                           "size": int(t.handle.size) if bound is None else bound}}
               for i, (t, bound) in enumerate(zip(tensors, probe.bound))]
    bind_group = device.call(DispatchError, f"{label}: bind group", device.create_bind_group,
                             layout=pipeline.layout, entries=entries)
    return Loaded(probe=probe, pipeline=pipeline, bind_group=bind_group, output=tensors[-1]), glslc


def submit(device: Transport, loaded: list[Loaded]) -> None:
    """Every loaded probe's dispatch, recorded into one command buffer and submitted.

    Raises:
        DeviceError: the device refused the submission.
    """
    def record_all() -> None:
        encoder = device.create_command_encoder(label="trait probes")
        for one in loaded:
            compute = encoder.begin_compute_pass()
            compute.set_pipeline(one.pipeline.handle)
            compute.set_bind_group(0, one.bind_group)
            compute.dispatch_workgroups(*workgroup_count((one.probe.invocations, 1, 1), one.pipeline.local_size))
            compute.end()
        device.queue.submit([encoder.finish()])

    for one in loaded:
        watchdog.note_dispatch(f"trait probe {one.probe.name}")
    device.call(DispatchError, f"trait probes {[one.probe.name for one in loaded]}", record_all)


def readback(device: Transport, loaded: list[Loaded]) -> dict[str, np.ndarray | DeviceError]:
    """Each probe's output words after its dispatch (one submission, one copy), or the error of its own dispatch
    where the submission of them all was refused."""
    try:
        submit(device, loaded)
        ran = loaded
        found: dict[str, np.ndarray | DeviceError] = {}
    except DeviceError:
        ran, found = [], {}
        for one in loaded:
            try:
                submit(device, [one])
                ran.append(one)
            except DeviceError as exc:
                found[one.probe.name] = exc
    words = resources.copy_out(device, [(one.output, 0, int(one.output.handle.size)) for one in ran],
                               "reading back the trait probes")
    found.update({one.probe.name: raw.view(np.uint32) for one, raw in zip(ran, words)})
    return found


def _each(traits: tuple[str, ...], what: str, why: str) -> dict[str, Any]:
    return {name: {what: why} for name in traits}


def _compile_ahead(sources: list[str]) -> None:
    """Every probe's SPIR-V built (or read from the cache) at once, glslc processes side by side: a cold probe pays
    for the slowest compile, not their sum. What fails here fails again, and is recorded, in ``load``."""
    def one(source: str) -> None:
        try:
            compile_probe(source)
        except (BuildError, CacheCorruptError):
            pass

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(len(sources), os.cpu_count() or 1))) as pool:
        list(pool.map(one, sources))


def measure(device: Transport, info: DeviceInfo) -> dict[str, Any]:
    """Every trait of ``info``'s device, measured now (uncached): see the module's docstring."""
    started = time.perf_counter()
    record: dict[str, Any] = {}
    glslc = ""
    try:
        loaded = []
        _compile_ahead([p.source for p in trait_probes.probes() if set(p.needs) <= set(info.features)])
        for probe in trait_probes.probes():
            lacking = [name for name in probe.needs if name not in info.features]
            if lacking:
                record.update(_each(probe.traits, "not_measured", f"the device lacks {', '.join(lacking)}"))
                continue
            try:
                one, glslc = load(device, probe)
                loaded.append(one)
            except ShaderUnsupportedError as exc:
                record.update(_each(probe.traits, "not_measured", str(exc)))
            except (BuildError, DeviceError) as exc:
                record.update(_each(probe.traits, "error", str(exc)))
        outputs = readback(device, loaded) if loaded else {}
        for one in loaded:
            words = outputs[one.probe.name]
            try:
                if isinstance(words, DeviceError):
                    raise words
                record.update(one.probe.read(words))
            except (DeviceError, ValueError) as exc:
                record.update(_each(one.probe.traits, "error", f"{one.probe.name}: {exc}"))
    except Exception as exc:  # the last guard: a probe never aborts a run
        record.update(_each(tuple(n for n in TRAITS if n not in record), "error", f"{type(exc).__name__}: {exc}"))
    record["probe"] = {"version": probe_version(), "glslc": glslc, "seconds": round(time.perf_counter() - started, 3)}
    return record


def failed(record: dict[str, Any]) -> list[str]:
    """The traits whose probe failed (a record with any is not cached)."""
    return [name for name, value in record.items() if isinstance(value, dict) and "error" in value]


def cached_record(payload: bytes) -> dict[str, Any]:
    """The trait record a cache entry holds.

    Raises:
        ValueError: not a record of this probe version with every trait.
    """
    record = json.loads(payload)
    if not isinstance(record, dict) or not isinstance(record.get("probe"), dict):
        raise ValueError("not a trait record")
    if record["probe"].get("version") != probe_version():
        raise ValueError(f"probe version {record['probe'].get('version')!r}, not {probe_version()!r}")
    missing = sorted(set(TRAITS) - set(record))
    if missing:
        raise ValueError(f"traits {missing} missing")
    return record


def device_traits(device: Transport, info: DeviceInfo) -> dict[str, Any]:
    """The traits of ``info``'s device (as opened: no wrapper), cached or measured now.

    Example::

        traits = device_traits(ctx.opened, ctx.info)
        traits["f32_denorm"]   # 'preserved'
    """
    path = record_path(info)
    try:
        return cached_record(read_entry(path))
    except FileNotFoundError:
        pass
    except (CacheCorruptError, ValueError) as exc:
        record_repair(exc if isinstance(exc, CacheCorruptError) else CacheCorruptError(path, f"bad record: {exc}"))
        path.unlink(missing_ok=True)
    record = measure(device, info)
    if not failed(record):
        try:
            write_entry(path, json.dumps(record, sort_keys=True).encode())
        except OSError:
            pass  # an unwritable cache costs the next run a probe, never this run
    return record
