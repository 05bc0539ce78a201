"""Shared fixtures for the vkdiff.reference tests.

Every test gets its own numpy Generator seeded from a hash of the test's name
(including parametrisation), so runs are reproducible and independent of test
order.
"""

from __future__ import annotations

import numpy as np
import pytest

from .helpers import make_rng


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """Generator seeded from the (parametrised) test name."""
    return make_rng(request.node.name)
