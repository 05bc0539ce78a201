"""NOT_SUPPORTED means the device (or naga) lacks something: nothing else, and a run of nothing but skips fails."""

from __future__ import annotations

import pytest

from tests.testutils import compile_glsl, main_tree, requires_test_spirv, requires_tree, requires_vulkan
from vkdiff.device.transports import adapters
from vkdiff.device.boundary import ShaderLoadError, ShaderUnsupportedError
from vkdiff.device.transports.wgpu_device import missing_capability
from vkdiff.device.shaders.dispatch import PipelineCache
from vkdiff.entry import cli
from vkdiff.harness import kernels
from vkdiff.store import load
from vkdiff.verdicts.statuses import status_of_exception


@pytest.mark.parametrize("message, capability", [
    ("In wgpuDeviceCreateShaderModule | unsupported capability StorageBuffer8BitAccess", "StorageBuffer8BitAccess"),
    ("= Using `f16` values requires the `naga::valid::Capabilities::FLOAT16` flag", "FLOAT16"),
    ("Features Features(SHADER_F16) are required but not enabled on the device", "Features(SHADER_F16)"),
    ("Shader validation error: Constant expression [7] is invalid | = Float literal is infinite", None),
    ("unsupported instruction SpecConstantOp at Type", None),
    ("invalid type width %2", None),
])
def test_only_a_named_missing_capability_is_unsupported(message, capability):
    assert missing_capability(message) == capability


@requires_vulkan
@requires_test_spirv
def test_half_shader_on_a_device_without_f16_is_not_supported(monkeypatch):
    monkeypatch.setattr(adapters, "WANTED_FEATURES", tuple(f for f in adapters.WANTED_FEATURES if f != "shader-f16"))
    info, adapter = adapters.select()[0]
    info = type(info)(**{**info.to_dict(), "features": tuple(f for f in info.features if f != "shader-f16")})
    device = adapters.create_device(info, adapter)
    with pytest.raises(ShaderUnsupportedError, match="needs FLOAT16") as found:
        PipelineCache(device).get(compile_glsl("half_axpy.glsl"), {}, (64, 1, 1), label="half_axpy")
    assert status_of_exception(found.value)[0].name == "NOT_SUPPORTED"


def test_a_module_naga_cannot_parse_is_a_build_fail():
    status, reason = status_of_exception(ShaderLoadError("x: shader module: Float literal is infinite"))
    assert status.name == "BUILD_FAIL" and "Float literal is infinite" in reason


@requires_vulkan
@requires_tree
@pytest.mark.parametrize("allow", [False, True])
def test_a_run_of_nothing_but_not_supported_fails_unless_allowed(tmp_path, monkeypatch, capsys, allow):
    """An adapter and a tree, yet every kernel case NOT_SUPPORTED (here: fp16 on a device made without f16)."""
    monkeypatch.setattr(adapters, "WANTED_FEATURES", tuple(f for f in adapters.WANTED_FEATURES if f != "shader-f16"))
    results = tmp_path / "r.jsonl"
    argv = ["run", "--suite", "kernels", "--cases", r"M1-K64-N40-g32-fp16-buffer\]$", "--et-src",
            main_tree()[0], "--results", str(results)] + (["--allow-empty"] if allow else [])
    assert cli.main(argv) == (0 if allow else cli.EXIT_EMPTY)
    assert {r.status for r in load([results])} == {"NOT_SUPPORTED"}
    err = capsys.readouterr().err
    assert ("no kernel case ran" in err) is not allow


def test_invalid_type_width_is_not_supported_only_when_the_module_declares_a_narrow_integer():
    """naga's ``invalid type width`` names no capability; the module's own OpCapability Int16 does."""
    from vkdiff.device.transports.wgpu_device import naga_missing_capability

    assert naga_missing_capability("x | invalid type width %2", {"Shader", "Int16"}).startswith("Int16")
    assert naga_missing_capability("x | invalid type width %2", {"Shader"}) is None
    assert naga_missing_capability("x | Float literal is infinite", {"Int16"}) is None


@requires_vulkan
@requires_tree
def test_fp16_gemm_of_the_live_linear_path_is_not_supported_naming_int16(et_ctx):
    """Q4gswLinear.cpp's fp16 GEMM (``__tin__``) uses 16-bit integers, which naga's IR lacks."""
    from vkdiff.cases.kernels import all_cases

    (case,) = all_cases(r"^linear_q4gsw\[M13-K64-N40-g32-fp16-buffer\]$")
    result = kernels.run_case(et_ctx, case)
    assert result.status == "NOT_SUPPORTED"
    assert "Int16" in result.reason and "q4gsw_linear_gemm__tin__w_4x8_nc_buffer_half" in result.reason
