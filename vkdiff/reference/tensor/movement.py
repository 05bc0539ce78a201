"""Data-movement ops in numpy: expand, repeat, flip, constant padding, scalar tensors, dim-order copies.

Each function takes its op's schema arguments by name. These ops move values without
arithmetic, so the result keeps the input's dtype (a float16 NaN, -0.0 or subnormal stays
what it is); only ``constant_pad_nd``'s fill and ``scalar_tensor``'s scalar are converted
to the output dtype, as ATen converts them (round to nearest even; past float16's range: ±inf;
to an integer dtype: truncation toward zero).

===================  ==================================================================
op                   output
===================  ==================================================================
expand_copy          ``broadcast_to(self, size)``, ``-1`` keeping the aligned size
repeat               ``tile(self, repeats)`` (``len(repeats) >= self.ndim``)
flip                 ``self`` reversed along every dim in ``dims``
constant_pad_nd      pairs ``(before, after)`` from the last dim outwards; negative crops
scalar_tensor        a 0-dim tensor ``s`` in ``dtype`` (float32 when None)
_to_dim_order_copy   ``self`` in ``dtype``; the dim order changes no value
===================  ==================================================================

Example::

    >>> constant_pad_nd(np.arange(4.0).reshape(2, 2), [1, -1], value=9.0).tolist()
    [[9.0, 0.0], [9.0, 2.0]]
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

__all__ = ["expand_copy", "repeat", "flip", "constant_pad_nd", "scalar_tensor", "to_dim_order_copy"]


def expand_copy(self, size: Sequence[int], implicit: bool = False) -> np.ndarray:
    """``self`` broadcast to ``size`` (``-1``: the aligned input size; new leading dims must be given)."""
    x = np.asarray(self)
    offset = len(size) - x.ndim
    if offset < 0:
        raise ValueError(f"expand: {len(size)} sizes for a {x.ndim}-dim tensor")
    target = [x.shape[i - offset] if int(s) == -1 and i >= offset else int(s) for i, s in enumerate(size)]
    if any(s < 0 for s in target):
        raise ValueError(f"expand: size -1 not allowed in a leading, non-existing dimension ({list(size)})")
    return np.broadcast_to(x, target).copy()


def repeat(self, repeats: Sequence[int]) -> np.ndarray:
    """``self`` tiled ``repeats`` times per dim (sizes right-aligned with ``repeats``)."""
    x = np.asarray(self)
    if len(repeats) < x.ndim:
        raise ValueError(f"repeat: {len(repeats)} repeats for a {x.ndim}-dim tensor")
    return np.tile(x, [int(r) for r in repeats])


def flip(self, dims: Sequence[int]) -> np.ndarray:
    """``self`` reversed along each of ``dims`` (negatives count from the end)."""
    x = np.asarray(self)
    axes = sorted({int(d) % x.ndim for d in dims}) if x.ndim else []
    return np.flip(x, axis=tuple(axes)).copy() if axes else x.copy()


def constant_pad_nd(self, pad: Sequence[int], value: float = 0) -> np.ndarray:
    """Pad (or crop, where negative) ``self`` with ``value``: ``pad[2k], pad[2k+1]`` before/after dim ``-1-k``.

    The fill is ``value`` converted to the output dtype (float64 here for float inputs: the runner rounds
    the reference to the case dtype, past float16's range to ±inf).
    """
    x = np.asarray(self)
    if len(pad) % 2 or len(pad) > 2 * x.ndim:
        raise ValueError(f"constant_pad_nd: pad of length {len(pad)} for a {x.ndim}-dim tensor")
    out = x.astype(np.float64) if x.dtype.kind == "f" else x
    fill = float(value) if x.dtype.kind == "f" else int(value)
    for k in range(len(pad) // 2):
        axis, before, after = x.ndim - 1 - k, int(pad[2 * k]), int(pad[2 * k + 1])
        index = [slice(None)] * x.ndim
        index[axis] = slice(max(-before, 0), out.shape[axis] - max(-after, 0))
        out = out[tuple(index)]
        widths = [(0, 0)] * x.ndim
        widths[axis] = (max(before, 0), max(after, 0))
        out = np.pad(out, widths, mode="constant", constant_values=fill)
    return np.ascontiguousarray(out)


def scalar_tensor(s, dtype: Optional[str] = None, layout=None, device=None, pin_memory=None) -> np.ndarray:
    """A 0-dim tensor holding ``s`` in ``dtype`` (ATen's default float32 when None)."""
    target = np.dtype(dtype) if dtype is not None else np.dtype(np.float32)
    if target.kind != "f":
        return np.array(np.trunc(float(s))).astype(target)
    with np.errstate(over="ignore"):
        return np.array(s, np.float64).astype(target)


def to_dim_order_copy(self, dtype: Optional[str] = None, layout=None, device=None, pin_memory=None,
                      non_blocking: bool = False, dim_order: Optional[Sequence[int]] = None) -> np.ndarray:
    """``self`` converted to ``dtype`` (floats round to nearest even; to integers: toward zero)."""
    x = np.array(self)
    if dtype is None:
        return x
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(np.dtype(dtype))
