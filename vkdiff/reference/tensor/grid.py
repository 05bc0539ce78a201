"""Reference grid ops: ``aten.grid_sampler_2d`` (ATen's ``grid_sampler_2d_cpu``) and ET-VK's ``grid_priors``.

Pure numpy in float64.
"""

from __future__ import annotations

import numpy as np

__all__ = ["grid_sampler_2d", "grid_priors"]

PADDING_MODES = {0: "zeros", 1: "border", 2: "reflection"}
INTERPOLATION_MODES = {0: "bilinear", 1: "nearest"}


def _unnormalize(coord: np.ndarray, size: int, align_corners: bool) -> np.ndarray:
    """``grid_sampler_unnormalize``: -1 and 1 are the corner pixels' centres (aligned) or outer edges (not)."""
    return (coord + 1) / 2 * (size - 1) if align_corners else ((coord + 1) * size - 1) / 2


def _reflect(coord: np.ndarray, twice_low: int, twice_high: int) -> np.ndarray:
    """``reflect_coordinates``: fold ``coord`` into ``[twice_low/2, twice_high/2]`` by reflection."""
    if twice_low == twice_high:
        return np.zeros_like(coord)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    folded = np.abs(coord - low)
    extra, flips = np.fmod(folded, span), np.floor(folded / span)
    return np.where(flips % 2 == 0, extra + low, span - extra + low)


def _source_index(coord: np.ndarray, size: int, padding: str, align_corners: bool) -> np.ndarray:
    """``grid_sampler_compute_source_index``: pixel coordinate after the padding mode."""
    coord = _unnormalize(coord, size, align_corners)
    if padding == "reflection":
        coord = _reflect(coord, 0, 2 * (size - 1)) if align_corners else _reflect(coord, -1, 2 * size - 1)
    if padding in ("border", "reflection"):
        coord = np.clip(coord, 0, size - 1)
    return coord


def _gather(x: np.ndarray, iy: np.ndarray, ix: np.ndarray) -> np.ndarray:
    """``x[n, :, iy, ix]`` per grid point (``[N, C, Hout, Wout]``), zero where the index is outside."""
    n_batch, _, h, w = x.shape
    inside = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
    yc, xc = np.clip(iy, 0, h - 1), np.clip(ix, 0, w - 1)
    batch = np.arange(n_batch)[:, None, None]
    values = x[batch, :, yc, xc]
    return np.moveaxis(values * inside[..., None], -1, 1)


def grid_sampler_2d(input, grid, interpolation_mode=0, padding_mode=0, align_corners=False) -> np.ndarray:
    """Reference for ``aten.grid_sampler_2d``: sample ``input[N, C, H, W]`` at ``grid[N, Ho, Wo, (x, y)]``.

    With ``u = unnormalize(gx, W)`` (aligned: ``(gx + 1)/2 · (W − 1)``; else ``((gx + 1)·W − 1)/2``),
    then the padding mode (border: clip to ``[0, W − 1]``; reflection: reflect, then clip; zeros: none)::

        bilinear: out = Σ_{corners} x[y_c, x_c] · (1 − |u − x_c|)(1 − |v − y_c|), 0 outside the input
        nearest:  out = x[round_half_even(v), round_half_even(u)], 0 outside

    =================  ==================================
    interpolation_mode 0 bilinear, 1 nearest (2 bicubic: not in scope)
    padding_mode       0 zeros, 1 border, 2 reflection
    =================  ==================================
    """
    x = np.asarray(input, np.float64)
    g = np.asarray(grid, np.float64)
    mode, padding = INTERPOLATION_MODES.get(int(interpolation_mode)), PADDING_MODES.get(int(padding_mode))
    if mode is None or padding is None:
        raise ValueError(f"Unsupported grid_sampler_2d mode {interpolation_mode} / padding {padding_mode}: "
                         f"interpolation in {INTERPOLATION_MODES}, padding in {PADDING_MODES}")
    h, w = x.shape[2:]
    u = _source_index(g[..., 0], w, padding, bool(align_corners))
    v = _source_index(g[..., 1], h, padding, bool(align_corners))
    if mode == "nearest":
        return _gather(x, np.rint(v).astype(np.int64), np.rint(u).astype(np.int64))
    x0, y0 = np.floor(u).astype(np.int64), np.floor(v).astype(np.int64)
    wx, wy = u - x0, v - y0
    out = 0
    for dy, fy in ((0, 1 - wy), (1, wy)):
        for dx, fx in ((0, 1 - wx), (1, wx)):
            out = out + _gather(x, y0 + dy, x0 + dx) * (fy * fx)[:, None]
    return out


def grid_priors(self, stride, offset) -> np.ndarray:
    """Reference for ``et_vk.grid_priors``: ``[(x + offset)·stride, (y + offset)·stride]`` for each (y, x) of the
    input's last two dims, row-major (``[H·W, 2]``)."""
    h, w = np.shape(self)[-2:]
    xs = (np.arange(w, dtype=np.float64) + float(offset)) * int(stride)
    ys = (np.arange(h, dtype=np.float64) + float(offset)) * int(stride)
    yy, xx = np.meshgrid(ys, xs, indexing="ij")
    return np.stack([xx.reshape(-1), yy.reshape(-1)], axis=-1)
