"""Which case and which device a ``bisect`` or ``repro`` command works on, checked before any device work."""

from __future__ import annotations

from vkdiff.datamodel.settings import RunSettings

import re


class SelectionError(ValueError):
    """Bad input to bisect or repro (printed as one line, exit status 2)."""


def find_case(case_id: str):
    """The kernel or model case with exactly this id."""
    from vkdiff.cases.kernels import all_cases

    pattern = "^" + re.escape(case_id) + "$"
    found = all_cases(pattern)
    if not found:
        from vkdiff.cases.catalog import all_model_cases

        found = all_model_cases(pattern)
    if not found:
        raise SelectionError(f"no case {case_id!r}; 'vkdiff run --list' prints every case id")
    return found[0]


def tree_and_adapter(et_src: str | None, device: str | None, settings: RunSettings):
    """The tree (``--et-src``) and the adapter (``--device``, else the first, through the run's transport), checked
    before any device work."""
    from vkdiff.device.transports.adapters import UnknownDeviceError, select
    from vkdiff.device.shaders.trees import EtSourceError, choose_tree

    try:
        tree = choose_tree(et_src)
        adapters = select([device] if device else [], via=settings.transport, validate=settings.validate,
                          profile=settings.device_profile)
    except (EtSourceError, UnknownDeviceError) as exc:
        raise SelectionError(str(exc)) from None
    if tree.path is None:
        raise SelectionError(f"bisect needs an ExecuTorch tree: {tree.note}")
    if not adapters:
        raise SelectionError("no Vulkan adapter found (install mesa-vulkan-drivers for lavapipe, or a GPU driver)")
    return tree, adapters[0]
