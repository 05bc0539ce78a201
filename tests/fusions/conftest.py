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


def _catalogue_lowering(pattern: str):
    from vkdiff.cases.catalog import all_model_cases

    (case,) = all_model_cases(pattern)
    return case, _lowered(case)


@pytest.fixture(scope="session")
def vit_q8():
    """The ViT token path, static int8 on Vulkan (the catalogue case, lowered once)."""
    return _catalogue_lowering(r"^vit_token_path_d1\[pt2e-xnnpack-perchannel-vulkan\]$")


@pytest.fixture(scope="session")
def vit_q8_unfixed(vit_q8):
    """The same case quantized with the pre-fix cat annotation (``pt2e.unfixed_cat_annotation``)."""
    import dataclasses
    import functools

    from vkdiff.lowering.pt2e import quantize_pt2e_xnnpack_unfixed
    from vkdiff.lowering.recipes import RECIPES

    case = dataclasses.replace(vit_q8[0], recipe="pt2e-xnnpack-perchannel-unfixed")
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(RECIPES, case.recipe, functools.partial(quantize_pt2e_xnnpack_unfixed, per_channel=True))
        return case, _lowered(case)


@pytest.fixture(scope="session")
def mobilenet_q8():
    """The MobileNet-style static-int8 case (relu6 left as dequantize → hardtanh → quantize chains)."""
    return _catalogue_lowering(r"^mobilenet_q8\[")
