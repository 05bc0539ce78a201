"""The strict profile's SPIR-V rewrite (#35): each rule, on a small shader whose result differs under it, gives what
the rule's arithmetic gives (emulated in numpy), on whatever device runs it."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from tests.testutils import compile_glsl, isolated, requires_test_spirv, requires_tree, requires_vulkan
from vkdiff.device.runtime import resources
from vkdiff.device.shaders import spirv, strict
from vkdiff.device.shaders.dispatch import dispatch

pytestmark = [requires_vulkan, requires_test_spirv]
F32 = np.float32


def _run(gpu, pipelines, spv: bytes, label: str, out_shape, *inputs: np.ndarray) -> np.ndarray:
    pipeline = pipelines.get(spv, {}, (64, 1, 1), label=label)
    out = resources.poisoned(gpu, out_shape, F32, "buffer")
    dispatch(gpu, pipeline, [out, *(resources.buffer_tensor(gpu, x) for x in inputs)], (len(inputs[0]), 1, 1))
    return resources.read(gpu, out)


def test_division_is_a_reciprocal_multiply(gpu, pipelines, rng):
    b = np.tile(F32([41.0, 47.0, 55.0, 3.0, 7.0, 0.1]), 11)
    a = (b * rng.integers(1, 200, b.size)).astype(F32)               # integral quotients
    a[:3] = b[:3]                                                     # 41 * (1 / 41) is 0.99999994
    spv = compile_glsl("strict_div.glsl")
    rewritten = strict.rewrite(spv, ["division"])
    got = _run(gpu, pipelines, rewritten, "strict_div", a.shape, a, b)
    emulated = a * (F32(1) / b)
    np.testing.assert_array_equal(got, emulated)
    assert (emulated != a / b).any(), "the inputs must show the rule"
    assert (np.floor(got) < np.floor(a / b)).any(), "floor division of an integral quotient lands one below"


def test_tanh_through_exp_overflows_to_nan(gpu, pipelines):
    a = F32([100.0, -100.0, 0.5, -3.0])
    spv = compile_glsl("strict_tanh.glsl")
    plain = _run(gpu, pipelines, spv, "strict_tanh", a.shape, a)
    strict_out = _run(gpu, pipelines, strict.rewrite(spv, ["tanh"]), "strict_tanh_exp", a.shape, a)
    assert plain[:2].tolist() == [1.0, -1.0] and np.isnan(strict_out[:2]).all()
    np.testing.assert_allclose(strict_out[2:], np.tanh(a[2:].astype(np.float64)), rtol=1e-6)


def test_a_rewritten_module_is_valid_spirv_and_an_unknown_rule_is_refused():
    for name in ("strict_div.glsl", "strict_tanh.glsl"):
        out = strict.rewrite(compile_glsl(name), strict.RULES)
        spirv.reflect(out)
    with pytest.raises(spirv.SpirvError, match="unknown rule 'fast'"):
        strict.rewrite(compile_glsl("strict_div.glsl"), ["fast"])


@requires_tree
@pytest.mark.skipif(shutil.which("spirv-val") is None, reason="NOT_RUN: spirv-val missing (apt-get install spirv-tools)")
@pytest.mark.parametrize("variant", ["tanh_half_texture3d", "tanh_float_buffer", "binary_floor_divide_buffer_half",
                                     "sdpa_attn_weights_softmax_buffer_half"])
def test_et_vk_modules_rewritten_by_every_rule_stay_valid(et_tree, tmp_path, variant):
    from vkdiff.device.shaders.build import ShaderBuilder

    spv = ShaderBuilder(et_tree).build(variant).spv
    out = strict.rewrite(spv, strict.RULES)
    assert out != spv, f"{variant} divides or calls tanh"
    path = tmp_path / f"{variant}.spv"
    path.write_bytes(out)
    done = subprocess.run([shutil.which("spirv-val"), "--target-env", "vulkan1.1", str(path)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr


def strict_run(spv: bytes, a: np.ndarray, b: np.ndarray) -> tuple[str, str, bool, np.ndarray]:
    """In the child: the division shader on the first adapter through raw Vulkan under the strict profile; (slug,
    profile, whether the loaded module is the rewritten one, output)."""
    from vkdiff.device.shaders.dispatch import PipelineCache
    from vkdiff.device.transports.adapters import create_device, select

    info, adapter = select(via="vulkan", profile="strict")[0]
    device = create_device(info, adapter)
    pipeline = PipelineCache(device).get(spv, {}, (64, 1, 1), label="strict_div")
    out = resources.poisoned(device, a.shape, F32, "buffer")
    dispatch(device, pipeline, [out, resources.buffer_tensor(device, a), resources.buffer_tensor(device, b)],
             (a.size, 1, 1))
    return info.slug, info.profile, pipeline.module == strict.rewrite(spv, ["division"]), resources.read(device, out)


def test_the_raw_transport_loads_every_module_rewritten_under_the_strict_profile():
    a, b = F32([41.0, 47.0, 6.0, 1.0]), F32([41.0, 47.0, 3.0, 3.0])
    slug, profile, rewritten, got = isolated(strict_run, compile_glsl("strict_div.glsl"), a, b)
    assert slug.endswith("-strict") and profile == "strict" and rewritten, "a repro records what was loaded"
    np.testing.assert_array_equal(got, a * (F32(1) / b))


def test_the_strict_profile_needs_the_raw_transport():
    from vkdiff.datamodel.settings import RunSettings, SettingsError
    from vkdiff.entry.options import route_transport_problem

    assert route_transport_problem(RunSettings(device_profile="strict")).endswith("add --transport vulkan")
    assert route_transport_problem(RunSettings(device_profile="strict", transport="vulkan")) is None
    with pytest.raises(SettingsError, match="use strict"):
        RunSettings(device_profile="fast", transport="vulkan")
    settings = RunSettings(device_profile="strict", transport="vulkan")
    assert RunSettings.from_environment(settings.environment()) == settings
