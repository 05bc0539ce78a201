"""Fault injection into a delegate run: a wrong value written into one node's output while the graph executes."""

from __future__ import annotations

from typing import Callable

import numpy as np

from vkdiff.device.graph.staging import read_nchw, write_nchw


def nudge(target: int, change: Callable[[np.ndarray], None], when: Callable[[], bool] = lambda: True):
    """A ``tamper`` that applies ``change`` to node ``target``'s outputs (flattened NCHW) whenever ``when()``."""
    def tamper(index, graph, outputs):
        if index == target and when():
            for tensor in outputs.values():
                value = read_nchw(graph, tensor).get()
                change(value.reshape(-1))
                write_nchw(graph, tensor, value)
    return tamper


def add_half_at_3(flat: np.ndarray) -> None:
    flat[3] += 0.5
