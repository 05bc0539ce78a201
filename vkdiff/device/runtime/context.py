"""One selected device with its shader builder and pipeline cache: what a launcher runs on."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping

from vkdiff.device.runtime import workgroups
from vkdiff.device.runtime.traits import device_traits
from vkdiff.device.transports.adapters import DeviceInfo, create_device
from vkdiff.device.transports.transport import Transport
from vkdiff.device.shaders.build import BuiltShader, ShaderBuilder
from vkdiff.device.shaders.dispatch import Pipeline, PipelineCache
from vkdiff.datamodel.settings import RunSettings


class VariantMissingError(LookupError):
    """The ExecuTorch tree defines none of the shader variants a launcher can use (→ ``NOT_RUN``)."""

    def __init__(self, message: str, name: str = ""):
        super().__init__(message)
        self.name = name
        """The variant asked for."""


class DeviceContext:
    """A wgpu device plus the ET-VK shaders of one tree, built and loaded on demand."""

    def __init__(self, info: DeviceInfo, adapter: Any, builder: ShaderBuilder, limits_profile: str | None = None, *,
                 settings: RunSettings = RunSettings(), device: Transport | None = None):
        self.info = info
        self.limits_profile = limits_profile
        """Name of the mobile limits profile the device was created with (``vkdiff.device.transports.limits``), or None."""
        self.device = device if device is not None else create_device(info, adapter, limits_profile)
        self.opened = self.device
        """The device as opened: traits are probed on it, never through a wrapper a caller puts in ``device`` (a
        repro's trace records only the case's own work)."""
        self.builder = builder
        self._info_dict: dict[str, Any] | None = None
        self.pipelines = PipelineCache(self.device)
        self.validate = bool(settings.validate)
        """Check each graph's recorded stream, with the tree's own barriers, for unordered accesses (``FAIL_SYNC``)."""
        self.local_wg = workgroups.parse(settings.local_wg)
        """``--local-wg``: the local workgroup size every dispatch (or one node's) takes instead of ET-VK's pick."""
        self._variants = builder.variants()
        self._kernels: dict[tuple, tuple[Pipeline, BuiltShader]] = {}
        self.layout_maps: dict[tuple, Any] = {}
        """Where each element of a placement lives in raw storage, by (route, storage, layout, sizes): measured once
        per device by ET-VK's staging shader (``staging.element_index``)."""

    @contextlib.contextmanager
    def recorded(self) -> Iterator[Any]:
        """The device wrapped in a recording ``TraceDevice`` with pipeline caches of its own, so that every module and
        pipeline its work creates is recorded; the device and caches as they were afterwards (a repro taken
        mid-run leaves the run's context untouched)."""
        from vkdiff.device.transports.trace import TraceDevice

        saved = self.device, self.pipelines, self._kernels
        self.device = TraceDevice(saved[0])
        self.pipelines, self._kernels = PipelineCache(self.device), {}
        try:
            yield self.device
        finally:
            self.device, self.pipelines, self._kernels = saved

    @property
    def info_dict(self) -> dict[str, Any]:
        """``info`` as results record it, with the device's probed ``traits`` (``vkdiff.device.runtime.traits``):
        built once per device, on first use."""
        if self._info_dict is None:
            self._info_dict = dict(self.info.to_dict(), traits=device_traits(self.opened, self.info))
        return self._info_dict

    def has(self, name: str) -> bool:
        """Whether the tree defines shader variant ``name``."""
        return name in self._variants

    def defines_family_of(self, name: str) -> bool:
        """Whether the tree defines another variant of ``name``'s shader family (its first two name tokens:
        ``conv2d_dw_*`` for ``conv2d_dw_sned_float``)."""
        stem = "_".join(name.split("_")[:2]) + "_"
        return any(v.startswith(stem) for v in self._variants)

    def require(self, name: str) -> str:
        """``name`` if the tree defines it.

        Raises:
            VariantMissingError: the tree has no such variant.
        """
        if name not in self._variants:
            raise VariantMissingError(f"shader variant {name} is not defined by {self.builder.glsl_dir}", name)
        return name

    def kernel(self, name: str, spec_constants: Mapping[int, int | float | bool],
               local_size: tuple[int, int, int]) -> tuple[Pipeline, BuiltShader]:
        """Build (cached) and load (cached) one variant with its spec constants baked in.

        Memoised per (variant, spec constants, local size) for this device: a warm dispatch
        neither reads the SPIR-V cache nor hashes the module again.
        """
        key = (self.require(name), tuple(sorted(spec_constants.items())), tuple(local_size))
        if key not in self._kernels:
            shader = self.builder.build(name)
            self._kernels[key] = self.pipelines.get(shader.spv, spec_constants, local_size, label=name), shader
        return self._kernels[key]
