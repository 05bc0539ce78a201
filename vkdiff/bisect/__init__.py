"""Bisect a failing verdict to where it lives: the node, the knobs, the commit, the devices (one module each)."""

from vkdiff.bisect.knob import KnobBisect, KnobSpace, bisect_knobs
from vkdiff.bisect.node import NodeBisect, bisect_node

__all__ = ["KnobBisect", "KnobSpace", "NodeBisect", "bisect_knobs", "bisect_node"]
