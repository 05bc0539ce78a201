"""Kernel case declarations: ids, the sweep, and seeding by data id."""

from __future__ import annotations

import dataclasses

import numpy as np

from vkdiff.cases.kernels import all_cases
from vkdiff.executors.references import prepare_case

SWEEP = all_cases(r"^linear_q4gsw\[")


def test_sweep_covers_the_foundation_grid_and_the_boundaries_with_unique_ids():
    ids = [c.id for c in SWEEP]
    assert len(ids) == len(set(ids)) == 384 + 16 + 8
    assert {c.size("M") for c in SWEEP} >= {1, 4, 13, 64}
    assert all(c.size("K") % c.size("g") == 0 for c in SWEEP)
    boundary = {(c.size("M"), c.size("K"), c.size("N")) for c in SWEEP}
    assert any(m > k for m, k, _ in boundary) and any(k / 2 < m <= k for m, k, _ in boundary)
    assert {n % 8 for _, _, n in boundary} >= {0, 4} and any(k % 128 for _, k, _ in boundary)


def test_tiled_cases_force_the_quantized_linear_implementation():
    tiled = all_cases(r"^linear_q4gsw_tiled\[")
    assert len(tiled) == 80 and all(dict(c.options)["impl"] == "QuantizedLinear.cpp" for c in tiled)
    assert all("QuantizedLinear" not in c.id for c in tiled)


def test_storage_variants_share_data_id_and_seed():
    case = SWEEP[0]
    other = dataclasses.replace(case, storage="texture3d", options=(("weight_storage", "buffer"),))
    assert other.id == "linear_q4gsw[M1-K64-N40-g32-fp32-texture3d-wbuffer]"
    assert other.data_id == case.data_id and other.seed() == case.seed()
    assert dataclasses.replace(case, dtype="fp16").seed() != case.seed()
    assert dataclasses.replace(case, flags=("bias",)).seed() != case.seed()
    assert case.seed(1) != case.seed(0)


def test_knobs_are_structured():
    case = next(c for c in SWEEP if c.flags)
    assert case.op == "et_vk.linear_q4gsw.default"
    assert case.knobs == {"dtype": case.dtype, "storage": case.storage, "bias": True}
    assert case.sizes == {"M": case.size("M"), "K": 256, "N": 40, "g": 32}


def test_storage_variants_get_identical_inputs_and_reference():
    """One prepared case serves every storage variant, so prepare must not depend on storage."""
    case = next(c for c in SWEEP if c.size("N") == 40 and c.storage == "buffer")
    a, b = prepare_case(case), prepare_case(dataclasses.replace(case, storage="texture3d"))
    for name, value in a.args.items():
        np.testing.assert_array_equal(value, b.args[name], err_msg=name)
    np.testing.assert_array_equal(a.expected, b.expected)
    assert np.unique(a.args["self"]).size > 1 and np.unique(a.expected).size > 1


def test_packed_weights_cover_every_code_in_both_nibbles():
    case = next(c for c in SWEEP if c.size("K") == 256 and c.size("N") == 40)
    packed = prepare_case(case).args["weights"]
    assert set(np.unique(packed & 0xF)) == set(range(16)) == set(np.unique(packed >> 4))
