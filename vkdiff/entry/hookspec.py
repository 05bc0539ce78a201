"""Hooks the vkdiff pytest plugin offers (registered through ``pytest_addhooks``)."""

from __future__ import annotations

import pytest


@pytest.hookspec(firstresult=True)
def pytest_vkdiff_run_item(item, session):
    """Run one vkdiff item and return its ``Result`` or list of results (the first non-None answer wins).

    The default implementation is ``session.runner.run(item.case, item.device)``: the kernel
    case on the item's device, or the model case's checks on the host, with known upstream
    bugs attached. A replacement that builds its own results should pass them through
    ``vkdiff.verdicts.expectations.annotate``. Override it to wrap or replace execution, e.g.::

        @pytest.hookimpl(tryfirst=True)
        def pytest_vkdiff_run_item(item, session):
            if "fp16" in item.case.id and item.device == "llvmpipe":
                return None  # fall through to the default
    """
