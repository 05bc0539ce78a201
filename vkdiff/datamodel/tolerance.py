"""The tolerance policy: one row per output dtype, used wherever numbers are judged.

Tolerance policy
----------------
Integer outputs (codes, quantization parameters) must match exactly.

Float outputs pass element-wise when::

    |actual - expected| <= atol + rtol * |expected| + acc * eps(dtype) * magnitude

``expected`` is the float64 reference evaluated on the very values the kernel sees
(inputs and constants already rounded to the kernel's dtype). ``magnitude`` is the
sum of absolute terms of the reduction that produced each element (for a linear,
``|x| @ |w|.T``): rounding in a length-K accumulation is bounded by a multiple of
``eps * magnitude``, so the bound grows with K and with the data, as ET-VK's own
custom-op tests scale their fp16 tolerance with K. Measured on lavapipe the
tiled linear kernels reach 1.4 ``eps * magnitude`` (fp16 and fp32); ``acc = 4``
leaves margin while still catching a single wrong 4-bit code in fp32.

=========  =========  ==========  =====  ====
dtype      atol       rtol        acc    ulps
=========  =========  ==========  =====  ====
float32    1e-6       1e-5        4      0
float16    1e-3       2 ** -10    4      1
int*       0          0           0      0
=========  =========  ==========  =====  ====

Quantized outputs get ``n * scale`` slack through ``Tolerance.quantized``.

Where a float16 kernel's variant declares its arithmetic (``vkdiff.datamodel.arithmetic``),
each element must also be what the kernel's own rounding stores: the reference evaluated
with that arithmetic, give or take ``ulps`` (1) times its slack (one float16 ulp of the
largest partial sum for float16 accumulators, the float32 row's bound for float32 ones),
then rounded to the output dtype. The accumulation term above is a worst case over every
order of rounding; this one follows the kernel's, so a wrong code shows even where the
float16 noise is larger than it.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np


QUANTIZED_OUTPUT_STEPS = 3
"""Output quantization steps of slack for a static-int8 delegate's dequantized outputs (as ``_pt2e_tolerance``):
``FoldQDQPass`` drops the roundings of the quantize/dequantize pairs it erases, which eager keeps."""


def dequantized_output_scales(delegate) -> list[float]:
    """Scales of the ``dequantize_per_tensor`` calls producing a delegate's outputs (static-int8 programs)."""
    scales = []
    for op in delegate.ops_named("quantized_decomposed.dequantize_per_tensor"):
        call = delegate.bind(op)
        if call.out in delegate.output_ids:
            scales.append(float(delegate.value(call.args["scale"])))
    return scales


@dataclasses.dataclass(kw_only=True, frozen=True)
class Tolerance:
    """Element-wise bound ``atol + rtol*|expected| + acc*eps*magnitude`` (all zero: exact)."""

    atol: float = 0.0
    """Absolute floor."""
    rtol: float = 0.0
    """Relative to the expected value."""
    acc: float = 0.0
    """Multiple of ``eps * magnitude`` allowed for accumulation rounding."""
    eps: float = 0.0
    """Machine epsilon of the kernel's dtype."""
    ulps: float = 0.0
    """Multiples of the emulation's slack an element may differ from the reference with the kernel's declared
    rounding, before the output's rounding; 0: no such check."""

    def __post_init__(self) -> None:
        """A NaN bound passes every comparison and a negative one fails every exact match: neither is a tolerance."""
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"tolerance {field.name}={value!r}: give a finite number >= 0")

    @classmethod
    def for_graphs(cls, graphs) -> "Tolerance":
        """A method output against eager or the reference program: percent-level for float16 delegates or
        dynamically quantized activations (``choose_qparams``), else 1e-4 (``graphs``: the decoded ``VkGraph`` objects);
        at least ``QUANTIZED_OUTPUT_STEPS`` output scales where a delegate output comes out of
        ``dequantize_per_tensor``.

        The policy is computed from the program alone, so a program judged anywhere (an artifact on a GPU runner
        included) gets the same bound; only the user's command line changes it."""
        graphs = list(graphs)
        fp16 = any(t.dtype == "float16" for g in graphs for t in g.tensors.values())
        dynamic = any(op.name.startswith("torchao.choose_qparams") for g in graphs for op in g.ops)
        rtol = 2e-2 if fp16 or dynamic else 1e-4
        scales = [s for g in graphs for s in dequantized_output_scales(g) if math.isfinite(s) and s > 0]
        return cls(atol=max([rtol] + [QUANTIZED_OUTPUT_STEPS * s for s in scales]), rtol=rtol)

    @classmethod
    def for_dtype(cls, dtype) -> "Tolerance":
        """The policy row for an output dtype (see module docstring)."""
        dtype = np.dtype(dtype)
        if dtype == np.float32:
            return cls(atol=1e-6, rtol=1e-5, acc=4.0, eps=float(np.finfo(np.float32).eps))
        if dtype == np.float16:
            return cls(atol=1e-3, rtol=2.0**-10, acc=4.0, eps=float(np.finfo(np.float16).eps), ulps=1.0)
        if dtype.kind in "iub":
            return cls()
        raise ValueError(f"Unsupported dtype: {dtype}; tolerance policy covers float32, float16 and integers")

    @classmethod
    def quantized(cls, scale: float, steps: int = 1) -> "Tolerance":
        """``steps * scale`` absolute slack for dequantized outputs of a quantized path."""
        return cls(atol=steps * float(scale))

    @property
    def exact(self) -> bool:
        return self.atol == self.rtol == self.acc == self.ulps == 0.0

    def bound(self, expected: np.ndarray, magnitude: np.ndarray | None = None) -> np.ndarray:
        """The bound per element; NaN where an infinite reference meets a zero factor (``0 * inf``), which the
        comparison treats as a special value, so numpy's warning about it is not shown."""
        with np.errstate(invalid="ignore"):
            bound = self.atol + self.rtol * np.abs(expected)
            if magnitude is not None and self.acc:
                bound = bound + self.acc * self.eps * np.abs(magnitude)
        return bound

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)
