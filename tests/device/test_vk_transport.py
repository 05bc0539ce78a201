"""The raw Vulkan transport (``--transport vulkan``): glslc's SPIR-V as built, spec constants through
``VkSpecializationInfo``, features the device has, and the graph runtime unchanged on top."""

from __future__ import annotations

import dataclasses
import struct

import numpy as np
import pytest

from tests.testutils import compile_glsl, requires_test_spirv, requires_tree, requires_vulkan
from vkdiff.device import spirv
from vkdiff.device.boundary import ShaderUnsupportedError
from vkdiff.device.dispatch import PipelineCache, dispatch
from vkdiff.device.resources import buffer_tensor, read
from vkdiff.device.vk_commands import missing_features, specialization


@pytest.fixture(scope="module")
def raw_adapter():
    """(DeviceInfo, adapter) of the first Vulkan device through raw Vulkan, whatever the session's transport."""
    from vkdiff.device.adapters import select

    found = select(via="vulkan")
    if not found:
        pytest.skip("NOT_RUN: no Vulkan device (install mesa-vulkan-drivers)")
    return found[0]


@pytest.fixture(scope="module")
def raw(raw_adapter):
    from vkdiff.device.adapters import create_device

    return create_device(*raw_adapter)


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
def test_a_module_naga_cannot_load_runs_exactly_as_built(raw, rng):
    """8-bit storage and int16 arithmetic, specialised through VkSpecializationInfo: the output is numpy's, wrap-around
    of int16 included. The pipeline holds glslc's bytes, untouched."""
    spv = compile_glsl("spec_kinds.glsl")
    n, bias, mul = 1000, -7, 300
    pipeline = PipelineCache(raw).get(spv, {3: True, 4: mul, 5: 1, 6: 0.5}, (32, 1, 1), label="spec_kinds")
    assert pipeline.module == spv
    x = rng.integers(-128, 128, n).astype(np.int8)
    out = buffer_tensor(raw, np.full(n, 0x7EADBEEF, np.int32), "out")
    dispatch(raw, pipeline, [out, buffer_tensor(raw, x, "x")], (n, 1, 1), struct.pack("<ii", n, bias))
    y = (x.astype(np.int16) * np.int16(mul) + np.int16(bias)).astype(np.int32) << 1
    np.testing.assert_array_equal(read(raw, out), (-y * 0.5).astype(np.int32))
    assert np.sum(np.abs(x.astype(np.int32) * mul + bias) > 32767) > 0, "the data must exercise int16 wrap-around"


@requires_vulkan
@requires_test_spirv
def test_a_feature_the_device_lacks_is_not_supported_naming_it(raw):
    spv = compile_glsl("spec_kinds.glsl")
    lacking = dataclasses.replace(raw.raw, features={**raw.raw.features, "storageBuffer8BitAccess": False})
    without = type("Lacking", (), {"raw": lacking})()
    assert missing_features(without, spirv.capabilities(spv)) == [
        "storageBuffer8BitAccess (capability StorageBuffer8BitAccess)"]
    raw.raw, kept = lacking, raw.raw
    try:
        with pytest.raises(ShaderUnsupportedError, match=r"needs storageBuffer8BitAccess .* which .* lacks"):
            PipelineCache(raw).get(spv, {}, (8, 1, 1), label="spec_kinds")
    finally:
        raw.raw = kept


@requires_vulkan
@requires_tree
@pytest.mark.parametrize("case_id", [
    "relu[C3-H5-W6-fp32-texture3d]",
    "linear_q4gsw[M4-K64-N40-g32-fp16-texture3d]",
    "weight_int8pack_mm[M5-K30-N16-fp32-buffer-fallback]",
    "where[C3-H5-W6-fp32-buffer-same]",
])
def test_kernel_cases_pass_through_the_exact_spirv(et_tree, raw_adapter, case_id):
    """A plain kernel; the fp16 4-bit GEMM whose int16 arithmetic naga cannot load (the fp16 linear of every phone
    LLM); an 8-bit storage buffer kernel; a module with a NaN literal: NOT_SUPPORTED through wgpu, PASS here."""
    from vkdiff.cases.kernels import all_cases
    from vkdiff.device.build import ShaderBuilder
    from vkdiff.device.context import DeviceContext
    from vkdiff.harness.kernels import run_case

    (case,) = [c for c in all_cases() if c.id == case_id]
    result = run_case(DeviceContext(*raw_adapter, ShaderBuilder(et_tree)), case)
    assert result.device_info["transport"] == "vulkan"
    assert result.status == "PASS", result.reason
