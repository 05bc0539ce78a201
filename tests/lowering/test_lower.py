"""Lowering through ExecuTorch's pass stack, the delegate decoding, the cache, and LOWER_FAIL messages."""

from __future__ import annotations

import numpy as np
import pytest

from vkdiff.capture import quiet_libraries
from vkdiff.cases.model_case import EMBEDDING_Q4GSW, ModelCase
from vkdiff.cases.models import Embedding, Linear, random_activations, random_tokens
from vkdiff.datamodel import Status
from vkdiff.harness.models import check_case
from vkdiff.lowering import lower as lowering
from vkdiff.lowering.edge import LowerError


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VKDIFF_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_delegate_constants_are_decoded_as_packed(private_cache):
    case = ModelCase(name="t_lin", build=Linear, inputs=random_activations((1, 3, 128)), recipe="4w")
    with quiet_libraries():
        lowered = lowering.lower(case)
    assert lowered.partitions == 1 and not lowered.cached
    (delegate,) = lowered.delegates
    (op,) = delegate.ops_named("et_vk.linear_q4gsw")
    args = delegate.bind(op).args
    weight, scales = delegate.constants[args["weights"]], delegate.constants[args["weight_scales"]]
    assert (weight.dtype, weight.shape) == (np.uint8, (96, 64))
    assert (scales.dtype, scales.shape) == (np.float32, (4, 96))
    assert lowered.pte[4:8] == b"ET12"  # ExecuTorch program flatbuffer identifier
    with quiet_libraries():
        again = lowering.lower(case)
    assert again.cached and again.op_counts() == lowered.op_counts()


def test_lower_fail_names_pass_and_root_cause(private_cache):
    case = ModelCase(name="t_emb", build=Embedding, inputs=random_tokens(256, 3), recipe="emb4w-asym",
                     expect_ops=(EMBEDDING_Q4GSW,))
    with pytest.raises(LowerError) as info, quiet_libraries():
        lowering.lower(case)
    message = str(info.value)
    assert message.startswith("to_edge_transform_and_lower[vulkan]: ")
    assert "FusePatternsPass" in message and "requires symmetric quantization" in message


def test_refusal_accepted_when_declared(private_cache):
    case = ModelCase(name="t_emb", build=Embedding, inputs=random_tokens(256, 3), recipe="emb4w-asym",
                     accept_refusal="requires symmetric quantization")
    (result,) = check_case(case)
    assert result.status == Status.PASS.name and result.reason.startswith("refused as intended")


def test_check_case_reports_each_rule(private_cache):
    case = ModelCase(name="t_lin", build=Linear, inputs=random_activations((1, 3, 128)), recipe="4w",
                     expect_ops=("et_vk.linear_q4gsw",), rules=("expected_fusions", "numerics"))
    results = {r.rule: r for r in check_case(case)}
    assert set(results) == {"expected_fusions", "numerics"}
    assert all(r.status == Status.PASS.name for r in results.values())
    assert results["numerics"].metrics["findings"][0]["sqnr_db"] > 100

