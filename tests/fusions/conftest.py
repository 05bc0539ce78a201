"""Lowered programs shared by the fusion-rule tests (lowered once per session, cached on disk)."""

from __future__ import annotations

import pytest

from vkdiff.cases.models import LINEAR_DQ8CA_Q4GSW, LINEAR_Q4GSW, Linear, ModelCase, TiedLMHead, _activations, _tokens


def _lowered(case: ModelCase):
    from vkdiff.harness.lower import lower, quiet_libraries

    with quiet_libraries():
        return lower(case)


@pytest.fixture(scope="session")
def linear_4w():
    case = ModelCase(name="test_linear", build=Linear, inputs=_activations((1, 3, 128)), recipe="4w",
                     expect_ops=(LINEAR_Q4GSW,))
    return case, _lowered(case)


@pytest.fixture(scope="session")
def linear_8da4w_fp32zp():
    case = ModelCase(name="test_linear", build=Linear, inputs=_activations((1, 3, 128)), recipe="8da4w-fp32zp",
                     expect_ops=(LINEAR_DQ8CA_Q4GSW,))
    return case, _lowered(case)


@pytest.fixture(scope="session")
def tied():
    case = ModelCase(name="test_tied", build=TiedLMHead, inputs=_tokens(256, 4), recipe="emb4w+4w")
    return case, _lowered(case)
