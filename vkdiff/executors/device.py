"""Vulkan delegates of a method run on one device, node by node: the device's ``DelegateExecutor``.

Each delegate is built once (``DelegateGraph``: ``VulkanBackend::init``) on first call and
executed at every call, so KV caches persist across a generation's calls as on a phone.
A delegate that cannot be built (an op without a launcher, a shader naga cannot load, a
limit the device lacks) fails every call the same way, without being rebuilt. What a call
returns is its ``DelegateRun``: every node's probed values, dispatches and timings;
judging them is the verdicts' work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vkdiff.datamodel import DelegateEntry
from vkdiff.device.graph.delegate import DelegateGraph, DelegateRun, MissingLaunchersError, Tamper, stale_for
from vkdiff.device.runtime.routing import Route


class NotVulkanError(LookupError):
    """A delegate of another backend: no device here runs it."""


class DeviceDelegates:
    """Runs the Vulkan delegates of one method on ``ctx`` (one ``DelegateGraph`` per delegate, built once).

    Args:
        ctx (DeviceContext): the device.
        route (Route): the routing profile launchers pick shaders by.
        tree (Path | None): the ExecuTorch tree (shaders and ``port-stale``).
        probe (bool): read back every node's outputs (False: only the delegate outputs, for timing).
        exact (bool): whole-graph mode: record ET-VK's own barriers between dispatches and bind each shared object's
            users to one allocation (raw Vulkan; see ``ComputeGraph``), and check the stream for hazards.
        tamper (dict[int, Tamper] | None): per delegate index, host work injected after each node (tests).
        refuse (dict[int, str] | None): per delegate index, why it must not run here (ops vkdiff lacks a launcher
            or a reference for): its calls raise ``MissingLaunchersError`` with that reason, before any device work.
    """

    def __init__(self, ctx: Any, *, route: Route, tree: Path | None = None, probe: bool = True,
                 tamper: dict[int, Tamper] | None = None, refuse: dict[int, str] | None = None, exact: bool = False):
        self.ctx, self.route, self.tree, self.probe, self.exact = ctx, route, tree, probe, exact
        self.tamper = tamper or {}
        self.graphs: dict[int, DelegateGraph] = {}
        self.failed: dict[int, BaseException] = {index: MissingLaunchersError(reason)
                                                  for index, reason in (refuse or {}).items()}

    def __call__(self, entry: DelegateEntry, inputs: list[Any]) -> tuple[list[Any], DelegateRun]:
        """Execute ``entry`` for ``inputs``; raises what building or running it raised (with ``stale`` set)."""
        if entry.graph is None:
            raise NotVulkanError(f"{entry.backend} delegate: vkdiff runs Vulkan delegates only")
        if entry.index in self.failed:
            raise self.failed[entry.index]
        try:
            graph = self.graphs.get(entry.index)
            if graph is None:
                graph = self.graphs[entry.index] = DelegateGraph(
                    self.ctx, entry.graph, route=self.route, tree=self.tree, probe=self.probe,
                    tamper=self.tamper.get(entry.index), exact=self.exact, alias=self.exact)
            run = graph.execute(inputs)
        except Exception as exc:
            exc.stale = stale_for(entry.graph, self.tree)
            exc.delegate = entry.index
            if entry.index not in self.graphs:
                self.failed[entry.index] = exc
            raise
        return run.outputs, run
