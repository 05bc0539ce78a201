"""Record what a run asks of the device, to replay it elsewhere (``vkdiff repro``, Amber export).

``TraceDevice`` wraps a device (either transport): buffer and texture creation, every queue write, every
dispatch (the module exactly as loaded, after vkdiff's transforms, its bind-group layout,
bindings, push constants and workgroup counts) and every read back are appended, in
order, to ``ops``. Nothing else changes: the wrapped calls run as they would. A replay
of ``ops`` on another device, with only numpy and wgpu, issues the same work.
"""

from __future__ import annotations

import hashlib
from typing import Any

from vkdiff.device.runtime.resources import Tensor


class TraceQueue:
    """The device's queue, with writes and reads recorded."""

    def __init__(self, queue: Any, trace: "TraceDevice"):
        self._queue, self._trace = queue, trace

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)

    def write_buffer(self, buffer, buffer_offset, data, data_offset=0, size=None):
        raw = bytes(memoryview(data).cast("B"))[data_offset: None if size is None else data_offset + size]
        self._trace.ops.append({"op": "write_buffer", "res": self._trace.ref(buffer), "offset": int(buffer_offset),
                                "data": raw})
        return self._queue.write_buffer(buffer, buffer_offset, data, data_offset, size)

    def write_texture(self, destination, data, data_layout, size):
        self._trace.ops.append({"op": "write_texture", "res": self._trace.ref(destination["texture"]),
                                "data": bytes(memoryview(data).cast("B")), "layout": dict(data_layout),
                                "size": list(size)})
        return self._queue.write_texture(destination, data, data_layout, size)

    def read_buffer(self, buffer, *args, **kwargs):
        self._trace.ops.append({"op": "read", "res": self._trace.ref(buffer)})
        return self._queue.read_buffer(buffer, *args, **kwargs)

    def read_texture(self, source, data_layout, size):
        self._trace.ops.append({"op": "read", "res": self._trace.ref(source["texture"]), "layout": dict(data_layout),
                                "size": list(size)})
        return self._queue.read_texture(source, data_layout, size)


class TraceDevice:
    """A wgpu device whose resources, writes, dispatches and reads are recorded in ``ops``."""

    def __init__(self, device: Any):
        self._device = device
        self.queue = TraceQueue(device.queue, self)
        self.resources: list[dict[str, Any]] = []
        """Each buffer or texture: ``kind``, ``size`` (bytes or extent), and for textures ``format``, ``dimension``."""
        self.modules: dict[str, bytes] = {}
        """Loaded SPIR-V by sha256."""
        self.ops: list[dict[str, Any]] = []
        self._ids: dict[int, int] = {}
        self._keep: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._device, name)


    def ref(self, handle: Any) -> int:
        """The trace's id of a buffer or texture it saw created."""
        if id(handle) not in self._ids:
            raise KeyError(f"{handle!r} was not created through the trace")
        return self._ids[id(handle)]

    def _new(self, handle: Any, record: dict[str, Any]) -> Any:
        self._ids[id(handle)] = len(self.resources)
        self._keep.append(handle)
        self.resources.append(record)
        return handle

    def create_buffer(self, **kwargs):
        handle = self._device.create_buffer(**kwargs)
        return self._new(handle, {"kind": "buffer", "size": int(handle.size), "usage": int(kwargs["usage"])})

    def create_buffer_with_data(self, *, data, usage, **kwargs):
        handle = self._device.create_buffer_with_data(data=data, usage=usage, **kwargs)
        self._new(handle, {"kind": "buffer", "size": int(handle.size), "usage": int(usage)})
        self.ops.append({"op": "write_buffer", "res": self.ref(handle), "offset": 0,
                         "data": bytes(memoryview(data).cast("B"))})
        return handle

    def create_texture(self, **kwargs):
        handle = self._device.create_texture(**kwargs)
        return self._new(handle, {"kind": "texture", "size": list(kwargs["size"]), "format": kwargs["format"],
                                  "dimension": kwargs.get("dimension", "2d"), "usage": int(kwargs["usage"])})

    def record_dispatch(self, pipeline: Any, layout: list[dict[str, Any]], bindings: list[tuple[int, Any]],
                        groups: tuple[int, int, int], immediates: bytes, label: str) -> None:
        """Called by ``dispatch.dispatch`` with what it is about to bind and run."""
        key = hashlib.sha256(pipeline.module).hexdigest()
        self.modules[key] = pipeline.module
        refs = [(b, self.ref(h.handle if isinstance(h, Tensor) else h)) for b, h in bindings]
        op = {"op": "dispatch", "shader": label, "module": key, "layout": layout, "bindings": refs,
              "groups": list(groups), "immediates": bytes(immediates[: pipeline.reflection.immediate_size]),
              "immediate_size": int(pipeline.reflection.immediate_size)}
        if self._device.specialises:  # the module is glslc's: its spec constants and workgroup size go with it
            op.update(spec={str(k): v for k, v in pipeline.spec.items()}, local_size=list(pipeline.local_size))
        self.ops.append(op)
