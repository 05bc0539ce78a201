"""Float matrix products of ATen (``mm``, ``bmm``, ``addmm``, ``linear``) in float64, with their magnitudes.

Formulas (float64 throughout; ATen computes half products with a float accumulator and
rounds once, which the kernel runner models by making values past the dtype's range ±inf):

=============  =====================================================  ===========================
op             output                                                 magnitude (tolerance scale)
=============  =====================================================  ===========================
``mm``         ``self @ mat2`` (``[M, K] @ [K, N]``)                  ``|self| @ |mat2|``
``bmm``        ``self @ mat2`` per batch (``[B, M, K] @ [B, K, N]``)  ``|self| @ |mat2|``
``addmm``      ``beta * self + alpha * (mat1 @ mat2)``                ``|beta||self| + |alpha||mat1| @ |mat2|``
``linear``     ``input @ weight.T + bias`` (``weight`` is ``[N, K]``)  ``|input| @ |weight|.T + |bias|``
=============  =====================================================  ===========================

Note:
    ``beta == 0`` makes ATen ignore ``self`` (NaN in it does not propagate); the reference follows.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

__all__ = ["mm", "bmm", "addmm", "linear", "mm_accumulation", "addmm_accumulation", "linear_accumulation"]


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _product(a, b) -> np.ndarray:
    """``a @ b`` in float64 with IEEE overflow (a product past float64 is inf, as the kernel's would be)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.matmul(_f64(a), _f64(b))


def mm(self, mat2) -> np.ndarray:
    """``self @ mat2`` for 2-D operands (``aten.mm.default``).

    Example::

        >>> mm(np.array([[1.0, 2.0]]), np.array([[3.0], [4.0]]))
        array([[11.]])
    """
    if np.ndim(self) != 2 or np.ndim(mat2) != 2:
        raise ValueError(f"mm: expected 2-D operands, got {np.shape(self)} and {np.shape(mat2)}")
    return _product(self, mat2)


def bmm(self, mat2) -> np.ndarray:
    """Batched ``self @ mat2`` for 3-D operands with equal batch (``aten.bmm.default``)."""
    if np.ndim(self) != 3 or np.ndim(mat2) != 3 or np.shape(self)[0] != np.shape(mat2)[0]:
        raise ValueError(f"bmm: expected [B, M, K] and [B, K, N], got {np.shape(self)} and {np.shape(mat2)}")
    return _product(self, mat2)


def addmm(self, mat1, mat2, beta: float = 1, alpha: float = 1) -> np.ndarray:
    """``beta * self + alpha * (mat1 @ mat2)``, ``self`` broadcast to ``[M, N]`` (``aten.addmm.default``)."""
    product = float(alpha) * mm(mat1, mat2)
    if float(beta) == 0:
        return product
    return float(beta) * np.broadcast_to(_f64(self), product.shape) + product


def linear(input, weight, bias: Optional[np.ndarray] = None) -> np.ndarray:
    """``input @ weight.T (+ bias)`` over the last dim of ``input`` (``aten.linear.default``)."""
    out = _product(input, _f64(weight).T)
    return out if bias is None else out + _f64(bias)


def mm_accumulation(self, mat2) -> tuple[np.ndarray, np.ndarray]:
    """``(mm, |self| @ |mat2|)`` (also ``bmm``: the product broadcasts over the batch)."""
    return _product(self, mat2), _product(np.abs(_f64(self)), np.abs(_f64(mat2)))


def addmm_accumulation(self, mat1, mat2, beta: float = 1, alpha: float = 1) -> tuple[np.ndarray, np.ndarray]:
    """``(addmm, |beta||self| + |alpha||mat1| @ |mat2|)``."""
    out = addmm(self, mat1, mat2, beta, alpha)
    magnitude = abs(float(alpha)) * _product(np.abs(_f64(mat1)), np.abs(_f64(mat2)))
    return out, magnitude + abs(float(beta)) * np.broadcast_to(np.abs(_f64(self)), out.shape)


def linear_accumulation(input, weight, bias=None) -> tuple[np.ndarray, np.ndarray]:
    """``(linear, |input| @ |weight|.T + |bias|)``."""
    magnitude = linear(np.abs(_f64(input)), np.abs(_f64(weight)), None if bias is None else np.abs(_f64(bias)))
    return linear(input, weight, bias), magnitude
