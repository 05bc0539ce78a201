"""Shared test helpers: one adapter probe, glslc for the project's own test shaders."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

SHADERS = Path(__file__).parent / "device" / "shaders"
ADAPTER_ENV = "VKDIFF_DEVICE"
SHARED_ET_ENV = "VKDIFF_SHARED_ET"
SHARED_ET = Path(os.environ.get(SHARED_ET_ENV) or Path(__file__).resolve().parents[2] / "shared" / "et")
"""The pinned ExecuTorch ``backends/vulkan`` tarballs (``../shared/et`` beside the checkout; see its README)."""


@functools.lru_cache(maxsize=None)
def vulkan_adapters():
    """Every Vulkan adapter (probed once per process), filtered by $VKDIFF_DEVICE.

    Discovery errors propagate (never "no adapters"). Where a device is promised ($VKDIFF_REQUIRE_DEVICE, $CI)
    and none exists, or $VKDIFF_DEVICE matches none, the reason is kept in ``UNUSABLE`` and the session fails at
    configure time with that one line (``tests/conftest.py``).
    """
    from vkdiff.device.transports.adapters import NoAdapterError, UnknownDeviceError, select

    try:
        return tuple(select())
    except (NoAdapterError, UnknownDeviceError) as exc:
        UNUSABLE.append(str(exc))
        return ()


UNUSABLE: list[str] = []
"""Why the promised adapters cannot be used (the session fails on it)."""


def first_adapter():
    found = vulkan_adapters()
    return found[0] if found else None


requires_vulkan = pytest.mark.skipif(
    not vulkan_adapters(),
    reason=f"NOT_RUN: no Vulkan adapter (install mesa-vulkan-drivers; select with ${ADAPTER_ENV})")

PREBUILT_ENV = "VKDIFF_TEST_SPV"
"""Folder of the test shaders compiled elsewhere (``<name>.spv``), for GPU runners without glslc."""

requires_glslc = pytest.mark.skipif(shutil.which("glslc") is None, reason="NOT_RUN: glslc missing (apt-get install glslc)")

requires_test_spirv = pytest.mark.skipif(
    shutil.which("glslc") is None and not os.environ.get(PREBUILT_ENV),
    reason=f"NOT_RUN: glslc missing (apt-get install glslc) and no ${PREBUILT_ENV} with prebuilt test shaders")

NO_PINNED_TREE = (f"NOT_RUN: no pinned ExecuTorch trees at {SHARED_ET} (../shared/et beside the checkout, or "
                  f"${SHARED_ET_ENV}); the tests that run real ET-VK kernels need them")


def pinned_tarball(name: str) -> Path | None:
    """The pinned tarball ``executorch-<name>*.tar.*`` (``main``, ``v1.4.1``, ``v1.3.1``), or None."""
    found = sorted(SHARED_ET.glob(f"executorch-{name}*.tar.*")) if SHARED_ET.is_dir() else []
    return found[0] if found else None


NO_TREE = "no ExecuTorch tree"
"""The words every skip for lack of a tree carries (the session counts them at its end)."""
HOW_TO_GIVE_TREE = ("put the pinned trees at ../shared/et (or $VKDIFF_SHARED_ET), or set VKDIFF_ET_SRC=PATH "
                    "(a checkout, REPO@REV or a tarball of backends/vulkan)")


@functools.lru_cache(maxsize=None)
def main_tree() -> tuple[str | None, str]:
    """(``--et-src`` of an ExecuTorch main tree, why there is none): the pinned tarball, else what ``vkdiff run``
    uses (``$VKDIFF_ET_SRC``, or the installed executorch's commit, fetched once into the cache)."""
    tarball = pinned_tarball("main")
    if tarball is not None:
        return str(tarball), ""
    from vkdiff.device.shaders.trees import EtSourceError, choose_tree

    try:
        choice = choose_tree(None)
    except EtSourceError as exc:
        return None, str(exc)
    return (str(choice.path), "") if choice.path is not None else (None, choice.note)


requires_tree = pytest.mark.skipif(
    main_tree()[0] is None,
    reason=f"NOT_RUN: {NO_TREE} for the tests that run real ET-VK kernels ({main_tree()[1]}); {HOW_TO_GIVE_TREE}")


@functools.lru_cache(maxsize=None)
def compile_glsl(name: str, *flags: str) -> bytes:
    """Compile one of the project's test shaders with ET-VK's glslc flags (or read it from $VKDIFF_TEST_SPV)."""
    if shutil.which("glslc") is None and os.environ.get(PREBUILT_ENV):
        return Path(os.environ[PREBUILT_ENV], Path(name).stem + ".spv").read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "out.spv")
        subprocess.run(["glslc", "-fshader-stage=compute", "--target-env=vulkan1.1", "-Werror", "-O", *flags,
                        str(SHADERS / name), "-o", str(out)], check=True, capture_output=True)
        return out.read_bytes()


def seeded_rng(name: str):
    """A numpy Generator seeded from a test's name (stable across runs and workers)."""
    import hashlib

    import numpy as np

    return np.random.default_rng(int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little"))


def coverage_gaps(tree: Path, *cpp_files: str) -> tuple[set[str], dict[str, list[str]]]:
    """The ops ``cpp_files`` of the tree register, and each one's missing launcher, reference or suite."""
    from vkdiff import reference
    from vkdiff.cases.kernels import load_suites
    from vkdiff.device.launchers import LAUNCHERS
    from vkdiff.device.runtime.registrations import REGISTER

    impl = tree / "backends/vulkan/runtime/graph/ops/impl"
    registered = {op for name in cpp_files for op in REGISTER.findall((impl / name).read_text())}
    suites = load_suites()
    gaps = {op: [what for what, table in (("launcher", LAUNCHERS), ("reference", reference.OPS), ("suite", suites))
                 if op not in table] for op in registered}
    return registered, {op: missing for op, missing in gaps.items() if missing}


def isolated(fn, *args, timeout: float = 600):
    """``fn(*args)`` in a fresh (spawned) process, its return value back; the child's exception re-raised here as an
    ``AssertionError`` holding its traceback.

    Raw Vulkan runs so: on lavapipe, a process that ran wgpu work (torn-down wgpu devices) and then drives raw Vulkan
    can corrupt its heap (glibc aborts with ``malloc(): mismatching next->prev_size``); a process of its own does not.
    """
    import concurrent.futures
    import multiprocessing

    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result(timeout=timeout)
