"""Every module whose docstrings show examples runs them: each must have at least one, and none may fail."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "vkdiff"
WITH_EXAMPLES = sorted(".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)
                       for p in PACKAGE.rglob("*.py") if ">>>" in p.read_text(encoding="utf-8"))


def test_the_modules_with_examples_are_found():
    assert {"vkdiff.verdicts.compare", "vkdiff.capture", "vkdiff.datamodel.result"} <= set(WITH_EXAMPLES)


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_examples_run(name):
    results = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert results.attempted >= 1, f"{name} shows '>>>' yet doctest found no example"
    assert results.failed == 0
