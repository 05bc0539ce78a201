"""Reference convolutions (``aten.convolution``, ET-VK's ``conv_with_clamp``, ``conv1d_{pw,dw}``, ``conv2d_gemm``).

Pure numpy in float64. One routine covers 1-D and 2-D, direct and transposed, with
groups, stride, padding, dilation and output padding; the clamp of ``conv_with_clamp``
is applied last. 1-D convolutions run as 2-D ones with a unit height.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["convolution", "convolution_magnitude", "conv_with_clamp", "clamp_optional"]


def _pair(values: Sequence[int] | int, spatial: int, fill: int) -> tuple[int, int]:
    """A per-dim list as (h, w); 1-D convolutions get ``fill`` for the unit height."""
    items = [int(values)] * spatial if np.isscalar(values) else [int(v) for v in values]
    if len(items) == 1 and spatial == 2:
        items = items * 2
    return (fill, items[0]) if spatial == 1 else (items[0], items[1])


def _direct(x: np.ndarray, w: np.ndarray, stride, padding, dilation, groups: int) -> np.ndarray:
    """``out[n, o, i, j] = Σ_{c, kh, kw} x_pad[n, g·Cg + c, i·s + kh·d, j·s + kw·d] · w[o, c, kh, kw]``."""
    n, c_in, h, wd = x.shape
    c_out, c_group, k_h, k_w = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    h_out = (h + 2 * ph - dh * (k_h - 1) - 1) // sh + 1
    w_out = (wd + 2 * pw - dw * (k_w - 1) - 1) // sw + 1
    if h_out < 1 or w_out < 1:
        raise ValueError(f"convolution: output size {h_out}x{w_out} is empty for input {x.shape} and kernel {w.shape}")
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    out = np.zeros((n, c_out, h_out, w_out))
    o_group = c_out // groups
    for g in range(groups):
        xs = xp[:, g * c_group:(g + 1) * c_group]
        ws = w[g * o_group:(g + 1) * o_group]
        for kh in range(k_h):
            for kw in range(k_w):
                patch = xs[:, :, kh * dh: kh * dh + sh * (h_out - 1) + 1: sh, kw * dw: kw * dw + sw * (w_out - 1) + 1: sw]
                out[:, g * o_group:(g + 1) * o_group] += np.einsum("nchw,oc->nohw", patch, ws[:, :, kh, kw])
    return out


def _transposed(x: np.ndarray, w: np.ndarray, stride, padding, dilation, output_padding, groups: int) -> np.ndarray:
    """Scatter form: ``out[n, g·Og + o, i·s − p + kh·d, j·s − p + kw·d] += x[n, g·Cg + c, i, j] · w[g·Cg + c, o, kh, kw]``."""
    n, c_in, h, wd = x.shape
    _, o_group, k_h, k_w = w.shape
    (sh, sw), (ph, pw), (dh, dw), (oph, opw) = stride, padding, dilation, output_padding
    h_full = (h - 1) * sh + dh * (k_h - 1) + 1 + oph
    w_full = (wd - 1) * sw + dw * (k_w - 1) + 1 + opw
    full = np.zeros((n, o_group * groups, h_full, w_full))
    c_group = c_in // groups
    for g in range(groups):
        xs = x[:, g * c_group:(g + 1) * c_group]
        ws = w[g * c_group:(g + 1) * c_group]
        for kh in range(k_h):
            for kw in range(k_w):
                contrib = np.einsum("nchw,co->nohw", xs, ws[:, :, kh, kw])
                full[:, g * o_group:(g + 1) * o_group, kh * dh: kh * dh + sh * (h - 1) + 1: sh,
                     kw * dw: kw * dw + sw * (wd - 1) + 1: sw] += contrib
    h_out, w_out = h_full - 2 * ph, w_full - 2 * pw
    if h_out < 1 or w_out < 1:
        raise ValueError(f"transposed convolution: output size {h_out}x{w_out} is empty")
    return full[:, :, ph: ph + h_out, pw: pw + w_out]


def convolution(input, weight, bias=None, stride=(1,), padding=(0,), dilation=(1,), transposed=False,
                output_padding=(0,), groups=1) -> np.ndarray:
    """Reference for ``aten.convolution.default`` (1-D and 2-D), in float64.

    Direct (``transposed=False``), with ``Cg = C_in / groups`` and ``Og = C_out / groups``::

        out[n, o, i, j] = bias[o] + Σ_{c<Cg, kh, kw} x[n, (o // Og)·Cg + c, i·sh − ph + kh·dh, j·sw − pw + kw·dw]
                                                  · w[o, c, kh, kw]      (x is 0 outside its extent)
        H_out = (H + 2·ph − dh·(KH − 1) − 1) // sh + 1

    Transposed (``weight`` is ``[C_in, Og, KH, KW]``, ``C_out = Og · groups``)::

        out[n, g·Og + o, i·sh − ph + kh·dh, j·sw − pw + kw·dw] += x[n, g·Cg + c, i, j] · w[g·Cg + c, o, kh, kw]
        H_out = (H − 1)·sh − 2·ph + dh·(KH − 1) + oph + 1

    ==========  =================  ==========================
    input       weight             spatial lists
    ==========  =================  ==========================
    [N, C, L]   [O, C/g, K]        1 entry (1-D)
    [N, C, H, W] [O, C/g, KH, KW]  1 or 2 entries (2-D)
    ==========  =================  ==========================
    """
    x = np.asarray(input, np.float64)
    w = np.asarray(weight, np.float64)
    spatial = x.ndim - 2
    if spatial not in (1, 2):
        raise ValueError(f"Unsupported convolution input rank: {x.ndim}; 3 (1-D) and 4 (2-D) are supported")
    if spatial == 1:
        x, w = x[:, :, None, :], w[:, :, None, :]
    params = [_pair(stride, spatial, 1), _pair(padding, spatial, 0), _pair(dilation, spatial, 1)]
    if transposed:
        out = _transposed(x, w, *params, _pair(output_padding, spatial, 0), int(groups))
    else:
        out = _direct(x, w, *params, int(groups))
    if bias is not None:
        out = out + np.asarray(bias, np.float64)[None, :, None, None]
    return out[:, :, 0, :] if spatial == 1 else out


def convolution_magnitude(input, weight, bias=None, **params) -> np.ndarray:
    """``Σ |x|·|w| + |bias|`` per output element: the scale of its accumulation rounding."""
    return convolution(np.abs(np.asarray(input, np.float64)), np.abs(np.asarray(weight, np.float64)),
                       None if bias is None else np.abs(np.asarray(bias, np.float64)), **params)


def clamp_optional(x: np.ndarray, low=None, high=None) -> np.ndarray:
    """``torch.clamp`` with either bound absent (None)."""
    if low is not None:
        x = np.maximum(x, float(low))
    if high is not None:
        x = np.minimum(x, float(high))
    return x


def conv_with_clamp(input, weight, bias=None, stride=(1,), padding=(0,), dilation=(1,), transposed=False,
                    output_padding=(0,), groups=1, output_min=None, output_max=None) -> np.ndarray:
    """Reference for ``et_vk.conv_with_clamp``: ``clamp(convolution(...), output_min, output_max)``."""
    out = convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    return clamp_optional(out, output_min, output_max)
