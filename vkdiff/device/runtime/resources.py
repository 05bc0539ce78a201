"""GPU resources for ET-VK tensors: storage/uniform buffers and width-packed textures.

Every resource is created from numpy data; outputs are created poisoned and read
back whole so that unwritten elements can be detected.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, Sequence

import numpy as np

from vkdiff.device.runtime import layouts
from vkdiff.device.transports import watchdog
from vkdiff.device.boundary import DeviceLimitError, DispatchError
from vkdiff.device.runtime.usage import BufferUsage, TextureUsage

Storage = Literal["buffer", "texture3d", "texture2d"]


@dataclasses.dataclass(kw_only=True)
class Tensor:
    """One ET-VK tensor on the device."""

    shape: tuple[int, ...]
    """Numpy shape of the logical tensor."""
    dtype: np.dtype
    """Element dtype."""
    storage: Storage
    """How it is stored on the device."""
    handle: Any
    """``GPUBuffer`` or ``GPUTexture``."""
    buffer_shape: tuple[int, ...] = ()
    """Shape of the raw buffer contents (for buffers that hold packed data)."""
    spec: Any = None
    """``TensorSpec`` (ET-VK's vTensor metadata) of tensors the graph runtime allocates, else None; its sizes
    follow ``virtual_resize``."""
    allocated: Any = None
    """The ``TensorSpec`` the storage was sized for (the serialized, maximal sizes)."""
    guard: int = 0
    """Byte offset of the canary guard band after a graph-allocated buffer's storage (0: none)."""
    memory: int = -1
    """The serialized ``mem_obj_id``: tensors with one id share one ``SharedObject`` in ET-VK (-1: its own)."""


def byte_view(data: bytes | np.ndarray) -> np.ndarray:
    """``data`` as flat uint8 without a copy when already contiguous (uploads of MBs are on the hot path)."""
    return np.frombuffer(np.ascontiguousarray(data) if isinstance(data, np.ndarray) else data, np.uint8)


def _buffer(device: Any, data: bytes | np.ndarray, usage: int, label: str) -> Any:
    """A buffer of ``data`` zero-padded to a multiple of 16 bytes."""
    raw = byte_view(data)
    size = max(16, -(-raw.size // 16) * 16)
    max_size = device.limits.get("max-storage-buffer-binding-size", 1 << 27)
    if size > max_size:
        raise DeviceLimitError(f"{label}: {size} bytes exceeds max-storage-buffer-binding-size {max_size}")
    if size != raw.size:
        raw = np.concatenate([raw, np.zeros(size - raw.size, np.uint8)])
    return device.call(DispatchError, f"create buffer {label}", device.create_buffer_with_data,
                    data=raw, usage=usage | BufferUsage.COPY_SRC | BufferUsage.COPY_DST)


def buffer_tensor(device: Any, array: np.ndarray, label: str = "tensor") -> Tensor:
    """A storage buffer holding ``array`` contiguously (ET-VK buffer storage, contiguous strides)."""
    array = np.ascontiguousarray(array)
    handle = _buffer(device, array, BufferUsage.STORAGE, label)
    return Tensor(shape=array.shape, dtype=array.dtype, storage="buffer", handle=handle,
                  buffer_shape=array.shape)


def uniform(device: Any, data: bytes, label: str = "ubo") -> Any:
    """A uniform buffer with ``data`` (e.g. WHCN ``ivec4`` sizes)."""
    return _buffer(device, data, BufferUsage.UNIFORM, label)


def texture_tensor(device: Any, array: np.ndarray, storage: Storage = "texture3d", label: str = "tensor") -> Tensor:
    """A width-packed 3D (or 2D) texture holding ``array`` with ET-VK's texel packing."""
    dtype = np.dtype(array.dtype)
    if dtype not in layouts.TEXEL_FORMATS:
        raise DeviceLimitError(f"{label}: no texture format for dtype {dtype}")
    extent = layouts.texture_extent(array.shape)
    if storage == "texture2d" and extent[2] != 1:
        raise ValueError(f"{label}: a texture2d tensor needs C*N == 1, got shape {array.shape}")
    limit = device.limits["max-texture-dimension-3d" if storage == "texture3d" else "max-texture-dimension-2d"]
    if max(extent) > limit:
        raise DeviceLimitError(f"{label}: texture extent {extent} exceeds the device limit {limit}")
    handle = device.call(
        DispatchError, f"create texture {label}", device.create_texture,
        size=extent, dimension="3d" if storage == "texture3d" else "2d", format=layouts.TEXEL_FORMATS[dtype],
        usage=TextureUsage.STORAGE_BINDING | TextureUsage.TEXTURE_BINDING
        | TextureUsage.COPY_DST | TextureUsage.COPY_SRC, label=label)
    tensor = Tensor(shape=array.shape, dtype=dtype, storage=storage, handle=handle)
    write(device, tensor, array)
    return tensor


def tensor(device: Any, array: np.ndarray, storage: Storage, label: str = "tensor") -> Tensor:
    """Create ``array`` on the device with the given ET-VK storage."""
    if storage == "buffer":
        return buffer_tensor(device, array, label)
    return texture_tensor(device, array, storage, label)


def poisoned(device: Any, shape: tuple[int, ...], dtype, storage: Storage, label: str = "out") -> Tensor:
    """An output tensor filled with the poison pattern (see ``layouts.POISON_BITS``)."""
    return tensor(device, layouts.poison_like(shape, dtype), storage, label)


def allocate(device: Any, spec: Any, label: str = "tensor") -> Tensor:
    """Storage for a ``TensorSpec`` sized as ``vTensorStorage`` sizes it, every byte poisoned.

    Buffers hold ``physical_numel`` elements rounded up to 16 bytes (``allocate_buffer``), then a canary guard
    band (``GUARD_BYTES``) that no in-bounds access touches;
    textures have the spec's image extents and its dtype's texel format.
    """
    element = spec.element_dtype
    if spec.storage == "buffer":
        count = max(spec.physical_numel, 1)
        data, guard = guarded(layouts.poison_like((count,), element))
        return Tensor(shape=tuple(spec.sizes), dtype=element,
                      storage="buffer", handle=_buffer(device, data, BufferUsage.STORAGE, label),
                      buffer_shape=(count,), spec=spec, allocated=spec, guard=guard)
    extent = texture_extent(device, spec, label)
    handle = device.call(
        DispatchError, f"create texture {label}", device.create_texture,
        size=extent, dimension="3d" if spec.storage == "texture3d" else "2d", format=layouts.TEXEL_FORMATS[element],
        usage=TextureUsage.STORAGE_BINDING | TextureUsage.TEXTURE_BINDING
        | TextureUsage.COPY_DST | TextureUsage.COPY_SRC, label=label)
    texels = layouts.poison_like((extent[2], extent[1], extent[0], 4), element)
    device.queue.write_texture({"texture": handle}, byte_view(texels),
                               {"bytes_per_row": extent[0] * 4 * element.itemsize, "rows_per_image": extent[1]},
                               extent)
    return Tensor(shape=tuple(spec.sizes), dtype=element, storage=spec.storage, handle=handle, spec=spec,
                  allocated=spec)


def texture_extent(device: Any, spec: Any, label: str) -> tuple[int, int, int]:
    """The image extent of a tensor's spec (one texel at least).

    Raises:
        DeviceLimitError: no texel format for its dtype, or an extent over the device's limit.
    """
    if spec.element_dtype not in layouts.TEXEL_FORMATS:
        raise DeviceLimitError(f"{label}: no texture format for dtype {spec.element_dtype}")
    extent = tuple(max(e, 1) for e in spec.extents)  # an empty tensor (batch norm's unused outputs) gets one texel
    key = "max-texture-dimension-3d" if spec.storage == "texture3d" else "max-texture-dimension-2d"
    if max(extent) > device.limits[key]:
        raise DeviceLimitError(f"{label}: {spec.storage} extent {tuple(extent)} (sizes {list(spec.sizes)}) exceeds "
                               f"{key} {device.limits[key]}")
    return extent  # type: ignore[return-value]


GUARD_BYTES = 64
"""Canary bytes after every buffer the graph allocates: inside the bound range, outside the tensor."""
CANARY = np.frombuffer(bytes([0xC5, 0xA3, 0x5C, 0x3A]) * (GUARD_BYTES // 4), np.uint8)
"""The guard band's pattern (a write of exactly these bytes would go unseen)."""


def guarded(data: np.ndarray) -> tuple[np.ndarray, int]:
    """``data``'s bytes padded to 16, then the canary band; and the band's offset."""
    raw = byte_view(data)
    offset = -(-raw.size // 16) * 16
    return np.concatenate([raw, np.zeros(offset - raw.size, np.uint8), CANARY]), offset


def read_guards(device: Any, tensors: Sequence[Tensor]) -> list[np.ndarray]:
    """Each tensor's guard band, read back with one copy, one submission and one map."""
    return copy_out(device, [(t, t.guard, GUARD_BYTES) for t in tensors],
                    f"reading the guard bands of {len(tensors)} buffers")


TEXTURE_ROW_ALIGN = 256
"""Bytes a texture's rows are padded to when copied into a buffer (WebGPU's ``bytesPerRow`` rule; raw Vulkan
takes the same layout)."""


class CopyOut:
    """Byte ranges (tensor, offset, size) of buffer tensors and whole images of texture tensors, copied into one
    mappable buffer by commands recorded into a submission (``record``), and read from it once that submission is
    done (``read``)."""

    def __init__(self, device: Any, ranges: Sequence[tuple[Tensor, int, int]], images: Sequence[Tensor] = ()):
        self.ranges, self.images = list(ranges), list(images)
        at = 0
        self.offsets = []
        for _, _, size in self.ranges:
            self.offsets.append(at)
            at += int(size)
        self.rows: list[tuple[int, int, int]] = []
        """Per image: its byte offset in the target, its row bytes and its row bytes padded."""
        for image in self.images:
            width, height, depth = image_extent(image)
            row = width * 4 * image.dtype.itemsize
            padded = -(-row // TEXTURE_ROW_ALIGN) * TEXTURE_ROW_ALIGN
            at = -(-at // TEXTURE_ROW_ALIGN) * TEXTURE_ROW_ALIGN
            self.rows.append((at, row, padded))
            at += padded * height * depth
        self.device = device
        self.target = device.create_buffer(size=max(at, 4), usage=BufferUsage.MAP_READ | BufferUsage.COPY_DST)

    def record(self, encoder: Any) -> None:
        for (tensor, start, size), at in zip(self.ranges, self.offsets):
            encoder.copy_buffer_to_buffer(tensor.handle, int(start), self.target, int(at), int(size))
        for image, (at, _, padded) in zip(self.images, self.rows):
            width, height, depth = image_extent(image)
            encoder.copy_texture_to_buffer({"texture": image.handle}, {
                "buffer": self.target, "offset": at, "bytes_per_row": padded, "rows_per_image": height},
                (width, height, depth))

    def read(self) -> list[np.ndarray]:
        """Each range's bytes (uint8), then each image's elements as ``read_raw`` gives them."""
        raw = np.frombuffer(self.device.read_copied(self.target), np.uint8)
        self.target.destroy()
        out = [raw[at:at + size] for (_, _, size), at in zip(self.ranges, self.offsets)]
        for image, (at, row, padded) in zip(self.images, self.rows):
            _, height, depth = image_extent(image)
            rows = raw[at:at + padded * height * depth].reshape(height * depth, padded)[:, :row]
            out.append(np.frombuffer(np.ascontiguousarray(rows).tobytes(), image.dtype))
        return out


def image_extent(tensor: Tensor) -> tuple[int, int, int]:
    """A texture tensor's image as allocated (whatever sizes it was resized to), in texels."""
    spec = tensor.allocated or tensor.spec
    return (tuple(max(e, 1) for e in spec.extents) if spec is not None  # type: ignore[return-value]
            else layouts.texture_extent(tensor.shape))


def copy_out(device: Any, ranges: Sequence[tuple[Tensor, int, int]], what: str) -> list[np.ndarray]:
    """Byte ranges (tensor, offset, size) of buffer tensors, copied into one buffer with one submission and one map
    (a read each costs a round trip: 201 probes of a 200-node delegate took 0.6 s on lavapipe one by one)."""
    if not ranges:
        return []

    def copy_map_read() -> list[np.ndarray]:
        out = CopyOut(device, ranges)
        encoder = device.create_command_encoder(label="readback")
        encoder.exact = True  # raw Vulkan: copies between disjoint ranges need no barrier between them
        out.record(encoder)
        device.queue.submit([encoder.finish()])
        return out.read()

    with watchdog.waiting(what):
        return device.call(DispatchError, what, copy_map_read)


def write(device: Any, tensor: Tensor, array: np.ndarray) -> None:
    """Overwrite a tensor's contents (textures: packed texels; buffers: raw bytes)."""
    if tensor.storage == "buffer":
        device.queue.write_buffer(tensor.handle, 0, byte_view(array))
        return
    texels = np.ascontiguousarray(layouts.to_texels(array.astype(tensor.dtype)))
    depth, height, width4, _ = texels.shape
    row = width4 * 4 * tensor.dtype.itemsize
    device.queue.write_texture({"texture": tensor.handle}, byte_view(texels),
                               {"bytes_per_row": row, "rows_per_image": height}, (width4, height, depth))


def read_raw(device: Any, tensor: Tensor) -> np.ndarray:
    """Every element of the storage as allocated, flat, in its dtype: a buffer's elements, or a texture's texels
    (x fastest, then y, then z) four components each."""
    what = f"reading back {tensor.storage} {list(tensor.shape)}"
    if tensor.storage == "buffer":
        with watchdog.waiting(what):
            raw = device.call(DispatchError, what, device.queue.read_buffer, tensor.handle)
        return np.frombuffer(raw, dtype=tensor.dtype)[: int(np.prod(tensor.buffer_shape))].copy()
    width, height, depth = image_extent(tensor)
    with watchdog.waiting(what):
        raw = device.call(DispatchError, what, device.queue.read_texture, {"texture": tensor.handle},
                       {"bytes_per_row": width * 4 * tensor.dtype.itemsize, "rows_per_image": height},
                       (width, height, depth))
    return np.frombuffer(raw, dtype=tensor.dtype).copy()


def read_buffers(device: Any, tensors: Sequence[Tensor]) -> list[np.ndarray]:
    """The raw bytes of many buffer tensors, read back together (``copy_out``)."""
    sizes = [int(t.handle.size) for t in tensors]
    return copy_out(device, [(t, 0, size) for t, size in zip(tensors, sizes)],
                    f"reading back {len(tensors)} buffers ({sum(sizes)} bytes)")


def read(device: Any, tensor: Tensor) -> np.ndarray:
    """Read a tensor back into its numpy shape and dtype."""
    what = f"reading back {tensor.storage} {list(tensor.shape)}"
    if tensor.storage == "buffer":
        count = int(np.prod(tensor.buffer_shape))
        with watchdog.waiting(what):
            raw = device.call(DispatchError, what, device.queue.read_buffer, tensor.handle)
        raw = raw[: count * tensor.dtype.itemsize]
        return np.frombuffer(raw, dtype=tensor.dtype).reshape(tensor.buffer_shape).copy()
    width4, height, depth = layouts.texture_extent(tensor.shape)
    row = width4 * 4 * tensor.dtype.itemsize
    with watchdog.waiting(what):
        raw = device.call(DispatchError, what, device.queue.read_texture, {"texture": tensor.handle},
                       {"bytes_per_row": row, "rows_per_image": height}, (width4, height, depth))
    texels = np.frombuffer(raw, dtype=tensor.dtype).reshape(depth, height, width4, 4)
    return layouts.from_texels(texels, tensor.shape)
