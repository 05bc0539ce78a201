"""The SPIR-V a saved program may need on any runner: every routing profile swept here, the modules exported.

A runner has no glslc (and, through wgpu, no spirv-opt), so the machine that saves the
artifacts runs each program under every routing profile each transport can resolve, on
its first adapter, and keeps every variant the launchers asked for, including those
whose pipelines this device could not create (a cooperative-matrix GEMM on lavapipe is
built before it is refused). It then probes the device's traits afresh, so that the
probes' transformed modules are kept too (a runner's device is probed anew). Each
transport sweeps in a process of its own: raw Vulkan after wgpu work in one process can
corrupt the heap on lavapipe. The cache entries of those variants (index and module),
the modules wgpu transformed and loaded, and vkdiff's own trait probes are copied into
the artifacts folder, and ``vkdiff.subjects.artifacts`` imports them into the runner's
cache after checking each one.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import multiprocessing
from pathlib import Path
from typing import Any, Sequence

from vkdiff.datamodel import cache_dir
from vkdiff.datamodel.settings import TRANSPORTS

SHADERS = "cache"
"""Folder of an artifacts folder that mirrors the cache's shader entries."""


@dataclasses.dataclass(kw_only=True)
class Sweep:
    """What one transport's sweep asked for, and how each (route, case) ended there."""

    transport: str
    variants: dict[str, str]
    """Variant → module key."""
    baked: list[str]
    """Keys of the transformed modules wgpu loaded (none through raw Vulkan)."""
    index_dir: str
    """The builder's index folder name (the tree's hash, ``-mediump`` for that build)."""
    outcomes: list[tuple[str, str, str]]
    """(route, case, status) of every run."""
    problem: str = ""
    """Why this transport could not sweep (no adapter through it), else empty."""


def sweep(cases: Sequence[Any], tree: Any, settings: Any) -> list[Sweep]:
    """Each transport's sweep, each in a spawned process."""
    out = []
    for transport in TRANSPORTS:
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            out.append(pool.submit(_sweep_transport, list(cases), tree, settings, transport).result())
    return out


def _sweep_transport(cases: list[Any], tree: Any, settings: Any, transport: str) -> Sweep:
    from vkdiff.device.runtime.routing import usable_profiles
    from vkdiff.device.transports.adapters import select
    from vkdiff.harness.runner import Runner

    try:
        adapters = select((), via=transport)[:1]
    except Exception as exc:  # no adapter through this transport: the other one's modules are still exported
        return Sweep(transport=transport, variants={}, baked=[], index_dir="", outcomes=[], problem=str(exc))
    if not adapters:
        return Sweep(transport=transport, variants={}, baked=[], index_dir="", outcomes=[], problem="no adapter")
    variants, outcomes, index_dir = {}, [], ""
    for route in usable_profiles(transport):
        runner = Runner(tree=tree, adapters=adapters, settings=dataclasses.replace(
            settings, route=route, transport=transport, timeout=None, device_profile="", repeat=1, replays=0))
        for case in cases:
            for result in runner.run(case, adapters[0][0].slug):
                outcomes.append((route, case.id, result.status))
        variants.update(runner.builder.requested())
        index_dir = runner.builder.index_dir.name
        runner.close()
    from vkdiff.device.runtime.traits import measure
    from vkdiff.device.shaders.dispatch import BAKED_USED
    from vkdiff.device.transports.adapters import create_device

    measure(create_device(*adapters[0]), adapters[0][0])
    return Sweep(transport=transport, variants=variants, baked=sorted(BAKED_USED), index_dir=index_dir,
                 outcomes=outcomes)


def export(folder: Path, sweeps: Sequence[Sweep]) -> dict[str, str]:
    """Copy the swept variants' cache entries, the transformed modules wgpu used and vkdiff's trait probes into
    ``folder/cache``; relative path → sha256 of the file."""
    root, files = cache_dir(), {}
    for done in sweeps:
        for variant, key in done.variants.items():
            for rel in (f"index/{done.index_dir}/{variant}.json", f"spv/{key}.spv"):
                files[rel] = (root / rel).read_bytes()
        for key in done.baked:
            if (root / "baked" / f"{key}.spv").is_file():
                files[f"baked/{key}.spv"] = (root / "baked" / f"{key}.spv").read_bytes()
    for path in sorted((root / "traits" / "spv").glob("*.spv")):
        files[f"traits/spv/{path.name}"] = path.read_bytes()
    written = {}
    for rel, data in sorted(files.items()):
        target = folder / SHADERS / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written[f"{SHADERS}/{rel}"] = hashlib.sha256(data).hexdigest()
    return written
