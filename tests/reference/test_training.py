"""The training references against independent oracles: ExecuTorch's eager ``et_vk`` ops, ``torch.optim.AdamW``,
``F.cross_entropy`` and autograd.

Each oracle test has a companion showing the same check fails for a plausible mistake (bias corrections
swapped, eps inside the square root, ignored rows left in the gradient, the batch not flattened, the scales
read untransposed), so a passing oracle test says something.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from vkdiff.reference import evaluate
from vkdiff.reference.tensor import training
from vkdiff.reference.quantized.packing import pack_int4_linear

from .helpers import random_codes


@pytest.fixture(scope="module", autouse=True)
def custom_ops():
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (registers et_vk.*)


def t(array) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array))


def _adamw_state(rng, shape=(3, 7), scale=1.0):
    param, grad = rng.standard_normal(shape), rng.standard_normal(shape) * scale
    return param, rng.standard_normal(shape) * scale, rng.uniform(0.1, 1.0, shape) * scale ** 2, grad


ADAMW_SETTINGS = ((1, 1e-3, 0.0), (10, 1e-2, 0.01), (1_000_000, 0.5, 0.1))
"""(step, lr, weight decay)."""


def _hyper(step: int, lr: float, decay: float, betas=(0.9, 0.999), eps=1e-8) -> dict:
    return {"lr": lr, "beta1": betas[0], "beta2": betas[1], "eps": eps, "weight_decay": decay,
            "bias_correction1": 1 - betas[0] ** step, "bias_correction2": 1 - betas[1] ** step}


@pytest.mark.parametrize("step, lr, decay", ADAMW_SETTINGS)
def test_adamw_step_matches_et_vk_eager_in_place(rng, step, lr, decay):
    state = _adamw_state(rng)
    hyper = _hyper(step, lr, decay)
    tensors = [t(a.copy()) for a in state]
    returned = torch.ops.et_vk.adamw_step(*tensors, *hyper.values())
    assert all(r.data_ptr() == x.data_ptr() for r, x in zip(returned, tensors[:3]))
    before = [a.copy() for a in state]
    ours = training.adamw_step(*state, **hyper)
    for got, oracle in zip(ours, tensors[:3]):
        np.testing.assert_allclose(got, oracle.numpy(), rtol=1e-12, atol=1e-15)
    for kept, was in zip(state, before):  # the reference returns new arrays: one case's arguments serve every run
        np.testing.assert_array_equal(kept, was)


@pytest.mark.parametrize("step, lr, decay", ADAMW_SETTINGS)
def test_adamw_step_matches_torch_optim_adamw(rng, step, lr, decay):
    """``torch.optim.AdamW`` at step ``t`` from the state of step ``t - 1``: a second, independent oracle."""
    param, m, v, grad = _adamw_state(rng)
    weight = torch.nn.Parameter(t(param.copy()))
    optim = torch.optim.AdamW([weight], lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=decay)
    weight.grad = t(grad.copy())
    optim.state[weight] = {"step": torch.tensor(float(step - 1)), "exp_avg": t(m.copy()), "exp_avg_sq": t(v.copy())}
    optim.step()
    ours = training.adamw_step(param, m, v, grad, **_hyper(step, lr, decay))
    np.testing.assert_allclose(ours[0], weight.detach().numpy(), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(ours[1], optim.state[weight]["exp_avg"].numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours[2], optim.state[weight]["exp_avg_sq"].numpy(), rtol=1e-12)


def test_adamw_step_check_catches_swapped_bias_corrections_and_eps_under_the_root(rng):
    """At step 1 the corrections are 0.1 and 0.001; gradients near eps make its placement visible."""
    param, m, v, grad = _adamw_state(rng, scale=1e-8)
    hyper = _hyper(1, 1e-3, 0.0)
    tensors = [t(a.copy()) for a in (param, m, v, grad)]
    oracle = torch.ops.et_vk.adamw_step(*tensors, *hyper.values())[0].numpy()
    swapped = dict(hyper, bias_correction1=hyper["bias_correction2"], bias_correction2=hyper["bias_correction1"])
    assert not np.allclose(training.adamw_step(param, m, v, grad, **swapped)[0], oracle, rtol=1e-6, atol=1e-9)
    m_new = 0.9 * m + 0.1 * grad
    v_new = 0.999 * v + 0.001 * grad * grad
    under_root = param - 1e-3 * (m_new / 0.1) / np.sqrt(v_new / 0.001 + 1e-8)
    assert not np.allclose(under_root, oracle, rtol=1e-6, atol=1e-9)


def test_adamw_step_magnitudes_bound_each_output(rng):
    state = _adamw_state(rng)
    (p, m, v), magnitudes = training.adamw_step_accumulation(*state, **_hyper(1, 1e-3, 0.01))
    for value, magnitude in zip((p, m, v), magnitudes):
        assert np.all(magnitude >= np.abs(value) - 1e-15)


def _ce_inputs(rng, rows=6, vocab=11):
    logits = rng.standard_normal((rows, vocab)) * 3
    logits[0] = rng.uniform(88, 120, vocab)
    logits[1] = -rng.uniform(1, 60, vocab)
    labels = rng.integers(0, vocab, rows)
    labels[2], labels[-1] = -100, vocab - 1
    return logits, labels


def test_fused_ce_matches_et_vk_eager_with_ignored_rows_and_logits_past_88(rng):
    logits, labels = _ce_inputs(rng)
    loss, dlogits = torch.ops.et_vk.fused_ce(t(logits), t(labels), 2.5)
    ours = training.fused_ce(logits, labels.astype(np.int32), 2.5)
    np.testing.assert_allclose(ours[0], loss.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours[1], dlogits.numpy(), rtol=1e-12, atol=1e-15)
    assert np.all(ours[1][2] == 0) and np.isfinite(ours[0])


def test_fused_ce_matches_cross_entropy_and_autograd(rng):
    """``F.cross_entropy(ignore_index=-100, reduction='sum') / n_valid`` and its gradient."""
    logits, labels = _ce_inputs(rng)
    n_valid = float((labels >= 0).sum())
    x = t(logits.copy()).requires_grad_(True)
    loss = F.cross_entropy(x, t(labels), ignore_index=-100, reduction="sum") / n_valid
    loss.backward()
    ours = training.fused_ce(logits, labels, n_valid)
    np.testing.assert_allclose(ours[0], loss.item(), rtol=1e-12)
    np.testing.assert_allclose(ours[1], x.grad.numpy(), rtol=1e-10, atol=1e-15)


def test_fused_ce_check_catches_ignored_rows_left_in_and_the_wrong_divisor(rng):
    logits, labels = _ce_inputs(rng)
    loss, dlogits = (o.numpy() for o in torch.ops.et_vk.fused_ce(t(logits), t(labels), 2.5))
    unmasked = training.fused_ce(logits, np.where(labels < 0, 0, labels), 2.5)
    assert not np.allclose(unmasked[1], dlogits, atol=1e-6) and not np.isclose(unmasked[0], loss, rtol=1e-6)
    by_rows = training.fused_ce(logits, labels, float(len(labels)))
    assert not np.isclose(by_rows[0], loss, rtol=1e-6)


def test_fused_ce_loss_magnitude_covers_each_row(rng):
    logits, labels = _ce_inputs(rng)
    (loss, _), (magnitude, d_magnitude) = training.fused_ce_accumulation(logits, labels, 2.5)
    assert magnitude >= abs(loss) and magnitude > 88 / 2.5
    assert np.all(d_magnitude[2] == 0) and np.all(d_magnitude[0] > 0)


@pytest.mark.parametrize("batch", [(), (3,)])
def test_linear_dw_matches_et_vk_eager_and_autograd(rng, batch):
    d_out, x = rng.standard_normal((*batch, 9, 13)), rng.standard_normal((*batch, 9, 6))
    oracle = torch.ops.et_vk.linear_dW(t(d_out), t(x)).numpy()
    np.testing.assert_allclose(training.linear_dW(d_out, x), oracle, rtol=1e-12, atol=1e-13)
    w = torch.zeros((13, 6), dtype=torch.float64, requires_grad=True)
    F.linear(t(x), w).backward(t(d_out))
    np.testing.assert_allclose(training.linear_dW(d_out, x), w.grad.numpy(), rtol=1e-12, atol=1e-13)


def test_linear_dw_check_catches_an_unflattened_batch(rng):
    d_out, x = rng.standard_normal((3, 9, 13)), rng.standard_normal((3, 9, 6))
    oracle = torch.ops.et_vk.linear_dW(t(d_out), t(x)).numpy()
    assert not np.allclose(training.linear_dW(d_out[0], x[0]), oracle, atol=1e-3)


def _q4_weight(rng, n: int, k: int, group: int):
    codes = random_codes(rng, (n, k))
    scales_t = rng.uniform(0.5, 1.5, (k // group, n)).astype(np.float32) / 8
    return codes, pack_int4_linear(codes), scales_t


@pytest.mark.parametrize("n, k, group", [(12, 64, 32), (44, 160, 20), (4, 36, 4)])
def test_linear_q4gsw_backward_matches_et_vk_eager_and_autograd(rng, n, k, group):
    codes, packed, scales_t = _q4_weight(rng, n, k, group)
    d_out = rng.standard_normal((2, 5, n)).astype(np.float32)
    oracle = torch.ops.et_vk.linear_q4gsw_backward(t(d_out), t(packed), t(scales_t), group).numpy()
    ours = training.linear_q4gsw_backward(d_out, packed, scales_t, group)
    np.testing.assert_allclose(ours, oracle, rtol=1e-5, atol=1e-5)
    weight = torch.from_numpy(codes.astype(np.float64) * np.repeat(scales_t.T.astype(np.float64), group, axis=1))
    x = torch.zeros((2, 5, k), dtype=torch.float64, requires_grad=True)
    F.linear(x, weight).backward(t(d_out.astype(np.float64)))
    np.testing.assert_allclose(ours, x.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_linear_q4gsw_backward_check_catches_untransposed_scales_and_swapped_nibbles(rng):
    _, packed, scales_t = _q4_weight(rng, 8, 64, 32)
    d_out = rng.standard_normal((5, 8)).astype(np.float32)
    oracle = torch.ops.et_vk.linear_q4gsw_backward(t(d_out), t(packed), t(scales_t), 32).numpy()
    untransposed = np.ascontiguousarray(scales_t.T).reshape(scales_t.shape)
    assert not np.allclose(training.linear_q4gsw_backward(d_out, packed, untransposed, 32), oracle, atol=1e-3)
    swapped = ((packed & 0xF) << 4) | (packed >> 4)
    assert not np.allclose(training.linear_q4gsw_backward(d_out, swapped, scales_t, 32), oracle, atol=1e-3)


def test_the_ops_are_registered_by_full_name(rng):
    d_out, x = rng.standard_normal((4, 3)), rng.standard_normal((4, 5))
    np.testing.assert_array_equal(evaluate("et_vk.linear_dW.default", {"d_out": d_out, "x": x}),
                                  training.linear_dW(d_out, x))
    loss, dlogits = evaluate("et_vk.fused_ce.default", {"logits": x, "labels": np.array([0, 1, -100, 4]),
                                                        "n_valid": 3.0})
    assert loss.shape == () and dlogits.shape == (4, 5)
