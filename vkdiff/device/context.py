"""One selected device with its shader builder and pipeline cache: what a launcher runs on."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from vkdiff.device.adapters import DeviceInfo, create_device
from vkdiff.device.build import BuiltShader, ShaderBuilder
from vkdiff.device.dispatch import Pipeline, PipelineCache


class VariantMissingError(LookupError):
    """The ExecuTorch tree defines none of the shader variants a launcher can use (→ ``NOT_RUN``)."""


@dataclasses.dataclass(kw_only=True)
class Launch:
    """What a launcher returns: the output read back and how it was produced."""

    output: Any
    """Output tensor read back to numpy in its logical shape."""
    variant: str
    """ET-VK shader variant that computed the output."""
    unwritten: int
    """Output elements the kernel never wrote (still poisoned)."""
    polyfilled: bool = False
    """True when any shader used had ``dotPacked4x8AccSatEXT`` emulated."""
    shaders: tuple[str, ...] = ()
    """Every variant dispatched (prepack shaders first)."""
    dispatch: dict = dataclasses.field(default_factory=dict)
    """Global/local workgroup sizes and spec constants of the main dispatch."""


class DeviceContext:
    """A wgpu device plus the ET-VK shaders of one tree, built and loaded on demand."""

    def __init__(self, info: DeviceInfo, adapter: Any, builder: ShaderBuilder):
        self.info = info
        self.device = create_device(info, adapter)
        self.builder = builder
        self.pipelines = PipelineCache(self.device)
        self._variants = builder.variants()

    def has(self, name: str) -> bool:
        """Whether the tree defines shader variant ``name``."""
        return name in self._variants

    def require(self, name: str) -> str:
        """``name`` if the tree defines it.

        Raises:
            VariantMissingError: the tree has no such variant.
        """
        if name not in self._variants:
            raise VariantMissingError(f"shader variant {name} is not defined by {self.builder.glsl_dir}")
        return name

    def kernel(self, name: str, spec_constants: Mapping[int, int | float | bool],
               local_size: tuple[int, int, int]) -> tuple[Pipeline, BuiltShader]:
        """Build (cached) and load (cached) one variant with its spec constants baked in."""
        shader = self.builder.build(self.require(name))
        return self.pipelines.get(shader.spv, spec_constants, local_size, label=name), shader
