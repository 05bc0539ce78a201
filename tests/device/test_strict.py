"""The strict profile's SPIR-V rewrite (#35): each rule, on a small shader whose result differs under it, gives what
the rule's arithmetic gives (emulated in numpy), on whatever device runs it."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from tests.testutils import compile_glsl, isolated, requires_test_spirv, requires_tree, requires_vulkan
from vkdiff.device.runtime import resources
from vkdiff.device.shaders import device_profiles, spirv, strict
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


def raw_dispatches(jobs: list[tuple[bytes, int, tuple[np.ndarray, ...]]]) -> list[np.ndarray]:
    """In the child: each ``(module, output elements, inputs)`` on the first adapter through raw Vulkan (no
    profile: the modules come rewritten), one invocation per element of the first input."""
    from vkdiff.device.shaders.dispatch import PipelineCache
    from vkdiff.device.transports.adapters import create_device, select

    device = create_device(*select(via="vulkan")[0])
    cache, outs = PipelineCache(device), []
    for n, (spv, size, inputs) in enumerate(jobs):
        out = resources.poisoned(device, (size,), F32, "buffer")
        dispatch(device, cache.get(spv, {}, (64, 1, 1), label=f"job{n}"),
                 [out, *(resources.buffer_tensor(device, x) for x in inputs)], (inputs[0].size, 1, 1))
        outs.append(resources.read(device, out))
    return outs


SLOTS = ("pow", "tan", "sin", "exp", "log", "sqrt", "sinh", "mul", "exp2", "log2", "inversesqrt", "cos", "copy")
"""The outputs of ``strict_builtins.glsl``, per invocation."""


def _builtins(outs: np.ndarray) -> dict[str, np.ndarray]:
    table = outs.reshape(-1, len(SLOTS))
    return {name: table[:, k] for k, name in enumerate(SLOTS)}


@pytest.fixture(scope="module")
def builtins_run():
    """``strict_builtins.glsl`` as written and under each builtin rule, on inputs that show each rule, and as
    written again on the operands each rule's formula hands the device's own primitives."""
    rng = np.random.default_rng(35)
    a = np.concatenate([F32([np.pi / 2, -np.pi / 2, 80.0, 89.0, 1e-39, -1e-39, 1e-20, 0.3, 3.7]),
                        rng.uniform(0.01, 60.0, 55).astype(F32)])
    b = np.concatenate([F32([2.0, 2.0, 1.0, 3.0, 2.0, 2.0, 1e-20, -1.3, -2.0]), rng.uniform(-3, 3, 55).astype(F32)])
    spv = compile_glsl("strict_builtins.glsl")
    rules = ("pow", "sin_cos", "exp", "log", "inversesqrt", "tanh", "subnormal_flush")
    size = a.size * len(SLOTS)
    jobs = [(spv, size, (a, b)), (spv, size, (-a, b))] + [(strict.rewrite(spv, [r]), size, (a, b)) for r in rules]
    outs = isolated(raw_dispatches, jobs)
    plain, negated = _builtins(outs[0]), _builtins(outs[1])
    with np.errstate(all="ignore"):
        product = b * plain["log2"]
    follow_up = isolated(raw_dispatches, [(spv, size, (a, product)), (spv, size, (a, a * F32(strict.LOG2_E)))])
    return a, b, plain, negated, dict(zip(rules, map(_builtins, outs[2:]))), [_builtins(o) for o in follow_up]


def test_builtin_rules_compute_what_their_formula_gives_from_the_devices_own_primitives(builtins_run):
    a, b, plain, negated, ruled, (pow_parts, exp_parts) = builtins_run
    same = np.testing.assert_array_equal
    with np.errstate(all="ignore"):
        same(ruled["pow"]["pow"], pow_parts["exp2"])                               # exp2(y * log2(x))
        same(ruled["exp"]["exp"], exp_parts["exp2"])                               # exp2(x * log2(e))
        same(ruled["log"]["log"], plain["log2"] * F32(strict.LN_2))
        finite = np.isfinite(plain["inversesqrt"])                     # 1 / r: the device's division, 2.5 ULP
        np.testing.assert_array_max_ulp(ruled["inversesqrt"]["sqrt"][finite], F32(1) / plain["inversesqrt"][finite],
                                        maxulp=3)
        same(ruled["tanh"]["sinh"], (plain["exp"] - negated["exp"]) * F32(0.5))
        step = F32(2.0 ** -11)
        sin, cos = (np.round(plain[k] / step) * step for k in ("sin", "cos"))
        same(ruled["sin_cos"]["sin"], sin)
        same(ruled["sin_cos"]["tan"], sin / cos)
    assert np.isnan(ruled["pow"]["pow"][a < 0]).all(), "pow of a negative base is undefined: NaN through log2"
    assert np.isfinite(plain["tan"][:2]).all() and np.isinf(ruled["sin_cos"]["tan"][:2]).all(), \
        "tan at float32(pi / 2): cos within 2^-12 of its value is 0"
    assert np.abs(ruled["sin_cos"]["sin"] - np.sin(a.astype(np.float64)))[a < np.pi].max() <= 2.0 ** -11


def test_subnormal_flush_computes_with_subnormals_as_zero_of_their_sign_and_copies_them_as_they_are(builtins_run):
    a, b, plain, _, ruled, _ = builtins_run
    flushed, subnormal = ruled["subnormal_flush"], (a != 0) & (np.abs(a) < np.finfo(F32).tiny)
    np.testing.assert_array_equal(flushed["copy"], a, "a load and a store must not flush (the spec's list)")
    assert (plain["mul"][subnormal] != 0).all() and (flushed["mul"][subnormal] == 0).all()
    assert np.array_equal(np.signbit(flushed["mul"][subnormal]), np.signbit(a[subnormal] * b[subnormal]))
    assert (flushed["inversesqrt"][subnormal & (a > 0)] == np.inf).all(), "inversesqrt(+0): +inf"
    assert (flushed["log2"][a == F32(1e-39)] == -np.inf).all()
    tiny_product = a == F32(1e-20)                                   # 1e-40: computed subnormal, then flushed
    assert plain["mul"][tiny_product][0] != 0 and flushed["mul"][tiny_product][0] == 0
    normal = ~subnormal & ~tiny_product
    for slot in SLOTS:
        np.testing.assert_array_equal(flushed[slot][normal], plain[slot][normal], err_msg=slot)


def test_contraction_computes_a_times_b_plus_c_with_one_rounding(rng):
    a = np.concatenate([F32([1 + 2.0 ** -12]), rng.uniform(-4, 4, 63).astype(F32)])
    b = np.concatenate([F32([1 + 2.0 ** -12]), rng.uniform(-4, 4, 63).astype(F32)])
    c = np.concatenate([F32([-(1 + 2.0 ** -11)]), -(a[1:] * b[1:]) + rng.uniform(-1e-6, 1e-6, 63).astype(F32)])
    spv = compile_glsl("strict_fma.glsl")
    plain, fused = isolated(raw_dispatches, [(spv, a.size, (a, b, c)),
                                             (strict.rewrite(spv, ["contraction"]), a.size, (a, b, c))])
    exact = (a.astype(np.float64) * b + c).astype(F32)
    np.testing.assert_array_equal(fused, exact)
    assert plain[0] == 0 and fused[0] == F32(2.0 ** -24), "(1 + 2^-12)^2 - (1 + 2^-11) is 2^-24 fused, 0 rounded"


def test_reassociation_multiplies_the_later_factors_first(rng):
    """(a * b) * c as a * (b * c): 1e-3 * 1e20 * 1e20 is 1e37 as written and infinite reassociated (NVIDIA's order,
    adamw's (1 - beta2) * g * g)."""
    a = np.concatenate([F32([1e-3]), rng.uniform(-4, 4, 63).astype(F32)])
    b = np.concatenate([F32([1e20]), rng.uniform(-4, 4, 63).astype(F32)])
    c = np.concatenate([F32([1e20]), rng.uniform(-4, 4, 63).astype(F32)])
    spv = compile_glsl("strict_mul3.glsl")
    plain, ruled = isolated(raw_dispatches, [(spv, a.size, (a, b, c)),
                                             (strict.rewrite(spv, ["reassociation"]), a.size, (a, b, c))])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(ruled, a * (b * c))
        np.testing.assert_array_equal(plain, (a * b) * c)
    assert np.isfinite(plain[0]) and np.isinf(ruled[0])


def test_relaxed_precision_rounds_each_mediump_result_to_float16(rng):
    x = np.concatenate([F32([0.1, 30000.0, -30000.0]), rng.uniform(-100, 100, 61).astype(F32)])
    spv = compile_glsl("mediump_scale.glsl")
    assert spirv.relaxed_precision(spv)
    plain, relaxed = isolated(raw_dispatches, [(spv, x.size, (x,)),
                                               (strict.rewrite(spv, ["relaxed_precision"]), x.size, (x,))])
    half = x.astype(np.float16).astype(F32)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(relaxed, (half * F32(3) + F32(1)).astype(np.float16).astype(F32))
    assert relaxed[1] == np.inf and relaxed[2] == -np.inf and np.isfinite(plain[1:3]).all(), "past 65504: infinite"
    assert (relaxed != plain).any()


def test_a_rewritten_module_is_valid_spirv_and_an_unknown_rule_is_refused():
    for name in ("strict_div.glsl", "strict_tanh.glsl", "strict_builtins.glsl", "strict_fma.glsl",
                 "strict_mul3.glsl", "mediump_scale.glsl"):
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
    loaded_rewritten = pipeline.module == strict.rewrite(spv, device_profiles.PROFILES["strict"])
    return info.slug, info.profile, loaded_rewritten, resources.read(device, out)


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
    with pytest.raises(SettingsError, match="use one of strict, mali, adreno, or rules joined by"):
        RunSettings(device_profile="Fast Math", transport="vulkan")
    settings = RunSettings(device_profile="strict", transport="vulkan")
    assert RunSettings.from_environment(settings.environment()) == settings


def test_every_profile_names_known_rules_and_a_vendor_preset_says_where_each_comes_from():
    from vkdiff.datamodel.settings import DEVICE_PROFILES
    from vkdiff.device.runtime.routing import profiles as routes
    from vkdiff.device.transports.limits import profiles as limits

    found = device_profiles.profiles()
    assert set(DEVICE_PROFILES) == {"", *found}
    assert found["strict"].rules == tuple(strict.RULES)
    for name in ("mali", "adreno"):
        preset = found[name]
        assert preset.rules and set(preset.sources) == set(preset.rules)
        assert all(len(source) > 30 for source in preset.sources.values()), "a source says where, not just yes"
        assert preset.route in routes() and preset.limits in limits()
    assert "subnormal_flush" in found["adreno"].rules and "subnormal_flush" not in found["mali"].rules


def test_a_preset_brings_its_route_and_limits_unless_the_run_names_its_own():
    from vkdiff.entry.options import run_settings

    mali = run_settings({"device_profile": "mali", "transport": "vulkan"})
    assert (mali.route, mali.limits_profile) == ("mali", "mali-g7xx")
    own = run_settings({"device_profile": "adreno", "transport": "vulkan", "route": "no-dot-product",
                        "limits_profile": "mali-g7xx"})
    assert (own.route, own.limits_profile) == ("no-dot-product", "mali-g7xx")
    assert run_settings({"device_profile": "strict", "transport": "vulkan"}).route == "native"


def test_rules_joined_by_plus_are_a_profile_and_an_unknown_name_is_one_line():
    from vkdiff.datamodel.settings import RunSettings
    from vkdiff.entry.options import route_transport_problem

    assert device_profiles.rules_of("subnormal_flush+division") == ("division", "subnormal_flush")
    assert device_profiles.rules_of("adreno") == device_profiles.profiles()["adreno"].rules
    with pytest.raises(spirv.SpirvError, match="'fast' is neither a profile"):
        device_profiles.rules_of("division+fast")
    problem = route_transport_problem(RunSettings(device_profile="division+fast", transport="vulkan"))
    assert problem.startswith("--device-profile (or $VKDIFF_DEVICE_PROFILE):") and "\n" not in problem


def test_a_rewrite_is_cached_and_a_corrupt_entry_is_rewritten(tmp_path, monkeypatch):
    from vkdiff.datamodel import REPAIRS, cache_dir

    monkeypatch.setenv("VKDIFF_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(device_profiles, "_MEMO", {})
    spv = compile_glsl("strict_div.glsl")
    first = device_profiles.rewritten(spv, "division")
    (entry,) = (cache_dir() / "strict").iterdir()
    assert first == strict.rewrite(spv, ["division"]) and device_profiles.rewritten(spv, "") == spv
    entry.write_bytes(entry.read_bytes()[:-4] + b"\0\0\0\0")
    monkeypatch.setattr(device_profiles, "_MEMO", {})
    repairs = len(REPAIRS)
    assert device_profiles.rewritten(spv, "division") == first and len(REPAIRS) == repairs + 1
