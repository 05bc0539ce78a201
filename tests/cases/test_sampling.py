"""The test run's sample of each op's cases: every knob value and edge flag, seeded, foundation sweeps whole."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from vkdiff.cases.kernels import all_cases, load_suites
from vkdiff.cases.sampling import model_traits, sample_cases, sampled, sampled_models, traits, traits_of

EVERY = all_cases()


def _by_op(cases):
    groups: dict[str, list] = {}
    for case in cases:
        groups.setdefault(case.op, []).append(case)
    return groups


def test_every_sampled_suite_keeps_every_trait_and_at_least_the_minimum():
    kept = _by_op(sampled(EVERY, minimum=2))
    for op, cases in _by_op(EVERY).items():
        if load_suites()[op].sampled:
            assert traits_of(kept[op]) == traits_of(cases), op
            assert min(2, len(cases)) <= len(kept[op]) < max(len(cases), 3), op
        else:
            assert kept[op] == cases, op


def test_edge_flags_always_survive():
    kept = {c.id for c in sampled(EVERY, minimum=1)}
    for flag in ("special", "subnormal", "overflow", "trunc"):
        ops = {c.op for c in EVERY if c.has(flag)}
        assert ops and all(any(c.op == op and c.has(flag) and c.id in kept for c in EVERY) for op in ops), flag


def test_the_sample_is_seeded_and_the_seed_changes_it():
    relu = [c for c in EVERY if c.op == "aten.relu.default"]
    first = sample_cases(relu, minimum=2, seed=0)
    assert [c.id for c in sample_cases(relu, minimum=2, seed=0)] == [c.id for c in first]
    others = {tuple(c.id for c in sample_cases(relu, minimum=2, seed=s)) for s in range(1, 6)}
    assert others - {tuple(c.id for c in first)}


def test_a_greedy_pick_needs_no_more_cases_than_traits():
    relu = [c for c in EVERY if c.op == "aten.relu.default"]
    picked = sample_cases(relu, minimum=0)
    assert traits_of(picked) == traits_of(relu) and len(picked) <= len(traits_of(relu))
    assert all(traits(c) for c in picked)


def test_model_cases_keep_every_family_and_every_recipe_and_knob_token():
    ids = ["proj[8da4w-vulkan]", "proj[8da4w-vulkan-fp16]", "proj[4w-vulkan]", "proj[4w-bf16-vulkan]",
           "proj[8da4w-vulkan-buffer]", "proj[4w-vulkan-fp16]", "llm[llm-8da4w-vulkan]", "llm[llm-4w-vulkan]",
           "one[fp32-vulkan]"]
    cases = [SimpleNamespace(id=i) for i in ids]
    tokens = set().union(*map(model_traits, ids))
    for seed in range(5):
        picked = [c.id for c in sampled_models(cases, minimum=2, seed=seed)]
        assert set().union(*map(model_traits, picked)) == tokens
        assert {i.partition("[")[0] for i in picked} == {"proj", "llm", "one"}
        assert len(picked) < len(ids) and sum(i.startswith("llm[") for i in picked) == 1
    assert sampled_models(cases, minimum=0) == cases


def test_zero_keeps_every_case():
    assert sampled(EVERY, minimum=0) == EVERY


@pytest.mark.parametrize("argv, expected", [(["--sample", "2"], "sampled"), ([], "every")])
def test_vkdiff_run_samples_only_when_asked(argv, expected):
    listed = subprocess.run([sys.executable, "-m", "vkdiff.entry.cli", "run", "--list", "--suite", "kernels",
                             "--cases", r"^(relu|linear_q4gsw)\[", *argv], capture_output=True, text=True, check=True)
    ids = listed.stdout.split()
    relu, linear = [i for i in ids if i.startswith("relu[")], [i for i in ids if i.startswith("linear_q4gsw[")]
    assert len(linear) == len(all_cases(r"^linear_q4gsw\["))
    assert (len(relu) < len(all_cases(r"^relu\["))) == (expected == "sampled")


def test_a_bad_sample_is_one_line():
    bad = subprocess.run([sys.executable, "-m", "vkdiff.entry.cli", "run", "--list", "--sample", "-1"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--sample must be 0 (every case) or a count of cases, got '-1'" in bad.stderr


def test_the_test_run_samples_by_the_ini_and_the_option_overrides_it():
    """pyproject's ``vkdiff_sample`` cuts the op-family suites; ``--vkdiff-sample 0`` collects every case."""
    def collected(*extra: str) -> int:
        out = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", "--vkdiff",
                              "--vkdiff-suite", "kernels", "--vkdiff-cases", r"^(relu|rms_norm)\[", *extra,
                              "tests/test_store.py"], capture_output=True, text=True)
        return sum("@" in line for line in out.stdout.splitlines())

    every = len(all_cases(r"^(relu|rms_norm)\["))
    assert collected("--vkdiff-sample", "0") == every
    assert len(all_cases(r"^rms_norm\[")) < collected() < every
