"""Known upstream bugs: shown as known, never skipped; a fixed bug is an unexpected pass."""

from __future__ import annotations

import dataclasses

from vkdiff.datamodel import Result
from vkdiff.verdicts import expectations

EXP = expectations.Expectation(id="bug-1", case=r"^model\[", rule=("rule",), status=("FAIL_CHECK",),
                               signature="packed 2 times", reason="upstream bug")


def _result(status: str, reason: str = "", rule: str = "rule") -> Result:
    return Result(case="model[a]", op="model", variant="x", rule=rule, device="cpu", status=status, reason=reason)


def test_matching_failure_is_known_and_not_a_failure():
    result = expectations.annotate(_result("FAIL_CHECK", "weight packed 2 times"), [EXP])
    assert result.expectation["outcome"] == "known"
    assert not expectations.counts_as_failure(result)


def test_fixed_bug_is_an_unexpected_pass():
    result = expectations.annotate(_result("PASS"), [EXP])
    assert result.expectation["outcome"] == "unexpected-pass"
    assert expectations.counts_as_failure(result)


def test_a_racy_bug_that_passed_this_run_is_a_racy_pass_not_a_fix():
    racy = dataclasses.replace(EXP, racy=True)
    result = expectations.annotate(_result("PASS"), [racy])
    assert result.expectation["outcome"] == "racy-pass" and not expectations.counts_as_failure(result)
    assert expectations.annotate(_result("FAIL_CHECK", "weight packed 2 times"), [racy]).expectation[
        "outcome"] == "known"


def test_other_failure_is_not_explained():
    result = expectations.annotate(_result("FAIL_CHECK", "something else"), [EXP])
    assert not result.expectation and expectations.counts_as_failure(result)
    assert not expectations.annotate(_result("PASS", rule="other"), [EXP]).expectation


def test_a_bug_only_gpu_assisted_validation_sees_is_no_unexpected_pass_without_it():
    """An access robustBufferAccess hides: the same case passes in a plain run, and that is no fix."""
    gpu = dataclasses.replace(EXP, validation=("gpu",), status=("FAIL_OOB",), signature="binding 1")
    plain = _result("PASS")
    validated = dataclasses.replace(_result("FAIL_OOB", "shader binding 1 (read): ..."),
                                    device_info={"features": ["layer:VK_LAYER_KHRONOS_validation",
                                                              "layer:gpu-assisted"]})
    assert not expectations.annotate(plain, [gpu]).expectation
    assert expectations.annotate(validated, [gpu]).expectation["outcome"] == "known"
    fixed = dataclasses.replace(validated, status="PASS", reason="", expectation={})
    assert expectations.annotate(fixed, [gpu]).expectation["outcome"] == "unexpected-pass"


def test_data_file_loads():
    loaded = expectations.load()
    assert loaded and all(e.id and (e.case or e.node_op) and e.status for e in loaded)
    assert all(isinstance(e.rule, tuple) for e in loaded)


def _kernel(max_abs: float, shader: str = "linear_dq8ca_q4gsw_coop_buffer_texture2d_float_zpint8") -> Result:
    return Result(case="linear_dq8ca_q4gsw[M1-K256-N64-g32-fp32-buffer]", op="et_vk.linear_dq8ca_q4gsw.default",
                  device="llvmpipe", status="FAIL_NUMERIC", shader=shader,
                  reason="Mismatched elements: 64 / 64 (100%)\nMax absolute difference: ...",
                  metrics={"max_abs": max_abs, "mismatches": 64, "unwritten": 0})


def test_the_known_bug_is_absorbed_at_its_size_and_a_larger_error_is_not():
    """The weight-only GEMV errs by the activation quantization (6e-3 at K=256); 0.5 is some other bug."""
    assert expectations.annotate(_kernel(0.0062)).expectation["outcome"] == "known"
    larger = expectations.annotate(_kernel(0.5))
    assert not larger.expectation and expectations.counts_as_failure(larger)
    elsewhere = expectations.annotate(_kernel(0.0062, shader="linear_dq8ca_q4gsw_tiled_buffer_texture2d_float_zpint8"))
    assert not elsewhere.expectation, "the same error from another shader is not this bug"


def test_a_model_failure_is_pinned_to_its_node_and_size():
    def at(node: int, max_abs: float) -> Result:
        return Result(case="embedding_large_vocab[fp32-vulkan]", op="embedding_large_vocab", rule="device",
                      device="llvmpipe", status="FAIL_NUMERIC", shader="embedding_texture3d_float",
                      node={"index": node, "op": "aten.embedding.default"},
                      reason=f"first diverging node {node} (aten.embedding.default, embedding_texture3d_float): ...",
                      metrics={"nodes": [{"index": node, "outputs": [{"max_abs": max_abs, "mismatches": 576}]}]})

    assert expectations.annotate(at(0, 4.86)).expectation["outcome"] == "known"
    assert not expectations.annotate(at(0, 40.0)).expectation
    assert not expectations.annotate(at(1, 4.86)).expectation


def test_every_numeric_expectation_pins_where_and_how_much():
    for exp in expectations.load():
        assert exp.signature.strip() != "Mismatched elements", exp.id
        if set(exp.status) & {"FAIL_NUMERIC", "FAIL_NAN"}:
            assert exp.shader or exp.node is not None or "vs eager" in exp.signature, exp.id
            if exp.in_programs:  # a user's program has its own sizes: the node's arguments or the error pin it
                assert exp.node_args or exp.max_abs is not None or set(exp.status) == {"FAIL_NAN"}, exp.id
            else:
                assert exp.max_abs is not None or exp.mismatches is not None, exp.id
