"""Expectations keyed by what a device does (probed traits), by vendor or driver where that is the cause, or by
transport: never by a product's name (#34). Real results recorded on the H200 and lavapipe are in ``data/``."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml

from vkdiff import store
from vkdiff.datamodel import Result
from vkdiff.device.runtime.trait_probes import TRAITS
from vkdiff.verdicts import expectations
from vkdiff.verdicts.expectations import Expectation, ExpectationFileError

DATA = Path(__file__).parent / "data"
RECORDED = DATA / "recorded_results.jsonl"
"""A few results copied verbatim from the kernel suite's runs on an NVIDIA H200 (driver 580.159.04; wgpu and raw
Vulkan, traits recorded) and on lavapipe (recorded before traits existed: no traits)."""
LAVAPIPE_TRAITS = json.loads((DATA / "traits_lavapipe.json").read_text())["traits"]
"""lavapipe's probed traits (Mesa 22.3.6) by transport."""

FLUSH = Expectation(id="flush", case=r"^rsqrt\[", traits={"f32_denorm": "flushed"}, status=("FAIL_NAN",),
                    signature="Inf: 2")


def _result(status: str = "FAIL_NAN", reason: str = "NaN: 0, Inf: 2 where the reference is finite",
            **info) -> Result:
    return Result(case="rsqrt[W6-fp32-buffer-subnormal]", op="aten.rsqrt.default", variant="rsqrt_float_buffer",
                  device="gpu-1", status=status, reason=reason, device_info=info)


def _outcome(result: Result, exps=None) -> str:
    result.expectation = {}
    return (expectations.annotate(result, exps).expectation or {}).get("outcome", "")


def test_a_device_with_the_trait_is_explained_one_with_another_value_or_none_recorded_is_not():
    assert _outcome(_result(traits={"f32_denorm": "flushed"}), [FLUSH]) == "known"
    other = _result(traits={"f32_denorm": "preserved"})
    assert _outcome(other, [FLUSH]) == "" and expectations.counts_as_failure(other)
    for info in ({}, {"traits": {}}, {"traits": {"f32_denorm": {"not_measured": "no float32"}}},
                 {"traits": {"f32_denorm": {"error": "probe failed"}}}):
        unknown = _result(**info)
        assert _outcome(unknown, [FLUSH]) == "", info
        assert expectations.counts_as_failure(unknown), "no traits recorded: the failure shows, never a guess"


def test_a_pass_is_an_unexpected_pass_only_on_a_device_with_the_trait():
    assert _outcome(_result("PASS", "", traits={"f32_denorm": "flushed"}), [FLUSH]) == "unexpected-pass"
    assert _outcome(_result("PASS", "", traits={"f32_denorm": "preserved"}), [FLUSH]) == ""
    assert _outcome(_result("PASS", ""), [FLUSH]) == "", "a result without traits is outside the territory"


def test_every_trait_named_must_hold_and_a_list_is_any_of_its_values():
    both = dataclasses.replace(FLUSH, traits={"fma": "contracted", "div_f32_integral_exact": False})
    assert _outcome(_result(traits={"fma": "contracted", "div_f32_integral_exact": False}), [both]) == "known"
    assert _outcome(_result(traits={"fma": "contracted", "div_f32_integral_exact": True}), [both]) == ""
    assert _outcome(_result(traits={"fma": "contracted"}), [both]) == ""
    either = dataclasses.replace(FLUSH, traits={"fma": ["contracted", "mixed"]})
    assert _outcome(_result(traits={"fma": "mixed"}), [either]) == "known"
    assert _outcome(_result(traits={"fma": "separate"}), [either]) == ""


def test_a_flag_only_equals_a_flag():
    integral = dataclasses.replace(FLUSH, traits={"div_f32_integral_exact": False})
    assert _outcome(_result(traits={"div_f32_integral_exact": 0}), [integral]) == ""
    assert _outcome(_result(traits={"div_f32_integral_exact": False}), [integral]) == "known"


def test_a_table_trait_is_matched_by_its_entries():
    saturating = {"int(3e9)": 2147483647, "int(NaN)": 0}
    wrapped = dataclasses.replace(FLUSH, traits={"f2i_out_of_range": {"int(3e9)": [-2147483648, 2147483647]}})
    assert _outcome(_result(traits={"f2i_out_of_range": saturating}), [wrapped]) == "known"
    assert _outcome(_result(traits={"f2i_out_of_range": {"int(3e9)": 2147483520}}), [wrapped]) == ""
    assert _outcome(_result(traits={"f2i_out_of_range": {"int(NaN)": 0}}), [wrapped]) == "", "entry not measured"
    assert _outcome(_result(traits={"f2i_out_of_range": 2147483647}), [wrapped]) == ""


def test_vendor_is_the_vendor_name_or_pci_id_on_either_transport_and_driver_a_regex():
    nvidia = dataclasses.replace(FLUSH, traits={}, vendor="nvidia")
    assert _outcome(_result(vendor="NVIDIA", vendor_id=0x10DE), [nvidia]) == "known"
    assert _outcome(_result(vendor="nvidia", vendor_id=0x10DE), [nvidia]) == "known"
    assert _outcome(_result(vendor="llvmpipe", vendor_id=0x10005), [nvidia]) == ""
    assert _outcome(_result(), [nvidia]) == "", "a host result has no vendor"
    mesa = dataclasses.replace(FLUSH, traits={}, vendor=r"\b0x10005\b")
    assert _outcome(_result(vendor="llvmpipe", vendor_id=0x10005), [mesa]) == "known"
    assert _outcome(_result(vendor="mesa", vendor_id=0x10005), [mesa]) == "known"
    assert _outcome(_result(vendor="x", vendor_id=0x100050), [mesa]) == ""
    driver = dataclasses.replace(FLUSH, traits={}, driver=r"^580\.")
    assert _outcome(_result(driver="580.159.04"), [driver]) == "known"
    assert _outcome(_result(driver="Mesa 22.3.6 (LLVM 15.0.6)"), [driver]) == ""


def _write(tmp_path: Path, entry: dict) -> Path:
    path = tmp_path / "expectations.yaml"
    path.write_text(yaml.safe_dump([{"id": "x", "case": "^a$", "status": ["FAIL_NUMERIC"], **entry}]))
    return path


def test_the_file_refuses_a_device_and_an_unprobed_trait(tmp_path):
    for name, entry, message in (("device", {"device": ["nvidia-h100"]}, "names no product"),
                                 ("trait", {"traits": {"denormals": "flushed"}}, "no probe measures trait.*denormals")):
        (tmp_path / name).mkdir()
        with pytest.raises(ExpectationFileError, match=message):
            expectations.load(_write(tmp_path / name, entry))
    (tmp_path / "all").mkdir()
    assert expectations.load(_write(tmp_path / "all", {"device": "all"}))[0].traits == {}


PRODUCT_WORDS = ("llvmpipe", "lavapipe", "swiftshader", "nvidia-h100", "nvidia-h200", "h100", "h200", "gh200", "a100",
                 "rtx", "geforce", "quadro", "tesla", "titan", "radeon", "adreno", "mali", "powervr", "xclipse")
"""Product (and product line) names: none may key an expectation. (Not names a case id spells otherwise: V100 is a
vocabulary of 100 there.)"""


def _products() -> list[str]:
    """The product words, and each recorded result's device slug and name."""
    seen = set(PRODUCT_WORDS)
    for result in store.read([RECORDED]).results:
        seen |= {result.device.lower(), str((result.device_info or {}).get("name", "")).lower()}
    return sorted(w for w in seen if w)


def _keys(exp: Expectation) -> str:
    """Every field that decides where an expectation applies, as text."""
    return " ".join([exp.case, *exp.rule, json.dumps(exp.traits, sort_keys=True), exp.vendor, exp.driver,
                     *exp.transport, *exp.validation, exp.signature, exp.shader, exp.id])


def test_no_expectation_names_a_product():
    assert "device" not in {f.name for f in dataclasses.fields(Expectation)}
    raw = yaml.safe_load(expectations.DATA.read_text())
    assert all(entry.get("device", "all") == "all" for entry in raw), "a device list is back in the data file"
    products = _products()
    assert "nvidia-h200" in products and "llvmpipe" in products, "the recorded devices are checked too"
    for exp in expectations.load():
        text = _keys(exp).lower()
        named = [p for p in products if re.search(rf"(?<![a-z0-9]){re.escape(p)}(?![a-z0-9])", text)]
        assert not named, f"{exp.id} names {named}: key it by trait, vendor or driver"


def test_every_keyed_expectation_says_why_in_its_reason():
    for exp in expectations.load():
        for name in exp.traits:
            assert name in TRAITS and name in exp.reason, f"{exp.id}: its reason names trait {name}"
        if exp.vendor or exp.driver:
            assert "no probed trait" in exp.reason, f"{exp.id}: say why no trait states the cause"


EXPLAINED_ON_H200 = {
    "div_mode[C3-H5-W6-oC1-oH5-oW6-fp32-buffer]": "etvk-floor-divide-relies-on-exact-division",
    "amax[C3-H5-W6-fp32-texture3d-channels-reduce-dim1-keepdim-special]": "etvk-reduce-texture-minmax-drop-nan",
    "native_group_norm[N2-C3-H1-W5-g1-fp32-texture3d-channels-texture]": "etvk-group-norm-one-pass-not-portable",
    "var[C3-H5-W6-fp16-buffer-buffer-dim-1-keepdim-biased]": "etvk-var-half-one-pass-not-portable",
    "quantize_per_tensor[N2-C5-H3-W7-fp32-buffer-outint8x4_4w4c-huge]": "etvk-float-to-int8-conversion-out-of-range",
    "native_layer_norm[C3-H5-W6-fp16-buffer-buffer]": "etvk-layer-norm-buffer-half-pow-not-portable",
    "ne_scalar[C3-H5-W6-fp32-texture3d-s0p1-special]": "ne-scalar-nan-not-unequal-through-naga",
    "adamw_step[H13-W67-fp32-buffer-step1000-huge]": "etvk-adamw-reassociation-not-portable",
}
"""Each kind of key on a real H200 failure: portability rules (floor division, one-pass variance in var and group
norm, pow in float16, reassociation), NaN through max, a conversion table entry, transport. (Its flushed subnormals,
tan at pi/2 and a half image store of 1e5 are spec-allowed: no expectation.)"""

SPEC_ALLOWED_ON_H200 = {"rsqrt[C3-H5-W6-fp32-buffer-subnormal]": "spec-allowed:f32_denorm",
                        "tan[W67-fp32-buffer]": "spec-allowed:sin_cos_max_abs",
                        "scalar_tensor[R0-fp16-texture3d-big]": "spec-allowed:overflow"}
"""Former NVIDIA-only expectations the spec envelope explains, by the trait it names."""


def _recorded(device: str) -> list[Result]:
    return [r for r in store.read([RECORDED]).results if r.device == device]


def _with_traits(result: Result, traits) -> Result:
    info = dict(result.device_info or {})
    if traits is None:
        info.pop("traits", None)
    else:
        info["traits"] = traits
    return dataclasses.replace(result, device_info=info, expectation={})


def test_the_h200_failures_are_explained_by_their_cause():
    failures = [r for r in _recorded("nvidia-h200") if r.status != "PASS"]
    assert {r.case for r in failures} == set(EXPLAINED_ON_H200)
    for result in failures:
        found = expectations.annotate(_with_traits(result, result.device_info["traits"])).expectation
        assert found == {**found, "id": EXPLAINED_ON_H200[result.case], "outcome": "known"}, result.case


def test_the_h200_liberties_pass_flagged_by_their_trait_and_need_no_expectation():
    allowed = {r.case: r for r in _recorded("nvidia-h200") if any(f.startswith("spec-allowed") for f in r.flags)}
    assert set(allowed) == set(SPEC_ALLOWED_ON_H200)
    for case, result in allowed.items():
        assert result.status == "PASS" and SPEC_ALLOWED_ON_H200[case] in result.flags
        assert result.metrics["envelope"]["tolerance_status"] in ("FAIL_NAN", "FAIL_NUMERIC")
        assert not expectations.annotate(_with_traits(result, result.device_info["traits"])).expectation, case


def test_a_trait_keyed_h200_failure_is_not_explained_without_its_traits_or_with_another_value():
    keyed = {e.id: e for e in expectations.load() if e.traits}
    for result in _recorded("nvidia-h200"):
        exp = keyed.get(EXPLAINED_ON_H200.get(result.case, ""))
        if exp is None or result.status == "PASS":
            continue
        own = result.device_info["traits"]
        for traits in (None, *({**own, name: "another value"} for name in exp.traits)):
            moved = expectations.annotate(_with_traits(result, traits))
            assert not moved.expectation and expectations.counts_as_failure(moved), (result.case, traits is None)
    for result in _recorded("nvidia-h200"):
        if result.status == "FAIL_PORTABILITY":
            elsewhere = expectations.annotate(_with_traits(result, LAVAPIPE_TRAITS["wgpu"]))
            assert elsewhere.expectation["outcome"] == "known", f"{result.case}: a portability finding, every device"


def test_a_conversion_that_saturates_is_outside_the_territory_not_an_unexpected_pass():
    """naga's int(3e9) (2147483520) + the zero point still fits; NVIDIA's raw int() saturates before the conv's
    clamp: both PASS, and neither is taken for a fix."""
    passes = [r for r in _recorded("nvidia-h200") if r.status == "PASS" and r.case not in SPEC_ALLOWED_ON_H200]
    assert {(r.case.split("[")[0], r.device_info["transport"]) for r in passes} == {
        ("quantize_per_tensor", "wgpu"), ("q8ta_conv2d_pw", "vulkan"), ("ne_scalar", "vulkan")}
    for result in passes:
        assert not expectations.annotate(_with_traits(result, result.device_info["traits"])).expectation, result.case


def test_lavapipe_results_recorded_before_traits_are_explained_once_their_traits_are():
    """A trait-keyed expectation explains only a result that recorded its traits: the Mesa log bug too, which needs
    subnormals kept (the strict profile flushes them)."""
    log10, amax = sorted(_recorded("llvmpipe"), key=lambda r: r.case.startswith("amax"))
    assert "traits" not in log10.device_info and "traits" not in amax.device_info
    assert not expectations.annotate(_with_traits(log10, None)).expectation
    kept = expectations.annotate(_with_traits(log10, LAVAPIPE_TRAITS[log10.device_info["transport"]]))
    assert kept.expectation["id"] == "mesa-log-of-subnormal-reads-the-exponent-field"
    flushed = {**LAVAPIPE_TRAITS[log10.device_info["transport"]], "f32_denorm": "flushed"}
    assert not expectations.annotate(_with_traits(log10, flushed)).expectation
    assert not expectations.annotate(_with_traits(amax, None)).expectation
    probed = expectations.annotate(_with_traits(amax, LAVAPIPE_TRAITS[amax.device_info["transport"]]))
    assert probed.expectation["id"] == "etvk-reduce-texture-minmax-drop-nan"
    assert probed.expectation["outcome"] == "known"


def test_a_profile_keyed_finding_applies_only_to_that_device_profile():
    """A finding keyed by ``profile`` (a liberty no probe states for every expression) covers the strict device, not a
    real one: there the same failure is news."""
    entry = Expectation(id="order", case=r"^q8ta_pixel_shuffle\[", profile=("strict",), status=("FAIL_NUMERIC",),
                        signature="Mismatched elements: 22 / 252 ")
    result = Result(case="q8ta_pixel_shuffle[N1-C12-H3-W7-int8-buffer-int8x4_4w4c-zpmin]", op="q8ta_pixel_shuffle",
                    device="llvmpipe-strict",
                    status="FAIL_NUMERIC", reason="Mismatched elements: 22 / 252 (8.73%)",
                    device_info={"profile": "strict", "transport": "vulkan"})
    assert entry.applies_to(result)
    assert not entry.applies_to(dataclasses.replace(result, device_info={"profile": "", "transport": "vulkan"}))
