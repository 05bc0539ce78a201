"""2-D pooling and upsampling of ATen in float64, by explicit windows and explicit source indices.

Pooling (``[N, C, H, W]`` or ``[C, H, W]``; ``kernel_size``, ``stride``, ``padding``, ``dilation`` as
``[h, w]`` lists; an empty ``stride`` means the kernel size):

* output size per dim: ``(in + 2p - d(k-1) - 1 + (ceil ? s-1 : 0)) // s + 1``, minus one when
  ``ceil_mode`` and the last window starts at or past ``in + p`` (ATen ``pooling_output_shape``);
* window of output ``o``: input rows ``o*s - p + j*d`` for ``j < k``; positions outside the input are
  padding: they never win a max (as ``-inf``) and never add to a sum;
* ``max``: the largest value; its index is ``h * W + w`` in the input plane, the first in row-major
  window order on ties (``max_pool2d_with_indices``);
* ``avg``: the window sum over a divisor: ``divisor_override`` if given, else with
  ``count_include_pad`` the window clipped to ``[-p, in + p)``, else clipped to the input.

Upsampling (``[N, C, H, W]``; ``output_size`` ``[h, w]`` or ``scale_factors`` ``[sh, sw]``; output size
``floor(in * scale)``). Per dim ``scale = 1 / sf`` when a factor is given, else ``in / out``:

=========  ======================  ==================================================================
mode       align_corners           source coordinate of output ``o``
=========  ======================  ==================================================================
nearest    (none)                  ``min(floor(o * scale), in - 1)``, scale in float32 as ATen's
bilinear   False                   ``max(scale * (o + 0.5) - 0.5, 0)``, blended between floor and +1
bilinear   True                    ``o * (in - 1) / (out - 1)`` (0 when ``out == 1``)
=========  ======================  ==================================================================
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

__all__ = ["pool_output_size", "max_pool2d_with_indices", "max_pool2d", "avg_pool2d", "upsample_nearest2d",
           "upsample_bilinear2d", "upsample_output_size"]


def _pair(value, default: Sequence[int] | None = None) -> tuple[int, int]:
    """An ``int[2]`` argument: one int for both dims, ``[]`` for the default."""
    if value is None or (not np.isscalar(value) and len(value) == 0):
        if default is None:
            raise ValueError("a required int[2] argument is empty")
        return _pair(default)
    if np.isscalar(value):
        return int(value), int(value)
    values = [int(v) for v in value]
    return (values[0], values[0]) if len(values) == 1 else (values[0], values[1])


def pool_output_size(size: int, kernel: int, stride: int, pad: int, dilation: int, ceil_mode: bool) -> int:
    """ATen's ``pooling_output_shape``.

    Example::

        >>> pool_output_size(5, 2, 2, 0, 1, True), pool_output_size(5, 2, 2, 0, 1, False)
        (3, 2)
    """
    out = (size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    if out < 1:
        raise ValueError(f"pooling: output size {out} < 1 for input {size}, kernel {kernel}, stride {stride}")
    return out


def _windows(shape, kernel_size, stride, padding, dilation, ceil_mode):
    """Per output position (oh, ow): the input (h, w) taps of its window, padding included."""
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride, (kh, kw))
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    if ph > kh // 2 or pw > kw // 2:
        raise ValueError(f"pad should be at most half of effective kernel size, got padding {[ph, pw]}")
    oh = pool_output_size(shape[-2], kh, sh, ph, dh, ceil_mode)
    ow = pool_output_size(shape[-1], kw, sw, pw, dw, ceil_mode)
    rows = [[y * sh - ph + j * dh for j in range(kh)] for y in range(oh)]
    cols = [[x * sw - pw + j * dw for j in range(kw)] for x in range(ow)]
    return rows, cols, (ph, pw), (kh, kw)


def max_pool2d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1,
                            ceil_mode: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(values, indices)``: the window maxima and their ``h * W + w`` indices (int64)."""
    x = np.asarray(self, np.float64)
    rows, cols, _, _ = _windows(x.shape, kernel_size, stride, padding, dilation, ceil_mode)
    height, width = x.shape[-2:]
    values = np.empty(x.shape[:-2] + (len(rows), len(cols)), np.float64)
    indices = np.empty(values.shape, np.int64)
    for i, taps_h in enumerate(rows):
        for j, taps_w in enumerate(cols):
            taps = [(h, w) for h in taps_h if 0 <= h < height for w in taps_w if 0 <= w < width]
            window = np.stack([x[..., h, w] for h, w in taps], axis=-1)
            first = np.argmax(window, axis=-1)
            values[..., i, j] = np.take_along_axis(window, first[..., None], -1)[..., 0]
            flat = np.array([h * width + w for h, w in taps], np.int64)
            indices[..., i, j] = flat[first]
    return values, indices


def max_pool2d(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode: bool = False) -> np.ndarray:
    """The window maxima (``aten.max_pool2d.default``)."""
    return max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)[0]


def avg_pool2d(self, kernel_size, stride=(), padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: Optional[int] = None) -> np.ndarray:
    """Window sums over ATen's divisor (``aten.avg_pool2d.default``)."""
    x = np.asarray(self, np.float64)
    rows, cols, (ph, pw), _ = _windows(x.shape, kernel_size, stride, padding, 1, ceil_mode)
    height, width = x.shape[-2:]
    out = np.empty(x.shape[:-2] + (len(rows), len(cols)), np.float64)
    for i, taps_h in enumerate(rows):
        inside_h = [h for h in taps_h if 0 <= h < height]
        padded_h = [h for h in taps_h if h < height + ph]
        for j, taps_w in enumerate(cols):
            inside_w = [w for w in taps_w if 0 <= w < width]
            padded_w = [w for w in taps_w if w < width + pw]
            total = x[..., inside_h, :][..., inside_w].sum(axis=(-2, -1))
            if divisor_override:
                divisor = int(divisor_override)
            elif count_include_pad:
                divisor = len(padded_h) * len(padded_w)
            else:
                divisor = len(inside_h) * len(inside_w)
            out[..., i, j] = total / divisor
    return out


def upsample_output_size(shape, output_size, scale_factors) -> tuple[int, int]:
    """``(out_h, out_w)``: ``output_size`` as given, else ``floor(in * scale)`` per dim."""
    if (output_size is None) == (scale_factors is None):
        raise ValueError("upsample: give exactly one of output_size and scale_factors")
    if output_size is not None:
        return int(output_size[0]), int(output_size[1])
    return int(shape[-2] * float(scale_factors[0])), int(shape[-1] * float(scale_factors[1]))


def _scale(size_in: int, size_out: int, factor: Optional[float], dtype=np.float64) -> float:
    """ATen's ``compute_scales_value``: ``1 / factor`` when one is given (and positive), else ``in / out``."""
    if factor is not None and float(factor) > 0:
        return dtype(1.0 / float(factor))
    return dtype(dtype(size_in) / dtype(size_out))


def _nearest_source(size_in: int, size_out: int, factor: Optional[float]) -> np.ndarray:
    """ATen ``nearest_idx``: identity, ``o >> 1`` for exactly 2x, else ``floor(o * scale)`` in float32."""
    out = np.arange(size_out)
    if size_out == size_in:
        return out
    if size_out == 2 * size_in:
        return out >> 1
    scale = _scale(size_in, size_out, factor, np.float32)
    return np.minimum(np.floor(out.astype(np.float32) * scale).astype(np.int64), size_in - 1)


def upsample_nearest2d(input, output_size=None, scale_factors=None) -> np.ndarray:
    """Nearest upsampling with ATen's ``floor(o * scale)`` sources (``aten.upsample_nearest2d.vec``)."""
    x = np.asarray(input, np.float64)
    out_h, out_w = upsample_output_size(x.shape, output_size, scale_factors)
    factors = (None, None) if scale_factors is None else tuple(scale_factors)
    rows = _nearest_source(x.shape[-2], out_h, factors[0])
    cols = _nearest_source(x.shape[-1], out_w, factors[1])
    return x[..., rows, :][..., cols]


def _linear_sources(size_in: int, size_out: int, align_corners: bool, factor: Optional[float]):
    """Per output index: lower source, upper source, and the weight of the upper."""
    out = np.arange(size_out, dtype=np.float64)
    if align_corners:
        source = out * ((size_in - 1) / (size_out - 1) if size_out > 1 else 0.0)
    else:
        source = np.maximum(_scale(size_in, size_out, factor) * (out + 0.5) - 0.5, 0.0)
    lower = np.minimum(np.floor(source).astype(np.int64), size_in - 1)
    upper = np.minimum(lower + 1, size_in - 1)
    weight = np.clip(source - lower, 0.0, 1.0)
    return lower, upper, weight


def upsample_bilinear2d(input, output_size=None, align_corners: bool = False, scale_factors=None) -> np.ndarray:
    """Bilinear upsampling as ATen's ``upsample_bilinear2d`` (``aten.upsample_bilinear2d.vec``)."""
    x = np.asarray(input, np.float64)
    out_h, out_w = upsample_output_size(x.shape, output_size, scale_factors)
    factors = (None, None) if scale_factors is None else tuple(scale_factors)
    h0, h1, wh = _linear_sources(x.shape[-2], out_h, bool(align_corners), factors[0])
    w0, w1, ww = _linear_sources(x.shape[-1], out_w, bool(align_corners), factors[1])
    top = x[..., h0, :][..., w0] * (1 - ww) + x[..., h0, :][..., w1] * ww
    bottom = x[..., h1, :][..., w0] * (1 - ww) + x[..., h1, :][..., w1] * ww
    return top * (1 - wh)[:, None] + bottom * wh[:, None]

