"""Knob spaces of kernel and model cases for ``bisect knob``: the catalogue says which values a knob can take."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from vkdiff.cases.kernels import KernelCase, all_cases
from vkdiff.datamodel import Status
from vkdiff.bisect.knob import Config

LIMITS = "limits"
LOCAL_WG = "local_wg"
ROUTE = "route"
SHAPE = "shape."
FLAG = "flag."
NATIVE_LIMITS = "native"
"""The ``limits`` value of a device created with its own limits."""


def _local_wg_values() -> list[str]:
    from vkdiff.device.runtime.workgroups import CHOICES, DEFAULT

    return [DEFAULT, *CHOICES]


def _limits_values() -> list[str]:
    from vkdiff.device.transports.limits import profiles

    return [NATIVE_LIMITS, *profiles()]


class KernelSpace:
    """dtype, storage, memory layout, launcher options, input flags, every named size, the limits profile and the local
    workgroup size of a kernel case.

    Args:
        case (KernelCase): the failing case.
        run (Callable[[KernelCase, str | None, str], Status]): its verdict on the device under a limits profile and a
            local workgroup size (``default``: ET-VK's pick).
    """

    def __init__(self, case: KernelCase, run: Callable[[KernelCase, str | None, str], Status],
                 limits: str | None = None, local_wg: str | None = None):
        from vkdiff.device.runtime.workgroups import DEFAULT

        self.case, self.run, self.limits = case, run, limits or NATIVE_LIMITS
        self.local_wg = local_wg or DEFAULT
        self.catalogue = [c for c in all_cases() if c.op == case.op and c.name == case.name]

    @staticmethod
    def _of(case: KernelCase) -> Config:
        config: Config = {"dtype": case.dtype, "storage": case.storage, "layout": case.layout, **dict(case.options)}
        config.update({f"{SHAPE}{k}": v for k, v in case.shape})
        config.update({f"{FLAG}{f}": True for f in case.flags})
        return config

    def config(self) -> Config:
        flags = {f"{FLAG}{f}": False for c in self.catalogue for f in c.flags}
        return {**flags, **self._of(self.case), LIMITS: self.limits, LOCAL_WG: self.local_wg}

    def alternatives(self, knob: str) -> list[Any]:
        own = self.config()[knob]
        if knob == LIMITS:
            return [v for v in _limits_values() if v != own]
        if knob == LOCAL_WG:
            return [v for v in _local_wg_values() if v != own]
        seen = [self._of(c).get(knob, False if knob.startswith(FLAG) else None) for c in self.catalogue]
        return sorted({v for v in seen if v is not None and v != own}, key=repr)

    def case_for(self, config: Config) -> KernelCase:
        shape = tuple((k, int(config[f"{SHAPE}{k}"])) for k, _ in self.case.shape)
        options = tuple((k, config[k]) for k, _ in self.case.options)
        flags = tuple(sorted(k[len(FLAG):] for k, v in config.items() if k.startswith(FLAG) and v))
        return dataclasses.replace(self.case, dtype=config["dtype"], storage=config["storage"], layout=config["layout"],
                                   shape=shape, options=options, flags=flags)

    def evaluate(self, config: Config) -> Status | None:
        limits = None if config[LIMITS] == NATIVE_LIMITS else config[LIMITS]
        return self.run(self.case_for(config), limits, config[LOCAL_WG])


class ModelSpace:
    """The catalogue's variants of one model (recipe, dtype, storage... as knobs), the routing and limits profile."""

    def __init__(self, case, run: Callable[[Any, str, str | None, str], Status], route: str = "native",
                 limits: str | None = None, local_wg: str | None = None, *, transport: str = "wgpu"):
        from vkdiff.cases.catalog import all_model_cases
        from vkdiff.device.runtime.workgroups import DEFAULT

        self.case, self.run, self.transport = case, run, transport
        self.route, self.limits, self.local_wg = route, limits or NATIVE_LIMITS, local_wg or DEFAULT
        self.catalogue = [c for c in all_model_cases(None) if c.name == case.name]
        self.names = sorted({k for c in self.catalogue for k in c.knobs})

    def _of(self, case) -> Config:
        return {k: case.knobs.get(k) for k in self.names}

    def config(self) -> Config:
        return {**self._of(self.case), ROUTE: self.route, LIMITS: self.limits, LOCAL_WG: self.local_wg}

    def alternatives(self, knob: str) -> list[Any]:
        from vkdiff.device.runtime.routing import usable_profiles

        own = self.config()[knob]
        if knob == ROUTE:
            return [r for r in usable_profiles(self.transport) if r != own]
        if knob == LIMITS:
            return [v for v in _limits_values() if v != own]
        if knob == LOCAL_WG:
            return [v for v in _local_wg_values() if v != own]
        return sorted({self._of(c)[knob] for c in self.catalogue} - {own}, key=repr)

    def evaluate(self, config: Config) -> Status | None:
        wanted = {k: config[k] for k in self.names}
        found = [c for c in self.catalogue if self._of(c) == wanted]
        if not found:
            return None
        limits = None if config[LIMITS] == NATIVE_LIMITS else config[LIMITS]
        return self.run(found[0], config[ROUTE], limits, config[LOCAL_WG])
