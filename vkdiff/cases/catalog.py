"""The default model cases: the small models, the static-int8 conv nets, the ViT token path (PT2E: XNNPACK and
Vulkan) and export_llama's tiny Llama."""

from __future__ import annotations

import re
from typing import Iterator

from vkdiff.cases.convnets import convnet_cases
from vkdiff.cases.llm import llm_cases
from vkdiff.cases.model_case import ModelCase
from vkdiff.cases.models import model_cases
from vkdiff.cases.vit import vit_cases


def default_model_cases() -> Iterator[ModelCase]:
    """Every model case of the default set, fastest families first."""
    yield from model_cases()
    yield from convnet_cases()
    yield from vit_cases()
    yield from llm_cases()


def all_model_cases(pattern: str | None = None) -> list[ModelCase]:
    """The default model cases whose id matches the regex ``pattern`` (search, not full match)."""
    regex = re.compile(pattern) if pattern else None
    return [c for c in default_model_cases() if regex is None or regex.search(c.id)]
