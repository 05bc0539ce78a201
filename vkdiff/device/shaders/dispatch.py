"""Compute pipelines from (transformed) SPIR-V, and dispatches with ET-VK's conventions.

The bind-group layout is built from SPIR-V reflection, never ``layout="auto"``
(auto layouts get no immediate-data range and are pipeline-exclusive). Every
storage buffer is declared ``storage`` (naga ignores member ``NonWritable``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from vkdiff.datamodel import CacheCorruptError, cache_dir, read_entry, record_repair, write_entry
from vkdiff.device.shaders import spirv
from vkdiff.device.transports import watchdog
from vkdiff.device.boundary import (BindingKindError, DeviceLimitError, DispatchError, DtypeMismatchError,
                                    OutOfBoundsError)
from vkdiff.device.runtime.resources import Tensor

_SAMPLE_TYPES = {"float": "unfilterable-float", "sint": "sint", "uint": "uint"}


@dataclasses.dataclass(kw_only=True, frozen=True)
class Pipeline:
    """A loaded compute pipeline and what it expects."""

    handle: Any
    """``GPUComputePipeline``."""
    layout: Any
    """``GPUBindGroupLayout`` of group 0."""
    reflection: spirv.Reflection
    """Reflection of the transformed module."""
    local_size: tuple[int, int, int]
    """Workgroup size baked into the module."""
    infinities_clamped: int = 0
    """Infinite float constants replaced by the largest finite value (``spirv.clamp_infinite_constants``)."""
    module: bytes = b""
    """The SPIR-V as loaded (every transform applied): what a repro replays."""
    spec: dict = dataclasses.field(default_factory=dict)
    """Specialization constants given at pipeline creation (raw Vulkan; through wgpu they are baked into
    ``module``), workgroup size ids 0–2 excluded."""


def layout_entry(binding: spirv.Binding) -> dict:
    """The wgpu bind-group layout entry of a reflected binding (a trace records it on either transport)."""
    import wgpu

    entry: dict[str, Any] = {"binding": binding.binding, "visibility": wgpu.ShaderStage.COMPUTE}
    if binding.kind == "storage-buffer":
        entry["buffer"] = {"type": "storage"}
    elif binding.kind == "uniform-buffer":
        entry["buffer"] = {"type": "uniform"}
    elif binding.kind == "storage-texture":
        entry["storage_texture"] = {"access": binding.access, "format": binding.format,
                                    "view_dimension": binding.dim}
    else:
        entry["texture"] = {"sample_type": _SAMPLE_TYPES[binding.sample_type], "view_dimension": binding.dim}
    return entry


BAKED = "baked"
"""Cache folder of transformed modules: a runner with them needs no spirv-opt."""
BAKED_USED: set[str] = set()
"""Keys of the baked modules this process used (what a saved program's runner needs through wgpu)."""
BAKED_FORMAT = b"vkdiff-baked/2"
"""Part of a baked module's key; entries of this format start with a JSON line of what they were made from."""


@functools.lru_cache(maxsize=None)
def _transforms_version() -> str:
    """The transforms are part of a baked module's key: changing them rebakes."""
    return hashlib.sha256(Path(spirv.__file__).read_bytes()).hexdigest()[:12]


def bake(spv: bytes, spec_constants: Mapping[int, int | float | bool],
         local_size: tuple[int, int, int]) -> tuple[bytes, int]:
    """Every transform naga needs, uncached: the transformed module and how many infinities were clamped."""
    baked = spirv.rewrite_combined_samplers(spirv.rewrite_integer_smod(spirv.fold_float_conversions(
        spirv.bake_spec_constants(spv, dict(spec_constants), local_size))))
    module, clamped = spirv.clamp_infinite_constants(baked)
    return module, clamped


def prepare_module(spv: bytes, spec_constants: Mapping[int, int | float | bool],
                   local_size: tuple[int, int, int]) -> tuple[bytes, int]:
    """Apply every transform naga needs: bake spec constants and workgroup size, rewrite integer ``OpSMod`` and
    samplers, clamp infinite literals; also returns how many infinities were clamped.

    The result is a cache entry keyed by the module, the values and the transforms, so a runner whose cache holds
    it needs no spirv-opt (a corrupt entry is discarded, rebuilt and reported). The entry records what it was made
    from, so ``vkdiff cache verify --rebuild`` can make it again (``rebaked``).

    Raises:
        SpirvOptMissingError: the entry is not cached and spirv-opt is not installed.
    """
    spec = sorted(spec_constants.items())
    key = hashlib.sha256(b"\0".join([BAKED_FORMAT, spv, repr(spec).encode(), repr(tuple(local_size)).encode(),
                                     _transforms_version().encode()])).hexdigest()[:32]
    path = cache_dir() / BAKED / f"{key}.spv"
    BAKED_USED.add(key)
    try:
        _, clamped, module = baked_record(read_entry(path))
        return module, clamped
    except FileNotFoundError:
        pass
    except (CacheCorruptError, ValueError) as exc:
        record_repair(exc if isinstance(exc, CacheCorruptError) else CacheCorruptError(path, f"bad record: {exc}"))
        path.unlink(missing_ok=True)
    module, clamped = bake(spv, spec_constants, local_size)
    made_from = {"source": hashlib.sha256(spv).hexdigest(), "spec": [[k, v] for k, v in spec],
                 "local_size": list(local_size), "transforms": _transforms_version()}
    write_entry(path, json.dumps(made_from).encode() + b"\n" + int(clamped).to_bytes(4, "little") + module)
    return module, clamped


def baked_record(payload: bytes) -> tuple[dict[str, Any], int, bytes]:
    """(what the entry was made from, infinities clamped, the module) of a baked entry's payload.

    Raises:
        ValueError: not a record of this format.
    """
    head, newline, rest = payload.partition(b"\n")
    made_from = json.loads(head) if newline else None
    if not isinstance(made_from, dict) or len(rest) < 4 or not isinstance(made_from.get("source"), str):
        raise ValueError("not a baked module record")
    return made_from, int.from_bytes(rest[:4], "little"), rest[4:]


def rebaked(path: Path, sources: Mapping[str, bytes], *, repair: bool = False) -> tuple[str, str]:
    """(``sound`` / ``corrupt`` / ``not checked``, why) of a baked entry made again from its source module, when
    ``sources`` (sha256 → module, modules a rebuild found sound) holds it; with ``repair`` a differing one is
    deleted (made again when next used)."""
    try:
        payload = read_entry(path)
        if not payload.startswith(b"{"):
            return "not checked", "an earlier vkdiff's entry (no record of its source), which this one never reads"
        made_from, clamped, module = baked_record(payload)
        spec = {int(k): v for k, v in made_from["spec"]}
        local_size = tuple(int(n) for n in made_from["local_size"])
    except (CacheCorruptError, ValueError, TypeError, KeyError) as exc:
        if repair:
            path.unlink(missing_ok=True)
        return "corrupt", getattr(exc, "why", f"bad record: {exc}")
    if made_from.get("transforms") != _transforms_version():
        return "not checked", "made by another version of vkdiff's transforms"
    if made_from["source"] not in sources:
        return "not checked", "its source module is not one of the checked tree's"
    try:
        again = bake(sources[made_from["source"]], spec, local_size)
    except spirv.SpirvOptMissingError as exc:
        return "not checked", str(exc)
    except spirv.SpirvError as exc:
        return "corrupt", f"its recorded source and values do not transform: {exc}"
    if again == (module, clamped):
        return "sound", ""
    if repair:
        path.unlink(missing_ok=True)
    return "corrupt", "differs from its source module transformed again" + ("; deleted" if repair else "")


def has_baked_modules() -> bool:
    """Whether the cache holds transformed modules (then spirv-opt is needed only for ones it lacks)."""
    return any((cache_dir() / BAKED).glob("*.spv"))


class PipelineCache:
    """Pipelines per device keyed by (SPIR-V hash, spec constants, local size); each made by the device's transport
    (``Transport.create_pipeline``) once its workgroup size fits the device."""

    def __init__(self, device: Any):
        self.device = device
        self._pipelines: dict[tuple, Pipeline] = {}

    def get(self, spv: bytes, spec_constants: Mapping[int, int | float | bool],
            local_size: tuple[int, int, int], label: str = "kernel") -> Pipeline:
        key = (hashlib.sha256(spv).hexdigest(), tuple(sorted(spec_constants.items())), tuple(local_size))
        if key not in self._pipelines:
            self._pipelines[key] = self._create(spv, spec_constants, local_size, label)
        return self._pipelines[key]

    def _create(self, spv, spec_constants, local_size, label) -> Pipeline:
        limits = self.device.limits
        if local_size[0] * local_size[1] * local_size[2] > limits["max-compute-invocations-per-workgroup"]:
            raise DeviceLimitError(f"{label}: local size {local_size} exceeds max-compute-invocations-per-workgroup "
                                   f"{limits['max-compute-invocations-per-workgroup']}")
        for axis, size in zip("xyz", local_size):
            key = f"max-compute-workgroup-size-{axis}"
            if size > limits.get(key, size):
                raise DeviceLimitError(f"{label}: local size {local_size} exceeds {key} {limits[key]}")
        return self.device.create_pipeline(spv, spec_constants, local_size, label)


def _resource(binding: spirv.Binding, value: Any, label: str) -> Any:
    handle = value.handle if isinstance(value, Tensor) else value
    wants_buffer = binding.kind in ("storage-buffer", "uniform-buffer")
    if wants_buffer != (not hasattr(handle, "create_view")):  # a texture on either transport has create_view
        got = value.storage if isinstance(value, Tensor) else type(handle).__name__
        name = f" ({binding.name})" if binding.name else ""
        raise BindingKindError(f"{label}: binding {binding.binding}{name} expects a {binding.kind}, launcher gave {got}")
    if wants_buffer:
        return {"buffer": handle, "offset": 0, "size": handle.size}
    return handle.create_view()


_KIND = {"f": "float", "i": "int", "u": "int", "b": "int"}
"""Scalar kinds a binding and a tensor must agree on (int/uint differ only in how bits are read)."""


def _declared(binding: spirv.Binding) -> tuple[str, int] | None:
    """(kind, bits) a binding declares for its elements, None when reflection does not say."""
    if binding.kind == "storage-texture":
        found = re.fullmatch(r"(?:r|rg|rgba)(\d+)(float|sint|uint|unorm|snorm)", binding.format)
        return (("float" if found.group(2) in ("float", "unorm", "snorm") else "int"), int(found.group(1))) \
            if found else None
    if binding.kind == "sampled-texture":
        return ("float" if binding.sample_type == "float" else "int"), 0
    if binding.kind == "storage-buffer" and binding.element:
        name = binding.element
        return ("float" if name.startswith("float") else "int"), int(name.lstrip("uintfloa"))
    return None


def binding_mismatch(binding: spirv.Binding, tensor: Tensor) -> str | None:
    """Why ``tensor`` cannot be what ``binding`` reads or writes, None when they agree.

    Kinds (float vs integer) must agree for every binding; widths must agree for
    storage textures, whose format is the allocation's. A buffer of 8-bit elements may be
    read as 32-bit words when the device lacks 8-bit storage buffers (ET-VK's
    ``nobitw8buffer`` shaders); int8x4 tensors are int32 words.
    """
    declared = _declared(binding)
    if declared is None or tensor.spec is None:
        return None
    kind, bits = declared
    dtype = tensor.dtype
    have_kind, have_bits = _KIND[dtype.kind], dtype.itemsize * 8
    if kind != have_kind:
        return f"declares {kind}{bits or ''} elements, the tensor is {tensor.spec.dtype} in {tensor.storage}"
    if binding.kind == "storage-texture" and bits != have_bits:
        return f"declares a {binding.format} image, the tensor is {tensor.spec.dtype} ({tensor.storage})"
    if binding.kind == "storage-buffer" and bits != have_bits and not (have_bits == 8 and bits == 32):
        return f"declares {binding.element} elements, the tensor is {tensor.spec.dtype} in a buffer"
    return None


def check_bindings(pipeline: Pipeline, resources: Sequence[Any], label: str) -> None:
    """Raise ``DtypeMismatchError`` naming the first binding whose reflected type differs from its tensor."""
    for binding in pipeline.reflection.bindings:
        if binding.group or binding.binding >= len(resources) or not isinstance(resources[binding.binding], Tensor):
            continue
        why = binding_mismatch(binding, resources[binding.binding])
        if why:
            name = f" ({binding.name})" if binding.name else ""
            raise DtypeMismatchError(f"{label}: binding {binding.binding}{name} {why}")


def workgroup_count(global_size: Sequence[int], local_size: Sequence[int]) -> tuple[int, int, int]:
    """ET-VK dispatches ``div_up(global, local)`` workgroups per axis."""
    return tuple(-(-int(g) // int(l)) for g, l in zip(global_size, local_size))  # type: ignore[return-value]


def dispatch(device: Any, pipeline: Pipeline, resources: Sequence[Any], global_size: Sequence[int],
             immediates: bytes = b"", label: str = "kernel", batch: "Batch | None" = None,
             bind_groups: dict | None = None) -> None:
    """Bind ``resources[i]`` to binding ``i``, push ``immediates`` and dispatch ``global_size`` invocations.

    With ``batch``, the dispatch is encoded into the batch's command buffer, submitted with the others at
    ``Batch.flush`` (as ET-VK records a graph's dispatches into one command buffer); else it runs first in the
    device's next submission where the transport defers (raw Vulkan: a prepack dispatch rides with the next
    execute, as ET-VK's prepack command buffer precedes it), or is submitted now.

    As in ET-VK, the launcher provides every descriptor slot of the op; slots the compiled
    shader does not declare (glslc drops unused ones, e.g. the bias of older trees) are
    left unbound.

    ``bind_groups`` (a graph's): bind groups made earlier for this pipeline and these very resources, reused as
    ET-VK reuses the descriptor sets of a recorded command buffer (the graph keeps its resources alive).

    Raises:
        DispatchError: wgpu rejected the bind group or the dispatch (wrong resources), or a
            binding the shader declares has no resource.
        DeviceLimitError: the workgroup count exceeds the device limit.
    """
    bindings = [b for b in pipeline.reflection.bindings if b.group == 0]
    missing = [b.binding for b in bindings if b.binding >= len(resources)]
    if missing:
        raise DispatchError(f"{label}: shader declares bindings {missing}, launcher gave {len(resources)} resources")
    check_bindings(pipeline, resources, label)
    groups = workgroup_count(global_size, pipeline.local_size)
    if max(groups) > device.limits["max-compute-workgroups-per-dimension"]:
        raise DeviceLimitError(f"{label}: {groups} workgroups exceed max-compute-workgroups-per-dimension")
    if hasattr(device, "record_dispatch"):
        device.record_dispatch(pipeline, [layout_entry(b) for b in bindings],
                               [(b.binding, resources[b.binding]) for b in bindings], groups, immediates, label)
    key = (id(pipeline), tuple(id(resources[b.binding]) for b in bindings))
    bind_group = None if bind_groups is None else bind_groups.get(key)
    if bind_group is None:
        entries = [{"binding": b.binding, "resource": _resource(b, resources[b.binding], label)} for b in bindings]
        bind_group = device.call(DispatchError, f"{label}: bind group", device.create_bind_group,
                              layout=pipeline.layout, entries=entries)
        if bind_groups is not None:
            bind_groups[key] = bind_group
    size = pipeline.reflection.immediate_size
    if len(immediates) < size:
        raise DispatchError(f"{label}: shader reads {size} bytes of push constants, launcher gave {len(immediates)}")

    def record(encoder: Any) -> None:
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(pipeline.handle)
        compute.set_bind_group(0, bind_group)
        if size:
            compute.set_immediates(0, immediates, 0, size)
        if min(groups) > 0:
            compute.dispatch_workgroups(*groups)
        compute.end()

    if batch is not None:
        batch.add(f"{label} {groups}", record, ranges=_buffer_ranges(bindings, resources), shader=label,
                  module=pipeline.module)
        return
    if not hasattr(device, "record_dispatch") and device.defer(record):
        watchdog.note_dispatch(f"{label} {groups}")
        return

    def submit() -> None:
        encoder = device.create_command_encoder(label=label)
        record(encoder)
        device.queue.submit([encoder.finish()])

    try:
        device.call(DispatchError, f"{label}: dispatch", submit)
    except OutOfBoundsError as exc:  # a prepack dispatch, submitted alone
        raise locate_out_of_bounds(exc, [Pending(label, record, None, label, _buffer_ranges(bindings, resources),
                                                 pipeline.module)]) from None
    watchdog.note_dispatch(f"{label} {groups}")


def _buffer_ranges(bindings: Sequence[Any], resources: Sequence[Any]) -> dict[int, int]:
    """Bytes bound at each buffer binding (what a validation layer's out-of-bounds report gives as descriptor size)."""
    ranges = {}
    for b in bindings:
        handle = resources[b.binding].handle if isinstance(resources[b.binding], Tensor) else resources[b.binding]
        if b.kind in ("storage-buffer", "uniform-buffer"):
            ranges[b.binding] = int(handle.size)
    return ranges


DISPATCH_INDEX = re.compile(r"Compute Dispatch Index (0x[0-9a-fA-F]+|\d+)")
DESCRIPTOR_SIZE = re.compile(r"Descriptor size is (\d+)")
INSTRUCTION_INDEX = re.compile(r"Shader Instruction Index = (\d+)")


@dataclasses.dataclass
class Pending:
    """One command of a batch: what it is, how to record it, the node that added it; dispatches also carry their
    shader and buffer ranges by binding."""

    what: str
    record: Any
    node: Any
    shader: str | None = None
    ranges: dict[int, int] | None = None
    module: bytes | None = None
    """The SPIR-V the device ran (an instruction index of a layer report points into it)."""
    noted: bool = True
    """Named to the watchdog as dispatched (a readback copy is not: a hang names the dispatches before it)."""


def locate_out_of_bounds(exc: OutOfBoundsError, pending: Sequence[Pending]) -> OutOfBoundsError:
    """A validation layer's out-of-bounds report named by node, shader and binding: its dispatch index among the
    submission's dispatches, its descriptor's size among that dispatch's buffer ranges (several bindings of that
    size are all named)."""
    text = str(exc)
    index, size = DISPATCH_INDEX.search(text), DESCRIPTOR_SIZE.search(text)
    dispatches = [p for p in pending if p.shader is not None]
    if index is None or int(index.group(1), 0) >= len(dispatches):
        return exc
    hit = dispatches[int(index.group(1), 0)]
    instruction = INSTRUCTION_INDEX.search(text)
    access = (spirv.access_at(hit.module, int(instruction.group(1)))
              if instruction is not None and hit.module is not None else None)
    if access is not None:
        where = f"binding {access[0]} ({access[1]})"
    else:
        bindings = [b for b, n in (hit.ranges or {}).items() if size is not None and n == int(size.group(1))]
        where = f"binding {' or '.join(map(str, bindings))}" if bindings else "a binding"
    node = f" (node {hit.node})" if hit.node is not None else ""
    located = OutOfBoundsError(f"{hit.shader} {where}{node}: {text}")
    located.shader, located.node_index = hit.shader, hit.node
    return located


class Batch:
    """Dispatches encoded into one command buffer and submitted together.

    A submission that wgpu rejects is replayed one dispatch per submission, so the error names
    the dispatch (and the node that added it) as an unbatched run would.
    """

    def __init__(self, device: Any, exact: bool = False, keep: bool = False):
        self.device = device
        self.exact = exact
        """Raw Vulkan only: no barrier between the recorded commands but those added (ET-VK's)."""
        self.keep = keep
        """Raw Vulkan only: keep the command buffer of the flush for ``queue.resubmit``."""
        self.recorded: Any = None
        """The kept command buffer of the latest flush."""
        self.pending: list[Pending] = []
        self.node: Any = None
        """The node whose dispatches are being added (named by an error of the submission)."""

    def add(self, what: str, record: Any, ranges: dict[int, int] | None = None, shader: str | None = None,
            module: bytes | None = None, noted: bool = True) -> None:
        self.pending.append(Pending(what, record, self.node, shader, ranges, module, noted))

    def flush(self) -> None:
        """Submit what is pending (nothing when empty)."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []

        def submit_all() -> None:
            encoder = self.device.create_command_encoder(label="batch")
            if self.exact:
                encoder.exact = True
            for entry in pending:
                entry.record(encoder)
            if self.keep:
                self.recorded = self.device.queue.submit([encoder.finish()], keep=True)
            else:
                self.device.queue.submit([encoder.finish()])

        for entry in pending:
            if entry.noted:
                watchdog.note_dispatch(entry.what)
        try:
            self.device.call(DispatchError, f"batch of {len(pending)} dispatches", submit_all)
        except OutOfBoundsError as exc:
            raise locate_out_of_bounds(exc, pending) from None
        except DispatchError:
            self._attribute(pending)
            raise

    def _attribute(self, pending: list[Pending]) -> None:
        """Submit each dispatch alone; the first wgpu rejects raises with its label and node."""
        for what, record, node in ((p.what, p.record, p.node) for p in pending):
            def one(record=record, what=what) -> None:
                encoder = self.device.create_command_encoder(label=what)
                record(encoder)
                self.device.queue.submit([encoder.finish()])

            try:
                self.device.call(DispatchError, f"{what}: dispatch", one)
            except DispatchError as exc:
                if node is not None:
                    exc.node_index = node
                raise
