"""The raw transport's host costs: its ``VkPipelineCache`` kept in vkdiff's cache (checked when read), uploads deferred
into the next submission, uncached mapped memory read through a copy. Device work runs in a process of its own
(``testutils.isolated``)."""

from __future__ import annotations

import os
import struct
import types

import numpy as np
import pytest

from tests.testutils import compile_glsl, isolated, requires_test_spirv, requires_vulkan
from vkdiff.datamodel.cache import REPAIRS, read_entry, write_entry
from vkdiff.device.transports.vk_pipeline_cache import HEADER, header_problem, initial_data

UUID = bytes(range(16))
PROPS = types.SimpleNamespace(vendorID=0x10DE, deviceID=0x2335, driverVersion=7, pipelineCacheUUID=UUID)


def _header(vendor=0x10DE, device=0x2335, uuid=UUID, size=HEADER.size, version=1) -> bytes:
    return HEADER.pack(size, version, vendor, device, uuid) + b"driver data"


def test_a_header_naming_this_device_is_accepted():
    assert header_problem(_header(), PROPS) is None


@pytest.mark.parametrize("data, why", [
    (b"\x20\x00", "2 bytes, shorter than a pipeline cache header"),
    (_header(version=2), "header size 32, version 2"),
    (_header(device=0x1234), "data of device 10de:1234, not this one"),
    (_header(uuid=bytes(16)), "data of device 10de:2335, not this one"),
])
def test_a_header_of_another_device_or_version_is_refused(data, why):
    assert header_problem(data, PROPS) == why


def test_a_stored_entry_is_read_back_when_both_checks_pass(tmp_path):
    path = tmp_path / "p.vkpc"
    write_entry(path, _header())
    assert initial_data(path, PROPS) == _header()


@pytest.mark.parametrize("damage", ["flip a byte", "another device"])
def test_a_damaged_entry_is_discarded_as_a_repair_and_the_run_starts_empty(tmp_path, damage):
    path = tmp_path / "p.vkpc"
    if damage == "flip a byte":
        write_entry(path, _header())
        raw = bytearray(path.read_bytes())
        raw[-1] ^= 0xFF
        path.write_bytes(bytes(raw))
    else:
        write_entry(path, _header(device=0x1))
    before = len(REPAIRS)
    assert initial_data(path, PROPS) == b""
    assert not path.exists()
    assert len(REPAIRS) == before + 1 and str(path) in REPAIRS[-1].line()


def test_save_stores_the_drivers_data_once_it_has_grown(tmp_path, monkeypatch):
    """What a device's close does with the driver's data: stored as a checked entry the next open accepts; not
    stored when no pipeline was made, or when the driver keeps nothing past the header (lavapipe)."""
    from vkdiff.device.transports import vk_pipeline_cache

    store = _store(tmp_path, vk_pipeline_cache, handle=None, created=0)
    store.saved_at = 0.0
    _driver_data(monkeypatch, vk_pipeline_cache, _header())
    store.save(None, None)
    assert not store.path.exists()
    store.created = 2
    _driver_data(monkeypatch, vk_pipeline_cache, _header()[:HEADER.size])
    store.save(None, None)
    assert not store.path.exists()
    _driver_data(monkeypatch, vk_pipeline_cache, _header())
    store.save(None, None)
    assert initial_data(store.path, PROPS) == _header() and store.created == 0
    store.path.unlink()
    _driver_data(monkeypatch, vk_pipeline_cache, _header() + b" grown")
    store.saved_at = vk_pipeline_cache.time.monotonic()
    store.made(None, None)
    assert not store.path.exists(), "within SAVE_EVERY_S of the last store, a new pipeline is only counted"
    store.saved_at -= vk_pipeline_cache.SAVE_EVERY_S + 1
    store.made(None, None)
    assert store.path.exists(), "a device making pipelines stores them every SAVE_EVERY_S"


def test_a_device_whose_pipelines_all_came_from_the_cache_stores_nothing(tmp_path, monkeypatch):
    """The driver's data the size it was given: every pipeline was found in it, so the close neither takes the lock
    nor reads, merges or writes the entry (a 40 MB entry on an H200 took 0.18 s of a one-case run's exit)."""
    from vkdiff.device.transports import vk_pipeline_cache

    store = _store(tmp_path, vk_pipeline_cache, handle="ours", created=3)
    store.loaded = _header() + b" pipelines"
    write_entry(store.path, _header() + b" another process's")
    _driver_data(monkeypatch, vk_pipeline_cache, store.loaded)
    monkeypatch.setattr(vk_pipeline_cache, "_cache_data", None)
    store.save(None, None)
    assert store.created == 0
    assert initial_data(store.path, PROPS) == _header() + b" another process's"
    assert not (tmp_path / "locks").exists()


def test_a_store_is_read_on_a_thread_and_waited_for_where_it_is_used(tmp_path, monkeypatch):
    """Opening the device does not wait for the entry: it is read, checked and handed to the driver on a thread;
    ``ready()`` waits for it, and a cache the driver refused is raised there (at the first pipeline)."""
    import threading

    from vkdiff.device.transports import vk_pipeline_cache

    write_entry(tmp_path / "pipelines" / "p.vkpc", _header())
    monkeypatch.setattr(vk_pipeline_cache, "entry_path", lambda props: tmp_path / "pipelines" / "p.vkpc")
    release = threading.Event()

    class SlowVulkan(MergingVulkan):
        def vkGetPhysicalDeviceProperties(self, physical):
            return PROPS

        def vkCreatePipelineCache(self, device, info, allocator):
            assert release.wait(10)
            if device == "refuses":
                raise RuntimeError("VK_ERROR_OUT_OF_HOST_MEMORY")
            return super().vkCreatePipelineCache(device, info, allocator)

    vk = SlowVulkan()
    vk.ffi.NULL = None
    store = vk_pipeline_cache.PipelineStore(vk, "device", "physical")
    assert store._opening is not None and not store._opening.done(), "the constructor returned before the cache"
    release.set()
    assert store.ready().handle == "cache 1" and store.loaded == _header()
    refused = vk_pipeline_cache.PipelineStore(vk, "refuses", "physical")
    with pytest.raises(RuntimeError, match="OUT_OF_HOST_MEMORY"):
        refused.ready()
    refused.close(vk, "refuses")
    assert vk.destroyed == []


def _store(tmp_path, module, handle, created):
    """A store as a device's opening leaves it (its entry read, the cache made), with no device behind it."""
    store = object.__new__(module.PipelineStore)
    store.path, store.loaded, store.handle, store.created = tmp_path / "pipelines" / "p.vkpc", b"", handle, created
    store.props, store._opening = PROPS, None
    return store


def _driver_data(monkeypatch, module, data: bytes) -> None:
    """The driver's data as ``vkGetPipelineCacheData`` returns it (its size first, then the bytes)."""
    monkeypatch.setattr(module, "_cache_data", lambda vk, device, handle: data)
    monkeypatch.setattr(module, "_cache_size", lambda vk, device, handle: len(data))


class MergingVulkan:
    """The calls a save makes to merge another process's data: each cache made from data, and each merge."""

    def __init__(self):
        self.made, self.merged, self.destroyed = [], [], []
        self.ffi = types.SimpleNamespace(from_buffer=bytes)

    def VkPipelineCacheCreateInfo(self, initialDataSize, pInitialData):
        return bytes(pInitialData)

    def vkCreatePipelineCache(self, device, info, allocator):
        self.made.append(info)
        return f"cache {len(self.made)}"

    def vkMergePipelineCaches(self, device, into, count, sources):
        self.merged.append((into, list(sources)))

    def vkDestroyPipelineCache(self, device, handle, allocator):
        self.destroyed.append(handle)


def test_save_merges_what_another_process_stored_since_this_one_read(tmp_path, monkeypatch):
    """Workers of one run share an entry: a save merges the stored data it has not seen before writing, so the
    last writer does not drop the others' pipelines; data it has seen is not merged again."""
    from vkdiff.device.transports import vk_pipeline_cache

    store = _store(tmp_path, vk_pipeline_cache, handle="ours", created=1)
    theirs = _header() + b" theirs"
    write_entry(store.path, theirs)
    vk = MergingVulkan()
    _driver_data(monkeypatch, vk_pipeline_cache, _header() + b" both")
    store.save(vk, None)
    assert vk.made == [theirs] and vk.merged == [("ours", ["cache 1"])] and vk.destroyed == ["cache 1"]
    assert initial_data(store.path, PROPS) == _header() + b" both"
    store.created = 1
    store.save(vk, None)
    assert len(vk.merged) == 1
    assert (tmp_path / "locks" / "p.vkpc.lock").exists()


def pipelines_run(spv: bytes, cache_dir: str) -> tuple[int, int, int, list[str]]:
    """In the child: two pipelines of one module through a fresh device, which is then closed; (bytes loaded at
    open, shader modules made, bytes of the driver's data, entries stored)."""
    import gc

    os.environ["VKDIFF_CACHE_DIR"] = cache_dir
    from vkdiff.datamodel.paths import cache_dir as cache_folder
    from vkdiff.device.shaders.dispatch import PipelineCache
    from vkdiff.device.transports.adapters import create_device, select
    from vkdiff.device.transports.raw_vulkan import binding
    from vkdiff.device.transports.vk_pipeline_cache import _cache_data

    raw = create_device(*select(via="vulkan")[0])
    loaded = len(raw.pipeline_store.ready().loaded)
    cache = PipelineCache(raw)
    for mul in (3, 5):
        cache.get(spv, {3: True, 4: mul, 5: 1, 6: 0.5}, (32, 1, 1), label="spec_kinds")
    modules = len(raw.shader_objects)
    held = len(_cache_data(binding(), raw.handle, raw.pipeline_store.ready().handle))
    del cache, raw
    gc.collect()
    folder = cache_folder() / "pipelines"
    return loaded, modules, held, sorted(os.listdir(folder)) if folder.is_dir() else []


@requires_vulkan
@requires_test_spirv
def test_the_pipeline_cache_is_stored_per_driver_and_loaded_by_the_next_device(tmp_path):
    """Two pipelines of one module share one module and layout; the driver's data, where it keeps any past the
    header, is stored when the device closes and handed to the next device."""
    spv = compile_glsl("spec_kinds.glsl")
    loaded, modules, held, stored = isolated(pipelines_run, spv, str(tmp_path))
    assert (loaded, modules) == (0, 1)
    if held <= HEADER.size:
        assert stored == [], "a driver that keeps no pipelines (lavapipe) leaves nothing to store"
        return
    assert len(stored) == 1 and stored[0].endswith(".vkpc")
    data = read_entry(next(tmp_path.rglob(stored[0])))
    assert struct.unpack_from("<II", data) == (HEADER.size, 1)
    loaded, _, _, again = isolated(pipelines_run, spv, str(tmp_path))
    assert loaded == len(data) and again == stored


def uploads_run() -> tuple[int, bool]:
    """In the child: a texture made, written and read back; (queue submissions, read equals written)."""
    from vkdiff.device.runtime.resources import read, texture_tensor
    from vkdiff.device.transports.adapters import create_device, select

    raw = create_device(*select(via="vulkan")[0])
    submitted = []
    original = raw.queue._submit
    raw.queue._submit = lambda *a: (submitted.append(a[2]), original(*a))[1]
    data = np.random.default_rng(3).standard_normal((2, 3, 9)).astype(np.float32)
    back = read(raw, texture_tensor(raw, data, "texture3d", "x"))
    return len(submitted), bool(np.array_equal(back, data))


@requires_vulkan
def test_a_new_image_and_its_upload_ride_in_the_next_submission():
    """Layout transition, upload and readback copy: one submission, one fence wait (they were three)."""
    assert isolated(uploads_run) == (1, True)


def staged_read_run() -> tuple[bool, int]:
    """In the child: a mapped buffer read through a copy into host-cached memory, as on a discrete GPU whose mapped
    memory is uncached; (read equals written, submissions)."""
    from vkdiff.device.runtime.resources import buffer_tensor, read
    from vkdiff.device.transports.adapters import create_device, select

    raw = create_device(*select(via="vulkan")[0])
    raw.reads_mapped = False
    submitted = []
    original = raw.queue._submit
    raw.queue._submit = lambda *a: (submitted.append(a[2]), original(*a))[1]
    data = np.random.default_rng(4).integers(-(1 << 30), 1 << 30, 1000).astype(np.int32)
    return bool(np.array_equal(read(raw, buffer_tensor(raw, data, "x")), data)), len(submitted)


@requires_vulkan
def test_mapped_memory_the_cpu_reads_uncached_is_read_through_a_copy():
    assert isolated(staged_read_run) == (True, 1)
