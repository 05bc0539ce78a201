"""Reference training ops of ET-VK: ``adamw_step``, ``linear_dW``, ``fused_ce`` and ``linear_q4gsw_backward``.

Pure numpy in float64, from the eager implementations in ExecuTorch's
``backends/vulkan/custom_ops_lib.py``. Each ``*_accumulation`` returns the outputs with
the sum of absolute terms behind each element, which the tolerance policy scales its
float32 rounding bound by (``vkdiff.datamodel.tolerance``).

======================  ====================================  ==================================
op                      outputs                               contraction / reduction
======================  ====================================  ==================================
adamw_step              param, m, v (the in-place updates)    none (elementwise)
linear_dW               dW ``[N, K]``                         over the flattened M
fused_ce                loss ``[]``, dlogits ``[R, V]``       over V (softmax), over R (loss)
linear_q4gsw_backward   d_x ``[..., K]``                      over N
======================  ====================================  ==================================
"""

from __future__ import annotations

import numpy as np

from vkdiff.reference.quantized.linear import dequantize_q4gsw_weight

__all__ = ["adamw_step", "adamw_step_accumulation", "fused_ce", "fused_ce_accumulation", "linear_dW",
           "linear_dW_accumulation", "linear_q4gsw_backward", "linear_q4gsw_backward_accumulation"]


def _f64(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def _adamw_terms(param, m, v, grad, lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2):
    p, m, v, g = _f64(param), _f64(m), _f64(v), _f64(grad)
    decayed = p * (1.0 - lr * weight_decay)
    m_terms = (beta1 * m, (1.0 - beta1) * g)
    v_terms = (beta2 * v, (1.0 - beta2) * g * g)
    m_new, v_new = m_terms[0] + m_terms[1], v_terms[0] + v_terms[1]
    step = lr * (m_new / bias_correction1) / (np.sqrt(v_new / bias_correction2) + eps)
    return decayed, step, m_terms, v_terms


def adamw_step(param, m, v, grad, lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reference for ``et_vk.adamw_step``: one decoupled-weight-decay Adam step, returned (inputs untouched).

    Formula (float64; the bias corrections ``1 - beta^t`` are arguments, computed by the caller)::

        m'     = beta1 * m + (1 - beta1) * g
        v'     = beta2 * v + (1 - beta2) * g * g
        param' = param * (1 - lr * weight_decay) - lr * (m' / bc1) / (sqrt(v' / bc2) + eps)

    Note:
        The eager op updates ``param``, ``m`` and ``v`` in place and returns them; this one returns new
        arrays, so the same arguments serve every storage variant of a case.

    Returns:
        ``(param', m', v')`` in float64.

    Example::

        >>> p, m, v = adamw_step([1.0], [0.0], [0.0], [2.0], 0.1, 0.9, 0.999, 0.0, 0.0, 0.1, 0.001)
        >>> [round(float(a[0]), 6) for a in (p, m, v)]
        [0.9, 0.2, 0.004]
    """
    decayed, step, m_terms, v_terms = _adamw_terms(param, m, v, grad, lr, beta1, beta2, eps, weight_decay,
                                                   bias_correction1, bias_correction2)
    return decayed - step, m_terms[0] + m_terms[1], v_terms[0] + v_terms[1]


def adamw_step_accumulation(param, m, v, grad, lr, beta1, beta2, eps, weight_decay, bias_correction1,
                            bias_correction2) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """``(outputs, magnitudes)``: each output with ``|decayed| + |step|``, ``|beta1·m| + |(1-beta1)·g|``, ..."""
    decayed, step, m_terms, v_terms = _adamw_terms(param, m, v, grad, lr, beta1, beta2, eps, weight_decay,
                                                   bias_correction1, bias_correction2)
    outputs = (decayed - step, m_terms[0] + m_terms[1], v_terms[0] + v_terms[1])
    magnitudes = (np.abs(decayed) + np.abs(step), np.abs(m_terms[0]) + np.abs(m_terms[1]),
                  np.abs(v_terms[0]) + np.abs(v_terms[1]))
    return outputs, magnitudes


def _flat_rows(d_out, x) -> tuple[np.ndarray, np.ndarray]:
    d_out, x = _f64(d_out), _f64(x)
    return d_out.reshape(-1, d_out.shape[-1]), x.reshape(-1, x.shape[-1])


def linear_dW(d_out, x) -> np.ndarray:
    """Reference for ``et_vk.linear_dW``: the weight gradient of ``x @ W.T``.

    ``dW[n, k] = Σ_m d_out[m, n] · x[m, k]`` over every leading dim flattened into M
    (``d_out [..., N]``, ``x [..., K]`` with the same leading numel); float64, ``[N, K]``.
    """
    d_out, x = _flat_rows(d_out, x)
    return d_out.T @ x


def linear_dW_accumulation(d_out, x) -> tuple[np.ndarray, np.ndarray]:
    """``(dW, |d_out|.T @ |x|)``."""
    d_out, x = _flat_rows(d_out, x)
    return d_out.T @ x, np.abs(d_out).T @ np.abs(x)


def _ce_rows(logits, labels):
    x = _f64(logits)
    labels = np.asarray(labels).astype(np.int64)
    valid = labels >= 0
    safe = np.where(valid, labels, 0)
    top = x.max(axis=-1, keepdims=True)
    exps = np.exp(x - top)
    total = exps.sum(axis=-1, keepdims=True)
    softmax = exps / total
    log_total = np.log(total[:, 0])
    lse = top[:, 0] + log_total
    picked = x[np.arange(x.shape[0]), safe]
    return valid, safe, softmax, top[:, 0], log_total, lse, picked


def fused_ce(logits, labels, n_valid) -> tuple[np.ndarray, np.ndarray]:
    """Reference for ``et_vk.fused_ce``: summed cross-entropy over valid rows and its logits gradient.

    For ``logits [R, V]`` and ``labels [R]`` (a row with ``label < 0`` is ignored, as with
    ``ignore_index=-100``), in float64 with a max-shifted log-sum-exp::

        lse[r]       = max_j x[r, j] + log Σ_j exp(x[r, j] - max_j x[r, j])
        loss         = Σ_{r valid} (lse[r] - x[r, label[r]]) / n_valid
        dlogits[r, j] = (softmax(x[r])[j] - [j == label[r]]) / n_valid   (valid rows; 0 for ignored rows)

    Returns:
        ``(loss, dlogits)``: a rank-0 array and ``[R, V]``, float64.

    Example::

        >>> loss, d = fused_ce([[0.0, 0.0], [5.0, 1.0]], [1, -100], 1.0)
        >>> round(float(loss), 6), d.tolist()
        (0.693147, [[0.5, -0.5], [0.0, 0.0]])
    """
    valid, safe, softmax, _, _, lse, picked = _ce_rows(logits, labels)
    return _ce_outputs(valid, safe, softmax, lse, picked, float(n_valid))


def _ce_outputs(valid, safe, softmax, lse, picked, n_valid):
    loss = np.asarray(np.where(valid, (lse - picked) / n_valid, 0.0).sum())
    onehot = np.zeros_like(softmax)
    onehot[np.arange(softmax.shape[0]), safe] = 1.0
    dlogits = np.where(valid[:, None], (softmax - onehot) / n_valid, 0.0)
    return loss, dlogits


def fused_ce_accumulation(logits, labels, n_valid) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """``(outputs, magnitudes)``: the loss with ``Σ (|max| + |log Σ| + |picked| + 1) / n_valid`` over valid rows,
    dlogits with its own terms ``(softmax + onehot) / n_valid`` (the denominator's rounding is relative)."""
    valid, safe, softmax, top, log_total, lse, picked = _ce_rows(logits, labels)
    n_valid = float(n_valid)
    loss, dlogits = _ce_outputs(valid, safe, softmax, lse, picked, n_valid)
    per_row = (np.abs(top) + np.abs(log_total) + np.abs(picked) + 1.0) / abs(n_valid)
    onehot = np.zeros_like(softmax)
    onehot[np.arange(softmax.shape[0]), safe] = 1.0
    d_magnitude = np.where(valid[:, None], (softmax + onehot) / abs(n_valid), 0.0)
    return (loss, dlogits), (np.asarray(np.where(valid, per_row, 0.0).sum()), d_magnitude)


def _q4gsw_weight(weights, weight_scales, group_size) -> np.ndarray:
    k = np.shape(weights)[1] * 2
    return dequantize_q4gsw_weight(np.asarray(weights), np.asarray(weight_scales), int(group_size), k)


def linear_q4gsw_backward(d_out, weights, weight_scales, group_size) -> np.ndarray:
    """Reference for ``et_vk.linear_q4gsw_backward``: the input gradient through a frozen 4-bit linear.

    ``d_x[..., k] = Σ_n d_out[..., n] · W[n, k]`` with ``W[n, k] = code[n, k] · scales[k // group_size, n]``
    (``vkdiff.reference.quantized.linear.dequantize_q4gsw_weight``: ``weights`` uint8 ``[N, K/2]``, low nibble even k,
    codes stored ``+8``; scales transposed ``[K/gs, N]``); float64, ``d_out.shape[:-1] + (K,)``.
    """
    w = _q4gsw_weight(weights, weight_scales, group_size)
    d = _f64(d_out)
    return (d.reshape(-1, d.shape[-1]) @ w).reshape(*d.shape[:-1], w.shape[1])


def linear_q4gsw_backward_accumulation(d_out, weights, weight_scales, group_size) -> tuple[np.ndarray, np.ndarray]:
    """``(d_x, |d_out| @ |W|)``."""
    w = _q4gsw_weight(weights, weight_scales, group_size)
    d = _f64(d_out)
    flat = d.reshape(-1, d.shape[-1])
    shape = (*d.shape[:-1], w.shape[1])
    return (flat @ w).reshape(shape), (np.abs(flat) @ np.abs(w)).reshape(shape)
