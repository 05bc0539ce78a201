"""One module per ET-VK op, each registered by full op name; importing this package loads them all."""

import importlib
import pkgutil

from vkdiff.device.launchers.registry import LAUNCHERS, Launcher, NoLauncherError, Port, launcher_for, register_op

SHARED_MODULES = frozenset({"registry", "common", "arithmetic"})
"""Modules of this package that hold no launcher."""

for _module in pkgutil.iter_modules(__path__):
    if _module.name not in SHARED_MODULES:
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["LAUNCHERS", "Launcher", "NoLauncherError", "Port", "launcher_for", "register_op"]
