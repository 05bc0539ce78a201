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


@pytest.hookspec
def pytest_vkdiff_cases(config):
    """Return the user's own cases: a list of ``vkdiff.module_case(...)`` / ``vkdiff.program_cases(...)`` results
    (and ``ModelCase`` or ``KernelCase`` objects). Every conftest that implements it adds to the session; the cases
    become items next to the catalogue's (``--vkdiff-suite user`` runs them alone), e.g.::

        import vkdiff

        def pytest_vkdiff_cases(config):
            return [vkdiff.module_case("models/encoder.py:make", recipe="8da4w"),
                    *vkdiff.program_cases("exported/encoder.pte", int_range=(0, 32000))]

    Called once per process (every xdist worker collects the same cases, so keep it deterministic).
    """
