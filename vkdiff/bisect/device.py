"""``vkdiff bisect device``: a case on every adapter, routing profile and limits profile, grouped by result.

Each configuration's signature is its status plus where the failure is (the first
diverging node and shader of a model case, the shader of a kernel case). Configurations
are grouped by signature, and each group is described by the one setting that sets it
apart when there is one ("only where route = mali", "only where device = llvmpipe").
Kernel cases do not route (only model delegates do), so they sweep adapters and limits.

Over merged results (``--results``, several runners' files) nothing runs: each result of
the case is a configuration, described by its device, transport, driver, knobs and the
probed traits its device recorded, so the setting that sets a group apart can be a
trait ("only where trait.f16_denorm = flushed") as well as a device.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

Config = dict[str, str]


@dataclasses.dataclass(kw_only=True)
class DeviceBisect:
    case: str
    groups: dict[str, list[Config]] = dataclasses.field(default_factory=dict)
    """Configurations by signature, the most common first."""

    def lines(self) -> list[str]:
        out = [f"{self.case}: {sum(len(g) for g in self.groups.values())} configurations, {len(self.groups)} "
               f"distinct results"]
        every = [c for group in self.groups.values() for c in group]
        for rank, (signature, group) in enumerate(self.groups.items()):
            said = "everywhere else" if rank == 0 and len(self.groups) > 1 else describe(group, every)
            out.append(f"{signature}: {said} ({len(group)} configurations)")
        return out


def signature(result) -> str:
    where = result.node.get("index")
    if where is not None:
        return f"{result.status} at node {where} ({result.shader})"
    return f"{result.status} ({result.shader})" if result.shader and result.status != "PASS" else result.status


def describe(group: list[Config], every: list[Config]) -> str:
    """The one setting shared by exactly this group's configurations (a trait of all its devices before a list of
    devices), else the values of a setting only this group has, else the list of them."""
    if len(group) == len(every):
        return "everywhere"
    for key in every[0]:
        values = {c[key] for c in group}
        if len(values) == 1:
            value = values.pop()
            if sum(c[key] == value for c in every) == len(group):
                return f"only where {key} = {value}"
    for key in every[0]:
        values = {c[key] for c in group}
        others = {c[key] for c in every if c not in group}
        if values.isdisjoint(others) and len(values) > 1:
            return f"only where {key} in {sorted(values)}"
    return "; ".join(", ".join(f"{k}={v}" for k, v in c.items()) for c in group)


def bisect_devices(case_id: str, configs: list[Config], run: Callable[[Config], Any]) -> DeviceBisect:
    """Run every configuration and group them by signature."""
    groups: dict[str, list[Config]] = {}
    for config in configs:
        groups.setdefault(signature(run(config)), []).append(config)
    ordered = dict(sorted(groups.items(), key=lambda item: -len(item[1])))
    return DeviceBisect(case=case_id, groups=ordered)


def configuration(result) -> Config:
    """A recorded result as a configuration: where it ran, under which knobs, and its device's scalar traits."""
    info, knobs = result.device_info or {}, result.knobs or {}
    config = {"device": result.device, "transport": str(info.get("transport", "wgpu")),
              "driver": str(info.get("driver", "")), "vendor": str(info.get("vendor", "")),
              "route": str(knobs.get("route", "native")), "limits": str(knobs.get("limits", "native")),
              "profile": str(info.get("profile", "") or "none")}
    traits = info.get("traits") or {}
    config.update({f"trait.{name}": str(value) for name, value in sorted(traits.items())
                   if isinstance(value, (str, bool, int, float))})
    return config


def bisect_results(case_id: str, results: list) -> DeviceBisect:
    """Group the recorded results of ``case_id`` (one per configuration, the latest kept) by signature."""
    latest: dict[str, tuple[Config, Any]] = {}
    for result in results:
        if result.case == case_id and result.rule in ("device", ""):
            config = configuration(result)
            latest[repr(sorted(config.items()))] = (config, result)
    keys = sorted({k for config, _ in latest.values() for k in config}, key=lambda k: (k.startswith("trait."), k))
    padded = {key: {k: config.get(k, "-") for k in keys} for key, (config, _) in latest.items()}
    found = {repr(sorted(config.items())): latest[key][1] for key, config in padded.items()}
    return bisect_devices(case_id, list(padded.values()), lambda config: found[repr(sorted(config.items()))])
