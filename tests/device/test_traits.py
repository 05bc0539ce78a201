"""Device traits: the probes' readings (on an emulated device, then on the Vulkan device), the cache, the record."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from tests.testutils import first_adapter, isolated, requires_glslc, requires_vulkan
from vkdiff.datamodel import REPAIRS, read_entry
from vkdiff.device.runtime import trait_probes, traits
from vkdiff.device.runtime.trait_probes import POISON, ROBUST_MARK, TRAITS

BEHAVIOURS = ("ieee", "flush", "fused", "nan-propagating", "relaxed-f16")
"""Emulated devices: correctly rounded float32, then each with one liberty the spec allows."""


def _flush(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < np.finfo(np.float32).tiny, np.float32(0), x).astype(np.float32)


def emulate(rows: np.ndarray, behaviour: str = "ieee") -> np.ndarray:
    """The float32 probe's result words as a device with ``behaviour`` would write them (numpy, float64 rounded)."""
    ops = list(trait_probes.F32_OPS)
    a, b, c = (rows[k].astype(np.float32) for k in "abc")
    if behaviour == "flush":
        a, b, c = _flush(a), _flush(b), _flush(c)
    out = np.zeros(len(rows), np.uint32)
    with np.errstate(all="ignore"):
        for i, code in enumerate(rows["op"]):
            op, x, y, z = ops[code - 1], np.float64(a[i]), np.float64(b[i]), np.float64(c[i])
            if op in ("int", "uint"):
                info = np.iinfo(np.int32 if op == "int" else np.uint32)
                value = 0 if math.isnan(x) else int(np.clip(x, info.min, info.max))
                out[i] = np.array(value, np.int64).astype(np.uint32)
                continue
            if op in ("min", "max", "clamp") and behaviour == "nan-propagating" and np.isnan([x, y, z]).any():
                value = np.nan
            elif op.startswith("mediump_") and behaviour == "relaxed-f16":
                x16, y16 = np.float16(x), np.float16(y)
                value = np.float64(x16 * y16 if op == "mediump_mul" else x16 + y16)
            elif op == "mul_add" and behaviour != "fused":
                value = np.float32(x * y) + np.float32(z)
            else:
                value = {"mul": lambda: x * y, "mediump_mul": lambda: x * y, "add": lambda: x + y,
                         "mediump_add": lambda: x + y, "div": lambda: x / y, "mul_add": lambda: x * y + z,
                         "min": lambda: np.fmin(x, y), "max": lambda: np.fmax(x, y),
                         "clamp": lambda: np.fmin(np.fmax(x, y), z), "exp": lambda: np.exp(x),
                         "log": lambda: np.log(x), "pow": lambda: np.power(x, y), "tan": lambda: np.tan(x),
                         "tanh": lambda: np.tanh(x), "sin": lambda: np.sin(x), "cos": lambda: np.cos(x),
                         "inversesqrt": lambda: 1 / np.sqrt(x)}[op]()
            result = np.float32(value)
            if behaviour == "flush":
                result = _flush(np.array([result]))[0]
            out[i] = np.array(result, np.float32).view(np.uint32)
    return out


def float32_probe() -> trait_probes.Probe:
    return next(p for p in trait_probes.probes() if p.name == "float32")


def test_every_probe_reads_only_declared_traits_and_together_they_cover_every_trait():
    declared = [name for probe in trait_probes.probes() for name in probe.traits]
    assert sorted(declared) == sorted(TRAITS)
    assert len(declared) == len(set(declared))


def test_a_correctly_rounded_device_reads_as_ieee_in_every_trait():
    probe = float32_probe()
    found = probe.read(emulate(probe.buffers[0]))
    assert set(found) == set(probe.traits)
    assert (found["f32_denorm"], found["fma"], found["relaxed_precision_f16"]) == ("preserved", "separate", False)
    assert (found["nan_min_max"], found["nan_clamp"], found["tanh_large"]) == ("returns other operand", "returns lo",
                                                                               "saturates to +-1")
    assert found["div_f32_integral_exact"] is True
    for name in ("div_f32_max_ulp", "exp_max_ulp", "log_max_ulp", "pow_max_ulp", "inversesqrt_max_ulp"):
        assert found[name] <= 0.5, name
    assert found["f2i_out_of_range"] == {"int(3e9)": 2 ** 31 - 1, "int(-3e9)": -2 ** 31, "int(NaN)": 0,
                                         "int(+inf)": 2 ** 31 - 1, "int(-inf)": -2 ** 31, "uint(-1)": 0,
                                         "uint(5e9)": 2 ** 32 - 1, "uint(NaN)": 0}


@pytest.mark.parametrize("behaviour, trait, value", [
    ("flush", "f32_denorm", "flushed"),
    ("fused", "fma", "contracted"),
    ("nan-propagating", "nan_min_max", "returns NaN"),
    ("nan-propagating", "nan_clamp", "returns NaN"),
    ("relaxed-f16", "relaxed_precision_f16", True),
])
def test_each_liberty_the_spec_allows_reads_as_its_trait(behaviour, trait, value):
    probe = float32_probe()
    assert behaviour in BEHAVIOURS
    assert probe.read(emulate(probe.buffers[0], behaviour))[trait] == value


def test_a_row_left_unwritten_is_an_error_never_a_reading():
    probe = float32_probe()
    words = emulate(probe.buffers[0])
    words[2] = POISON
    with pytest.raises(ValueError, match=r"rows \[2\] were never written"):
        probe.read(words)


@pytest.mark.parametrize("words, expected", [
    ((14, 0, 0, 0, 0), "zero"),
    ((14, 14, 14, 14, 14), "clamped"),
    ((14, 11, 12, 13, 11), "in-range value"),
    ((14, ROBUST_MARK, ROBUST_MARK, ROBUST_MARK, ROBUST_MARK), "past the range"),
    ((14, 0, 7, ROBUST_MARK, 0), "undefined-but-ran"),
])
def test_robust_access_reads_what_a_read_past_the_range_returned(words, expected):
    probe = next(p for p in trait_probes.probes() if p.name == "robust")
    assert probe.read(np.array(words, np.uint32)) == {"robust_access": expected}


def test_a_wrong_in_range_read_makes_the_robust_probe_an_error():
    probe = next(p for p in trait_probes.probes() if p.name == "robust")
    with pytest.raises(ValueError, match="in-range control read 0xd, not 14"):
        probe.read(np.array((13, 0, 0, 0, 0), np.uint32))


class Counting:
    """A transport that counts the pipelines and command encoders asked of it (dispatches and copies)."""

    def __init__(self, inner):
        self.inner = inner
        self.pipelines = 0
        self.encoders = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def create_pipeline(self, *args):
        self.pipelines += 1
        return self.inner.create_pipeline(*args)

    def create_command_encoder(self, label=""):
        self.encoders += 1
        return self.inner.create_command_encoder(label=label)


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VKDIFF_CACHE_DIR", str(tmp_path))
    return tmp_path


def _plausible(record: dict) -> None:
    assert set(TRAITS) <= set(record) and not traits.failed(record), record
    size = record["subgroup_size"]
    assert isinstance(size, int) and size > 0 and size & (size - 1) == 0
    for name in ("f32_denorm", "f16_denorm"):
        assert record[name] in ("preserved", "flushed", "flushed on input", "flushed on output", "other")
    assert record["fma"] in ("contracted", "separate", "mixed", "other")
    assert record["robust_access"] in ("zero", "clamped", "in-range value", "past the range", "undefined-but-ran")
    assert 0 <= record["div_f32_max_ulp"] <= 2.5
    assert record["sin_cos_max_abs"] <= 2.0 ** -11
    assert record["probe"]["version"] == traits.probe_version()


@requires_vulkan
@requires_glslc
def test_on_the_device_every_trait_is_measured_and_plausible(gpu, own_cache):
    info = first_adapter()[0]
    record = traits.device_traits(gpu, info)
    _plausible(record)
    assert json.loads(read_entry(traits.record_path(info))) == record


@requires_vulkan
@requires_glslc
def test_the_denormal_trait_agrees_with_numpy_on_the_readback(gpu, own_cache):
    probe = float32_probe()
    loaded, _ = traits.load(gpu, probe)
    words = traits.readback(gpu, [loaded])["float32"]
    rows = probe.buffers[0][:4]
    got = words[:4].view(np.float32)
    a, b = rows["a"], rows["b"]
    exact = np.array([a[0] * b[0], a[1] + b[1], a[2] * b[2], a[3] * b[3]], np.float32)
    assert np.abs(exact[:2]).max() < np.finfo(np.float32).tiny and np.abs(a[2:]).max() < np.finfo(np.float32).tiny
    kept_out, kept_in = (got[:2] == exact[:2]).all(), (got[2:] == exact[2:]).all()
    expected = {(True, True): "preserved", (False, False): "flushed", (True, False): "flushed on input",
                (False, True): "flushed on output"}[(bool(kept_out), bool(kept_in))]
    assert probe.read(words)["f32_denorm"] == expected


@requires_vulkan
@requires_glslc
def test_a_cache_hit_costs_no_dispatch(gpu, own_cache):
    info = first_adapter()[0]
    device = Counting(gpu)
    cold = traits.device_traits(device, info)
    assert device.pipelines == len(trait_probes.probes()) and device.encoders == 2  # one dispatch, one copy
    device.pipelines = device.encoders = 0
    warm = traits.device_traits(device, info)
    assert (device.pipelines, device.encoders, warm) == (0, 0, cold)


@requires_vulkan
@requires_glslc
def test_a_corrupt_cache_entry_is_reported_and_probed_again(gpu, own_cache):
    info = first_adapter()[0]
    first = traits.device_traits(gpu, info)
    path = traits.record_path(info)
    data = bytearray(path.read_bytes())
    data[-3] ^= 1
    path.write_bytes(bytes(data))
    device = Counting(gpu)
    repairs = len(REPAIRS)
    again = traits.device_traits(device, info)
    assert device.encoders == 2
    assert [(r.path, r.why) for r in REPAIRS[repairs:]] == [(str(path), "content hash mismatch")]
    assert {k: v for k, v in again.items() if k != "probe"} == {k: v for k, v in first.items() if k != "probe"}


@requires_vulkan
@requires_glslc
def test_a_probe_the_device_cannot_run_is_not_measured_with_the_reason(gpu, own_cache):
    info = first_adapter()[0]
    lacking = dataclasses.replace(info, features=tuple(f for f in info.features if f != "shader-f16"))
    record = traits.device_traits(gpu, lacking)
    assert record["f16_denorm"] == {"not_measured": "the device lacks shader-f16"}
    assert record["f32_denorm"] in ("preserved", "flushed", "flushed on input", "flushed on output")
    assert traits.record_path(lacking).exists(), "a trait the device cannot run is a fact, cached like the others"


@requires_vulkan
def test_a_failing_probe_records_the_error_and_is_not_cached(gpu, own_cache, monkeypatch):
    def refuse(source):
        raise traits.BuildError("trait probe: glslc failed: no")

    monkeypatch.setattr(traits, "compile_probe", refuse)
    info = first_adapter()[0]
    record = traits.device_traits(gpu, info)
    assert record["fma"] == {"error": "trait probe: glslc failed: no"}
    assert sorted(traits.failed(record)) == sorted(TRAITS)
    assert not traits.record_path(info).exists()


@requires_vulkan
def test_an_unexpected_exception_in_a_probe_never_aborts_the_run(gpu, own_cache, monkeypatch):
    def broken(device, loaded):
        raise RuntimeError("driver said no")

    monkeypatch.setattr(traits, "readback", broken)
    record = traits.device_traits(gpu, first_adapter()[0])
    assert record["subgroup_size"] == {"error": "RuntimeError: driver said no"}


@requires_vulkan
@requires_glslc
def test_results_of_a_context_record_its_traits_in_device_info(own_cache):
    from vkdiff.device.runtime.context import DeviceContext
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.shaders.trees import GLSL_SUBDIR

    (own_cache / "et" / GLSL_SUBDIR).mkdir(parents=True)
    info, adapter = first_adapter()
    ctx = DeviceContext(info, adapter, ShaderBuilder(own_cache / "et"))
    ctx.device = traced = Counting(ctx.device)
    recorded = ctx.info_dict
    assert (traced.pipelines, traced.encoders) == (0, 0), "probes run on the device as opened, never on a wrapper"
    assert {k: v for k, v in recorded.items() if k != "traits"} == info.to_dict()
    _plausible(recorded["traits"])
    assert ctx.info_dict is recorded


def _raw_traits(cache: str) -> tuple[dict, dict]:
    import os

    from vkdiff.device.transports.adapters import create_device, select

    os.environ["VKDIFF_CACHE_DIR"] = cache
    info, adapter = select(via="vulkan")[0]
    device = create_device(info, adapter)
    return traits.device_traits(device, info), traits.device_traits(device, info)


@requires_vulkan
@requires_glslc
def test_the_raw_vulkan_transport_measures_every_trait(tmp_path):
    cold, warm = isolated(_raw_traits, str(tmp_path))
    _plausible(cold)
    assert warm == cold
