"""Each node's reference on the device's own inputs: what the node-by-node verdict holds a node's outputs to.

A node is compared locally: the reference op applied to the values the device read back
for its inputs (a node that computes correctly from wrong inputs stays within tolerance),
and a mutated constant (a KV cache) as the reference op applied to the device's state
before the node. ``vkdiff.verdicts.nodes`` compares; this computes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from vkdiff.datamodel import Delegate
from vkdiff.executors import interpret


@dataclasses.dataclass(kw_only=True)
class NodeExpectation:
    """The reference of one node on the device's inputs."""

    expected: tuple[np.ndarray, ...]
    """Each output (float64, in the declared dims)."""
    magnitude: Any
    """The reduction magnitude (per output for a tuple), or None."""
    states: dict[int, np.ndarray]
    """Each mutated state as the reference op leaves it."""


def _value_for_reference(delegate: Delegate, vid: int, device_value: Any) -> Any:
    if vid not in delegate.tensors:
        return device_value
    return np.asarray(device_value).astype(delegate.tensors[vid].dtype, copy=False)


def device_values(delegate: Delegate, run) -> dict[int, Any]:
    """Every value the run read back, tensors in their declared dtype (as reference ops take them)."""
    return {vid: _value_for_reference(delegate, vid, v) for vid, v in run.values.items()}


def node_expectation(delegate: Delegate, node, device_env: dict[int, Any]
                     ) -> tuple[dict[int, Any], tuple[np.ndarray, ...], Any]:
    """(env, expected outputs, magnitude) of the reference op on the node's device inputs; ``env`` holds each
    mutated state as the reference leaves it."""
    env = dict(device_env)
    env.update({vid: np.array(v, delegate.tensors[vid].dtype) for vid, v in node.states_before.items()})
    expected, magnitude = interpret.evaluate_node(delegate, node.call, env)
    return env, expected, magnitude


def expect_nodes(delegate: Delegate, run) -> list[NodeExpectation]:
    """The reference of every node of a delegate run (``DelegateRun``), in run order."""
    device_env, out = device_values(delegate, run), []
    for node in run.nodes:
        env, expected, magnitude = node_expectation(delegate, node, device_env)
        out.append(NodeExpectation(expected=expected, magnitude=magnitude,
                                   states={vid: env[vid] for vid in node.states_after}))
    return out
