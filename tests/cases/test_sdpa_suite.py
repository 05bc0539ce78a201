"""SDPA without a KV cache update: the ops ``SDPA.cpp`` registers for it have a launcher, a reference and a suite;
every AV route ``pick_sdpa_av_shader`` takes is a case that names it; each edge generator reaches its edge; the
suites' arguments shrink below the bound with their scalars kept."""

from __future__ import annotations

import re
import types

import numpy as np

from vkdiff import reference
from vkdiff.cases.kernel_suites.nn import sdpa
from vkdiff.cases.kernels import all_cases, below_bound, load_suites
from vkdiff.device.launchers import LAUNCHERS
from vkdiff.device.launchers.sdpa import (
    AV_ROUTES,
    custom_sdpa_route,
    pick_fused_qk_shader,
)
from vkdiff.device.runtime.routing import profiles


def _args(case) -> dict:
    return load_suites()[case.op].make_args(case, np.random.default_rng(case.seed()))


def _stub(sizes, storage: str = "texture3d", dtype: str = "float32"):
    """What the pickers read of a device tensor: its sizes, storage and dtype."""
    return types.SimpleNamespace(spec=types.SimpleNamespace(sizes=tuple(sizes), storage=storage, dtype=dtype))


def _graph(profile: str | None):
    vendor = profiles()[profile]["vendor"] if profile else "mesa"
    return types.SimpleNamespace(route=types.SimpleNamespace(vendor=vendor))


def test_ops_sdpa_cpp_registers_without_a_cache_update_are_covered(et_tree):
    source = (et_tree / "backends/vulkan/runtime/graph/ops/impl/SDPA.cpp").read_text()
    registered = set(re.findall(r"VK_REGISTER_OP\(\s*([\w.]+),", source))
    assert {sdpa.CUSTOM_SDPA, sdpa.FUSED_SDPA, "update_cache.default"} <= registered
    for op in (sdpa.CUSTOM_SDPA, sdpa.FUSED_SDPA):
        assert op in LAUNCHERS and op in reference.OPS and op in load_suites()
    assert "llama.update_cache.default" in reference.OPS


def test_every_av_route_is_a_case_that_names_the_route_it_takes():
    seen = set()
    for case in all_cases(r"^custom_sdpa\["):
        options = dict(case.options)
        args = _args(case)
        q, v = _stub(args["query"].shape), _stub(args["value"].shape)
        taken = custom_sdpa_route(_graph(options.get("profile")), q, v, q)
        assert taken == options["route"] and f"-{taken}" in case.id, case.id
        seen.add(taken)
    assert seen == set(AV_ROUTES)


def test_fused_cases_reach_the_plain_and_the_bias_qk_shader():
    shaders = set()
    for case in all_cases(r"^sdpa\["):
        args = _args(case)
        mask = None if args["attn_mask"] is None else _stub(args["attn_mask"].shape)
        shaders.add(pick_fused_qk_shader(_stub(args["q"].shape), _stub(args["k"].shape), mask).rsplit("_", 3)[0])
    assert shaders == {"fused_sdpa_qk_tiled", "fused_sdpa_qk_tiled_bias"}


def _logits(args: dict, fused: bool) -> np.ndarray:
    if fused:
        return np.matmul(args["q"].astype(np.float64), np.swapaxes(args["k"], -1, -2)) / np.sqrt(args["q"].shape[-1])
    q, k = args["query"].astype(np.float64), args["key"].astype(np.float64)
    length = args["start_pos"] + q.shape[1]
    k = np.repeat(k[:, :length], q.shape[2] // k.shape[2], axis=2)
    return np.einsum("bshd,bthd->bhst", q, k) / np.sqrt(q.shape[-1])


def test_logit_edges_are_reached():
    for case in all_cases(r"^(custom_sdpa|sdpa)\[.*-(large|negative)\]$"):
        logits = _logits(_args(case), case.op == sdpa.FUSED_SDPA)
        if case.has("large"):
            assert logits.min() > 88, case.id
        else:
            assert logits.max() < 0, case.id
        assert np.ptp(logits) > 1, case.id


def test_big_fp16_edge_is_reached():
    cases = all_cases(r"^(custom_sdpa|sdpa)\[.*-big\]$")
    assert {c.op for c in cases} == {sdpa.CUSTOM_SDPA, sdpa.FUSED_SDPA}
    for case in cases:
        args = _args(case)
        q, v = (args["query"], args["value"]) if case.op == sdpa.CUSTOM_SDPA else (args["q"], args["v"])
        assert case.dtype == "fp16" and np.abs(q).min() >= 256 and np.abs(v).min() >= 256, case.id


def test_shape_edges_are_reached():
    custom = [c.sizes for c in all_cases(r"^custom_sdpa\[")]
    assert any(s["T"] == 1 for s in custom) and any(s["T"] > 1 for s in custom)
    assert any(s["D"] % 4 for s in custom) and any(s["Hq"] != s["Hkv"] for s in custom)
    assert {s["P"] == 0 for s in custom} == {True, False}
    assert any(s["Hq"] // s["Hkv"] > 8 for s in custom)
    fused = [c.sizes for c in all_cases(r"^sdpa\[")]
    assert any(s["S"] == 1 for s in fused) and any(s["D"] % 4 for s in fused) and any(s["B"] > 1 for s in fused)
    assert any(s["Hkv"] != s["H"] for s in fused)


def test_fused_masks_broadcast_and_the_causal_mask_keeps_a_finite_entry_per_row():
    shapes = {}
    for case in all_cases(r"^sdpa\[.*-(mask|maskrow|causal)\]$"):
        mask = _args(case)["attn_mask"]
        shapes[case.flags[0]] = mask.shape
        if case.has("causal"):
            assert np.isinf(mask).any() and np.isfinite(mask).any(axis=-1).all()
    assert shapes["maskrow"][:3] == (1, 1, 1) and shapes["mask"][0] > 1 and shapes["causal"][:2] == (1, 1)


def test_arguments_shrink_below_the_bound_with_scalars_kept():
    for case in all_cases(r"^(custom_sdpa|sdpa)\["):
        built = _args(case)
        smaller = below_bound(case)
        assert smaller or all(case.size(n) == 1 for n in load_suites()[case.op].resizable_of(case)), case.id
        for small in smaller:
            args = _args(small)
            assert {k: v for k, v in args.items() if not isinstance(v, np.ndarray)} == \
                {k: v for k, v in built.items() if not isinstance(v, np.ndarray)}
            for name, value in args.items():
                if isinstance(value, np.ndarray):
                    assert all(a <= b for a, b in zip(value.shape, built[name].shape)), (small.id, name)
