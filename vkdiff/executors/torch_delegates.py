"""A Vulkan delegate evaluated op by op with torch's own CPU implementations: the fallback that keeps a program going.

When neither a device nor the numpy references can run a delegate (an op vkdiff has no
launcher or reference for yet), the delegates after it still need their inputs. Every
op of a ``VkGraph`` is a torch operator (``aten.*``, and ``et_vk.*`` registers CPU
implementations in ``custom_ops_lib``), called here with the serialized arguments in
schema order. Not an oracle (``et_vk.linear_dq8ca_q4gsw``'s CPU implementation ignores
activation quantization): results say which delegates were fed through it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vkdiff.datamodel import Delegate, DelegateEntry
from vkdiff.executors.host_ops import HostOpError, call, declared_types, to_numpy


class TorchDelegates:
    """Evaluates a Vulkan delegate with torch's CPU ops (KV caches and other mutated constants kept per delegate)."""

    def __init__(self):
        self.state: dict[int, dict[int, Any]] = {}

    def __call__(self, entry: DelegateEntry, inputs: list[Any]) -> tuple[list[Any], Any]:
        """Outputs of ``entry`` for ``inputs``.

        Raises:
            HostOpError: an op torch does not know here, or one that rejected its arguments.
        """
        if entry.graph is None:
            raise HostOpError(f"{entry.backend} delegate: only Vulkan delegates are evaluated op by op")
        graph = entry.graph
        env: dict[int, Any] = dict(self.state.setdefault(entry.index, {}))
        env.update({vid: x for vid, x in zip(graph.input_ids, inputs)})
        for op in graph.ops:
            self._run(graph, op.name, op.args, env)
        self.state[entry.index] = {vid: env[vid] for vid in graph.constants if vid in env}
        return [env[vid] for vid in graph.output_ids], env

    def _run(self, graph: Delegate, name: str, args: list[int], env: dict[int, Any]) -> None:
        types = declared_types(name)
        if len(args) - 1 != len(types):
            raise HostOpError(f"{name}: the graph passes {len(args) - 1} arguments, torch's schema has {len(types)}")
        results, written = call(name, [_value(graph, vid, env) for vid in args[:-1]], where=" (torch CPU)")
        out = args[-1]
        items = graph.values[out].get("items") if graph.values[out].get("kind") == "ValueList" else None
        for vid, result in zip(list(items) if items is not None else [out], results):
            env[vid] = to_numpy(result)
        for index, tensor in written.items():
            env[args[index]] = to_numpy(tensor)

def _value(graph: Delegate, vid: int, env: dict[int, Any]) -> Any:
    if vid in env:
        return env[vid]
    if vid in graph.constants:
        return np.array(graph.constants[vid])
    value = graph.values[vid]
    kind = value.get("kind")
    if kind == "ValueList":
        return [_value(graph, item, env) for item in value["items"]]
    if kind == "VkTensor":
        raise HostOpError(f"value %{vid} is read before any op writes it")
    return graph.value(vid)
