"""Lowered programs shared by the fusion-rule tests (lowered once per session, cached on disk)."""

from __future__ import annotations

import pytest

from vkdiff.cases.model_case import LINEAR_DQ8CA_Q4GSW, LINEAR_Q4GSW, ModelCase
from vkdiff.cases.models import Linear, TiedLMHead, random_activations, random_tokens


def _lowered(case: ModelCase):
    from vkdiff.capture import quiet_libraries
    from vkdiff.lowering.lower import lower

    with quiet_libraries():
        return lower(case)


@pytest.fixture(scope="session")
def linear_4w():
    case = ModelCase(name="test_linear", build=Linear, inputs=random_activations((1, 3, 128)), recipe="4w",
                     expect_ops=(LINEAR_Q4GSW,))
    return case, _lowered(case)


@pytest.fixture(scope="session")
def linear_8da4w_fp32zp():
    case = ModelCase(name="test_linear", build=Linear, inputs=random_activations((1, 3, 128)), recipe="8da4w-fp32zp",
                     expect_ops=(LINEAR_DQ8CA_Q4GSW,))
    return case, _lowered(case)


@pytest.fixture(scope="session")
def tied():
    case = ModelCase(name="test_tied", build=TiedLMHead, inputs=random_tokens(256, 4), recipe="emb4w+4w")
    return case, _lowered(case)
