"""One module per ET-VK ``ops/impl/*.cpp`` file that registers ops, named after it (``QuantizedLinear.cpp`` →
``quantized_linear.py``, a ``_suffix`` only where one file's port is split), each op registered by full op name in
the module of the file whose ``REGISTER_OPERATORS`` block names it; helpers, and the ports of files that register
no op, live in ``utils/``. Importing this package loads them all."""

import importlib
import pkgutil

from vkdiff.device.launchers.registry import LAUNCHERS, Launcher, NoLauncherError, Port, launcher_for, register_op

SHARED_MODULES = frozenset({"registry", "utils"})
"""Modules of this package that hold no launcher."""

for _module in pkgutil.iter_modules(__path__):
    if _module.name not in SHARED_MODULES:
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["LAUNCHERS", "Launcher", "NoLauncherError", "Port", "launcher_for", "register_op"]
