"""Calls of a dynamically shaped model case at its upper bound and below it, on the same lowered program.

ET-VK serializes each dynamic dim at its upper bound (``Dim(max=...)``) and resizes the graph
to each call's sizes. A case that declares ``dynamic_shapes`` but no further calls of its own
gets them here: one at the upper bound (where the Dim is bounded), then at ``ceil(s/2)``,
``s - 1`` and 1 of the example's sizes (each distinct one, within the Dim's minimum), every
input sharing a Dim resized together. Inputs are the
example's own values, cycled along each resized dim (so indices stay valid), never new data.

Example::

    >>> import torch
    >>> from torch.export import Dim
    >>> class M(torch.nn.Module):
    ...     def forward(self, x):
    ...         return x + 1
    >>> calls = below_bound_calls(M(), (torch.arange(6.0).reshape(2, 3),), {"x": {1: Dim("w", min=1, max=8)}})
    >>> [tuple(c[0].shape) for c in calls]
    [(2, 8), (2, 2), (2, 1)]
"""

from __future__ import annotations

import inspect
import math
from typing import Any


def _dims_by_input(model: Any, inputs: tuple, dynamic_shapes: Any) -> list[dict[int, Any]]:
    """Per positional input, its dynamic dims (axis → ``Dim``), from a dict by argument name or a sequence."""
    if isinstance(dynamic_shapes, dict):
        names = list(inspect.signature(model.forward).parameters)[:len(inputs)]
        specs = [dynamic_shapes.get(name) for name in names]
    else:
        specs = list(dynamic_shapes) + [None] * (len(inputs) - len(dynamic_shapes))
    return [dict(spec) if isinstance(spec, dict) else {} for spec in specs]


def _bound(dim: Any) -> int | None:
    upper = getattr(dim, "max", None)
    try:
        return int(upper) if upper is not None and int(upper) < 1 << 20 else None
    except (TypeError, ValueError, OverflowError, AttributeError):  # torch's int_oo (sympy): unbounded
        return None


def _cycled(tensor: Any, axis: int, size: int) -> Any:
    import torch

    index = torch.arange(size) % tensor.shape[axis]
    return tensor.index_select(axis, index)


def below_bound_calls(model: Any, inputs: tuple, dynamic_shapes: Any) -> tuple[tuple, ...]:
    """Further calls (see the module docstring); empty when nothing is dynamic or no size differs."""
    per_input = _dims_by_input(model, inputs, dynamic_shapes)
    groups: dict[int, tuple[Any, int]] = {}
    for spec, x in zip(per_input, inputs):
        for axis, dim in spec.items():
            groups.setdefault(id(dim), (dim, int(x.shape[axis])))
    if not groups:
        return ()
    plans: list[dict[int, int]] = []
    bounded = {key: _bound(dim) for key, (dim, _) in groups.items()}
    if any(b is not None and b != size for (key, (_, size)), b in zip(groups.items(), bounded.values())):
        plans.append({key: bounded[key] or size for key, (_, size) in groups.items()})
    for shrink in (lambda s: math.ceil(s / 2), lambda s: s - 1, lambda s: 1):
        plan = {key: max(int(getattr(dim, "min", 1) or 1), 1, shrink(size)) for key, (dim, size) in groups.items()}
        if any(plan[key] != size for key, (_, size) in groups.items()) and plan not in plans:
            plans.append(plan)
    calls = []
    for plan in plans:
        call = []
        for spec, x in zip(per_input, inputs):
            for axis, dim in spec.items():
                x = _cycled(x, axis, plan[id(dim)])
            call.append(x)
        calls.append(tuple(call))
    return tuple(calls)
