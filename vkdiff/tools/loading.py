"""Load every shader variant of a tree on a device: what the transport can run, before any case does.

Each variant is built (glslc, cached) and loaded as a compute pipeline with its default spec constants and a
4×4×4 workgroup. Through wgpu, naga re-translates the module first; through raw Vulkan the driver gets glslc's
bytes. A variant ends ``LOADED``, ``NOT_SUPPORTED`` (the message names the feature or capability missing, and
whether the device or naga lacks it), ``BUILD_FAIL`` (codegen or glslc) or ``LOAD_FAIL`` (the driver or naga
refused it for any other reason: a finding).
"""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Any, Iterable, Iterator

from vkdiff.device.boundary import DeviceError, ShaderLoadError, ShaderUnsupportedError
from vkdiff.device.shaders.build import BuildError

GLSL_EXTENSION_FEATURES = {"GL_KHR_cooperative_matrix": "cooperativeMatrix",
                           "GL_EXT_integer_dot_product": "shaderIntegerDotProduct"}
"""GLSL extensions a glslc may lack → the device feature their variants need."""

LOCAL_SIZE = (4, 4, 4)
"""Any size every device allows; spec constants 0–2 take it, as ET-VK's ``get_descriptor_set`` prepends them."""


@dataclasses.dataclass(frozen=True)
class LoadResult:
    variant: str
    status: str
    """``LOADED``, ``NOT_SUPPORTED``, ``BUILD_FAIL`` or ``LOAD_FAIL``."""
    reason: str
    seconds: float


def load_one(ctx: Any, name: str) -> LoadResult:
    """Build and load ``name`` on ``ctx`` (a ``DeviceContext``)."""
    started = time.perf_counter()
    try:
        ctx.kernel(name, {}, LOCAL_SIZE)
        status, reason = "LOADED", ""
    except BuildError as exc:
        status, reason = _unbuildable(ctx, str(exc))
    except ShaderUnsupportedError as exc:
        status, reason = "NOT_SUPPORTED", str(exc)
    except (ShaderLoadError, DeviceError) as exc:
        status, reason = "LOAD_FAIL", str(exc)
    return LoadResult(name, status, reason, round(time.perf_counter() - started, 4))


def _unbuildable(ctx: Any, message: str) -> tuple[str, str]:
    """``BUILD_FAIL``, unless glslc lacks an extension whose feature the device lacks too: then the device could not
    run the variant however built, and it is ``NOT_SUPPORTED`` naming that feature."""
    raw = getattr(ctx.device, "raw", None)
    for extension, feature in GLSL_EXTENSION_FEATURES.items():
        if f"extension not supported: {extension}" in message and raw is not None and not raw.features.get(feature):
            return "NOT_SUPPORTED", f"needs {feature}, which {raw.name} lacks (this glslc cannot build {extension})"
    return "BUILD_FAIL", message


def load_variants(ctx: Any, pattern: str | None = None) -> Iterator[LoadResult]:
    """``load_one`` for each variant of the context's tree (matching ``pattern``), in name order."""
    chosen = re.compile(pattern) if pattern else None
    for name in sorted(ctx.builder.variants()):
        if chosen is None or chosen.search(name):
            yield load_one(ctx, name)


def reason_key(result: LoadResult) -> str:
    """What a failure is about, without the variant's name: groups failures with one cause."""
    return re.sub(r"^\S+: ", "", result.reason.replace(result.variant, "*"))[:160]


def summarise(results: Iterable[LoadResult]) -> dict[str, Any]:
    """Counts per status, and per status the distinct reasons with how many variants share each."""
    counts: dict[str, int] = {}
    reasons: dict[str, dict[str, int]] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
        if result.status != "LOADED":
            bucket = reasons.setdefault(result.status, {})
            key = reason_key(result)
            bucket[key] = bucket.get(key, 0) + 1
    return {"counts": counts, "reasons": reasons}
