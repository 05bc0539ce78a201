"""Hooks the vkdiff pytest plugin offers (registered through ``pytest_addhooks``)."""

from __future__ import annotations

import pytest


@pytest.hookspec(firstresult=True)
def pytest_vkdiff_run_item(item, session):
    """Run one vkdiff item and return its ``Result`` (the first non-None answer wins).

    The default implementation runs the kernel case on the item's device, or checks the
    model case on the host. Override it to wrap or replace execution, e.g.::

        @pytest.hookimpl(tryfirst=True)
        def pytest_vkdiff_run_item(item, session):
            if "fp16" in item.case.id and item.device == "llvmpipe":
                return None  # fall through to the default
    """
