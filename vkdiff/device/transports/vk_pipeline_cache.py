"""The raw transport's ``VkPipelineCache``, kept in vkdiff's cache per driver between runs.

Compiling a pipeline is most of a kernel case's host time on a discrete GPU (29 ms a
pipeline on an H200, 3028 distinct pipelines in the kernel suite). The driver's cache data
is stored as a vkdiff cache entry (content hash in its header), named by the device's
vendor, device id, driver version and ``pipelineCacheUUID``. It is checked twice when
read: the entry's hash, then the Vulkan header (``VkPipelineCacheHeaderVersionOne``),
which must name this device. An entry failing either is discarded (a cache repair) and
the run starts with an empty cache; the driver still validates the data it is given.

Several processes share one entry (``vkdiff run --jobs``, pytest-xdist): a save takes a
lock, merges what another process stored since this one read the entry
(``vkMergePipelineCaches``), then writes, so no process's pipelines are lost.

The entry is large (40 MB for the kernel suite on an H200: 0.12 s to read, check and
hand to the driver), and a run of one case needs it only for its first pipeline: it is
read on a thread while the device opens, and ``ready()`` waits for it. A device whose
pipelines all came from the cache leaves the driver's data the size it was given; its
close then stores nothing (it used to read, merge and compare the whole entry again:
0.18 s of a first verdict's exit there).
"""

from __future__ import annotations

import contextlib
import struct
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from vkdiff.datamodel.cache import CacheCorruptError, read_entry, record_repair, write_entry

HEADER = struct.Struct("<IIII16s")
"""``VkPipelineCacheHeaderVersionOne``: header size, header version, vendor id, device id, pipeline cache UUID."""
HEADER_VERSION_ONE = 1
SAVE_EVERY_S = 30.0
"""How often a device making pipelines stores its cache data (the whole of it each time)."""


def entry_path(props: Any) -> Path | None:
    """Where this device's cache data lives (None: the cache folder cannot be written)."""
    from vkdiff.datamodel.paths import CacheUnwritableError, cache_dir

    try:
        folder = cache_dir() / "pipelines"
    except CacheUnwritableError:
        return None
    uuid = bytes(props.pipelineCacheUUID).hex()
    return folder / f"{int(props.vendorID):04x}-{int(props.deviceID):04x}-{int(props.driverVersion):x}-{uuid}.vkpc"


def header_problem(data: bytes, props: Any) -> str | None:
    """Why ``data`` is not this device's pipeline cache data, None when its header names this device."""
    if len(data) < HEADER.size:
        return f"{len(data)} bytes, shorter than a pipeline cache header"
    size, version, vendor, device, uuid = HEADER.unpack_from(data)
    if size < HEADER.size or version != HEADER_VERSION_ONE:
        return f"header size {size}, version {version}"
    if (vendor, device, uuid) != (int(props.vendorID), int(props.deviceID), bytes(props.pipelineCacheUUID)):
        return f"data of device {vendor:04x}:{device:04x}, not this one"
    return None


def initial_data(path: Path | None, props: Any) -> bytes:
    """The stored data for this device, checked; empty when there is none or it fails a check (then repaired)."""
    if path is None:
        return b""
    try:
        data = read_entry(path)
        why = header_problem(data, props)
        if why is not None:
            raise CacheCorruptError(path, why)
    except FileNotFoundError:
        return b""
    except CacheCorruptError as exc:
        record_repair(exc)
        path.unlink(missing_ok=True)
        return b""
    return data


class PipelineStore:
    """A device's ``VkPipelineCache``: read on a thread when the device opens, saved when it closes if the driver's
    data grew."""

    def __init__(self, vk: Any, device: Any, physical: Any):
        props = self.props = vk.vkGetPhysicalDeviceProperties(physical)
        self.path = entry_path(props)
        self.created = 0
        """Pipelines created through the cache since it was last stored (none: nothing to save)."""
        self.saved_at = time.monotonic()
        self._opening: Future | None = _in_background(self._open, vk, device)

    def _open(self, vk: Any, device: Any) -> tuple[bytes, Any]:
        """The stored data, checked, and the ``VkPipelineCache`` made from it."""
        loaded = initial_data(self.path, self.props)
        data = vk.ffi.from_buffer(loaded) if loaded else vk.ffi.NULL
        return loaded, vk.vkCreatePipelineCache(device, vk.VkPipelineCacheCreateInfo(
            initialDataSize=len(loaded), pInitialData=data), None)

    def ready(self) -> "PipelineStore":
        """Wait until the cache is made (``loaded``: the data it was made from; ``handle``: the cache)."""
        if self._opening is not None:
            self.loaded, self.handle = self._opening.result()
            self._opening = None
        return self

    def made(self, vk: Any, device: Any) -> None:
        """Count a new pipeline; store the data every ``SAVE_EVERY_S`` while pipelines are being made (a run killed
        before its device closes keeps most of its work)."""
        self.created += 1
        if time.monotonic() - self.saved_at > SAVE_EVERY_S:
            self.save(vk, device)

    def save(self, vk: Any, device: Any) -> None:
        """Store the driver's data when it has grown; a cache folder that cannot be written is no error."""
        self.saved_at = time.monotonic()
        if self.path is None or not self.created:
            return
        self.ready()
        if _cache_size(vk, device, self.handle) == len(self.loaded):
            self.created = 0  # every pipeline was found in the data the driver was given
            return
        try:
            with _locked(self.path):
                self._merge_stored(vk, device)
                data = _cache_data(vk, device, self.handle)
                if len(data) <= HEADER.size or data == self.loaded:
                    return
                write_entry(self.path, data)
        except OSError:
            return
        self.loaded, self.created = data, 0

    def close(self, vk: Any, device: Any) -> None:
        """Save, then destroy the cache (one that could not be made has nothing to save or destroy)."""
        try:
            self.ready()
        except Exception:  # noqa: BLE001 - the first pipeline on this device raised it already
            return
        self.save(vk, device)
        vk.vkDestroyPipelineCache(device, self.handle, None)

    def _merge_stored(self, vk: Any, device: Any) -> None:
        """Merge into this cache what another process stored since this one read the entry."""
        props = self.props
        stored = initial_data(self.path, props)
        if not stored or stored == self.loaded:
            return
        other = vk.vkCreatePipelineCache(device, vk.VkPipelineCacheCreateInfo(
            initialDataSize=len(stored), pInitialData=vk.ffi.from_buffer(stored)), None)
        try:
            vk.vkMergePipelineCaches(device, self.handle, 1, [other])
        finally:
            vk.vkDestroyPipelineCache(device, other, None)


@contextlib.contextmanager
def _locked(path: Path) -> Any:
    """Hold an exclusive lock on ``path``'s lock file, in the cache's ``locks/`` (where the platform has ``fcntl``)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    folder = path.parent.parent / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{path.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _in_background(fn: Any, *args: Any) -> Future:
    """``fn(*args)`` on a thread of its own (hashing, reading and the driver's parsing release the GIL)."""
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - raised again where the result is taken
            future.set_exception(exc)

    threading.Thread(target=run, name="vkdiff-pipeline-cache", daemon=True).start()
    return future


def _cache_size(vk: Any, device: Any, handle: Any) -> int:
    """The size of the driver's data (``vkGetPipelineCacheData`` without a buffer)."""
    size = vk.ffi.new("size_t *")
    vk.lib.vkGetPipelineCacheData(device, handle, size, vk.ffi.NULL)
    return size[0]


def _cache_data(vk: Any, device: Any, handle: Any) -> bytes:
    """``vkGetPipelineCacheData``, both calls (size, then bytes)."""
    get = vk.lib.vkGetPipelineCacheData
    size = vk.ffi.new("size_t *")
    get(device, handle, size, vk.ffi.NULL)
    buffer = vk.ffi.new("char[]", size[0])
    get(device, handle, size, buffer)
    return vk.ffi.buffer(buffer, size[0])[:]
