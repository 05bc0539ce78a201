"""vkdiff: a correctness-verification harness and differential tester for ExecuTorch's Vulkan backend.

The Python API (``check``, ``module_case``, ``program_cases``) is imported on first use, so ``import vkdiff``
stays cheap for the CLI and the pytest plugin.
"""

__all__ = ["check", "module_case", "program_cases"]


def __getattr__(name: str):
    if name in __all__:
        from vkdiff.entry import api

        return getattr(api, name)
    raise AttributeError(f"module 'vkdiff' has no attribute {name!r}")
