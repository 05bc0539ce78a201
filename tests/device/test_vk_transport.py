"""The raw Vulkan transport (``--transport vulkan``): glslc's SPIR-V as built, spec constants through
``VkSpecializationInfo``, features the device has, and the graph runtime unchanged on top. Device work runs in a
process of its own (``testutils.isolated``)."""

from __future__ import annotations

import dataclasses
import struct

import numpy as np
import pytest

from tests.testutils import compile_glsl, isolated, requires_test_spirv, requires_tree, requires_vulkan
from vkdiff.device.shaders import spirv
from vkdiff.device.transports.vk_commands import missing_features, specialization


def _raw_device():
    from vkdiff.device.transports.adapters import create_device, select

    found = select(via="vulkan")
    return found[0], create_device(*found[0])


def spec_kinds_run(spv: bytes, n: int, bias: int, mul: int) -> tuple[bool, np.ndarray, np.ndarray]:
    """In the child: the module dispatched as built; (glslc's bytes kept, output, input)."""
    from vkdiff.device.shaders.dispatch import PipelineCache, dispatch
    from vkdiff.device.runtime.resources import buffer_tensor, read

    _, raw = _raw_device()
    pipeline = PipelineCache(raw).get(spv, {3: True, 4: mul, 5: 1, 6: 0.5}, (32, 1, 1), label="spec_kinds")
    x = np.random.default_rng(7).integers(-128, 128, n).astype(np.int8)
    out = buffer_tensor(raw, np.full(n, 0x7EADBEEF, np.int32), "out")
    dispatch(raw, pipeline, [out, buffer_tensor(raw, x, "x")], (n, 1, 1), struct.pack("<ii", n, bias))
    return pipeline.module == spv, read(raw, out), x


def lacking_run(spv: bytes) -> tuple[list[str], str]:
    """In the child: the device told it lacks 8-bit storage; (what is missing, the load error)."""
    from vkdiff.device.shaders.dispatch import PipelineCache

    _, raw = _raw_device()
    raw.raw = dataclasses.replace(raw.raw, features={**raw.raw.features, "storageBuffer8BitAccess": False})
    lacking = missing_features(raw, spirv.capabilities(spv))
    try:
        PipelineCache(raw).get(spv, {}, (8, 1, 1), label="spec_kinds")
    except Exception as exc:  # noqa: BLE001 - returned to the parent for its assertion
        return lacking, f"{type(exc).__name__}: {exc}"
    return lacking, ""


def case_run(tree, case_id: str) -> tuple[str, str, str]:
    """In the child: one kernel case through raw Vulkan; (status, reason, transport)."""
    from vkdiff.cases.kernels import all_cases
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.runtime.context import DeviceContext
    from vkdiff.harness.kernels import run_case

    (case,) = [c for c in all_cases() if c.id == case_id]
    adapter, _ = _raw_device()
    result = run_case(DeviceContext(*adapter, ShaderBuilder(tree)), case)
    return result.status, result.reason, result.device_info["transport"]


@requires_test_spirv
def test_spec_constant_types_are_read_from_the_module():
    spv = compile_glsl("spec_kinds.glsl")
    assert spirv.spec_constant_types(spv) == {0: ("uint", 32), 1: ("uint", 32), 2: ("uint", 32), 3: ("bool", 32),
                                              4: ("int", 32), 5: ("uint", 32), 6: ("float", 32)}


@requires_test_spirv
def test_specialization_packs_each_value_in_its_declared_type_and_drops_undeclared_ids():
    spv = compile_glsl("spec_kinds.glsl")
    entries, data = specialization(spv, {0: 32, 1: 1, 2: 1, 3: True, 4: -3, 6: 0.5, 9: 7})
    assert [e[0] for e in entries] == [0, 1, 2, 3, 4, 6]
    assert all(size == 4 for _, _, size in entries)
    assert struct.unpack("<IIIIif", data) == (32, 1, 1, 1, -3, 0.5)


@requires_vulkan
@requires_test_spirv
def test_a_module_naga_cannot_load_runs_exactly_as_built():
    """8-bit storage and int16 arithmetic, specialised through VkSpecializationInfo: the output is numpy's, wrap-around
    of int16 included. The pipeline holds glslc's bytes, untouched."""
    n, bias, mul = 1000, -7, 300
    kept, got, x = isolated(spec_kinds_run, compile_glsl("spec_kinds.glsl"), n, bias, mul)
    assert kept
    y = (x.astype(np.int16) * np.int16(mul) + np.int16(bias)).astype(np.int32) << 1
    np.testing.assert_array_equal(got, (-y * 0.5).astype(np.int32))
    assert np.sum(np.abs(x.astype(np.int32) * mul + bias) > 32767) > 0, "the data must exercise int16 wrap-around"


@requires_vulkan
@requires_test_spirv
def test_a_feature_the_device_lacks_is_not_supported_naming_it():
    lacking, error = isolated(lacking_run, compile_glsl("spec_kinds.glsl"))
    assert lacking == ["storageBuffer8BitAccess (capability StorageBuffer8BitAccess)"]
    assert error.startswith("ShaderUnsupportedError: spec_kinds: needs storageBuffer8BitAccess "), error
    assert error.endswith("lacks")


@requires_vulkan
@requires_tree
@pytest.mark.parametrize("case_id", [
    "relu[C3-H5-W6-fp32-texture3d]",
    "linear_q4gsw[M4-K64-N40-g32-fp16-texture3d]",
    "weight_int8pack_mm[M5-K30-N16-fp32-buffer-fallback]",
    "where[C3-H5-W6-fp32-buffer-same]",
])
def test_kernel_cases_pass_through_the_exact_spirv(et_tree, case_id):
    """A plain kernel; the fp16 4-bit GEMM whose int16 arithmetic naga cannot load (the fp16 linear of every phone
    LLM); an 8-bit storage buffer kernel; a module with a NaN literal: NOT_SUPPORTED through wgpu, PASS here."""
    status, reason, transport = isolated(case_run, et_tree, case_id)
    assert transport == "vulkan"
    assert status == "PASS", reason


def deferred_run(spv: bytes, n: int) -> tuple[bool, np.ndarray, bool, np.ndarray, np.ndarray, np.ndarray]:
    """In the child: a dispatch submitted alone is deferred into the next submission; the host reading its output,
    then (a second one) the host overwriting its input, each wait for it to run first."""
    from vkdiff.device.shaders.dispatch import PipelineCache, dispatch
    from vkdiff.device.runtime import resources

    _, raw = _raw_device()
    pipeline = PipelineCache(raw).get(spv, {3: 2}, (64, 1, 1), label="scale_add")
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    out = resources.buffer_tensor(raw, np.full(n, np.nan, np.float32), "out")
    inp = resources.buffer_tensor(raw, x, "x")
    ubo = resources.uniform(raw, np.array([n, 1, 1, 1], np.int32).tobytes())
    dispatch(raw, pipeline, [out, inp, ubo], (n, 1, 1), struct.pack("<fi", 1.5, 7))
    resources.buffer_tensor(raw, np.ones(n, np.float32), "fresh")  # no deferred dispatch can use a new buffer
    deferred_then_read = raw.queue.dispatches_pending
    first = resources.read(raw, out)
    dispatch(raw, pipeline, [out, inp, ubo], (n, 1, 1), struct.pack("<fi", -2.0, 1))
    deferred_then_written = raw.queue.dispatches_pending
    resources.write(raw, inp, np.zeros(n, np.float32))
    return deferred_then_read, first, deferred_then_written, resources.read(raw, out), x, resources.read(raw, inp)


@requires_vulkan
@requires_test_spirv
def test_a_dispatch_submitted_alone_runs_before_the_host_reads_or_writes_what_it_uses():
    """Raw Vulkan queues a lone dispatch (a prepack) into the next submission, as ET-VK's prepack command buffer
    precedes the execute; a host read of its output or a host write of its input first runs it, a new buffer's
    data does not."""
    n = 300
    read_deferred, first, write_deferred, second, x, overwritten = isolated(
        deferred_run, compile_glsl("scale_add.glsl"), n)
    assert read_deferred and write_deferred, "both dispatches were deferred"
    np.testing.assert_array_equal(first, x * np.float32(1.5) + np.float32(4 + 7 + 64))
    np.testing.assert_array_equal(second, x * np.float32(-2.0) + np.float32(4 + 1 + 64))
    assert not overwritten.any()
