"""References of ``et_vk.apply_rotary_emb_interleaved`` and ``etvk.choose_qparams_per_row`` against their oracles.

The RoPE oracle is the op's eager implementation in ExecuTorch's ``custom_ops_lib.py``; the
per-row qparams have no Python definition, so their oracle is the hand-worked values of
``test_choose_qparams_per_row.cpp``'s reference and ET-VK's float32 shader emulation. Each
oracle test has a companion showing a plausible mistake fails the same check.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vkdiff import reference
from vkdiff.reference.tensor import llm
from vkdiff.reference.quantized.quant import choose_qparams_per_row, choose_qparams_per_row_etvk, \
    choose_qparams_per_token_asymmetric

INTERLEAVED = "et_vk.apply_rotary_emb_interleaved.default"
PER_ROW = "etvk.choose_qparams_per_row.default"


@pytest.fixture(scope="module", autouse=True)
def custom_ops():
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (registers et_vk.*)


def _rope_inputs(rng, b: int, n: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    x = rng.standard_normal((b, n, c)) * rng.uniform(0.5, 300.0, (b, n, 1))
    angle = rng.uniform(-np.pi, np.pi, (n, c // 2))
    return x, np.stack([np.cos(angle), np.sin(angle)], axis=-1)


def _eager(x: np.ndarray, freqs: np.ndarray) -> np.ndarray:
    return torch.ops.et_vk.apply_rotary_emb_interleaved(torch.from_numpy(x), torch.from_numpy(freqs)).numpy()


@pytest.mark.parametrize("b, n, c, rank", [(1, 7, 16, 2), (2, 5, 12, 4), (3, 1, 4, 2)])
def test_interleaved_rope_matches_et_vk_eager_in_float64(rng, b, n, c, rank):
    x, pairs = _rope_inputs(rng, b, n, c)
    freqs = pairs.reshape(n, c) if rank == 2 else pairs.reshape(1, n, c // 2, 2)
    np.testing.assert_allclose(reference.evaluate(INTERLEAVED, {"x": x, "freqs_cis": freqs}), _eager(x, freqs),
                               rtol=1e-13, atol=1e-12)


def test_pairing_halves_instead_of_neighbours_fails_the_same_check(rng):
    x, pairs = _rope_inputs(rng, 2, 5, 12)
    freqs = pairs.reshape(5, 12)
    cos, sin = pairs[..., 0], pairs[..., 1]
    half_split = llm._rotate_half(x[:, :, None, :], np.concatenate([cos, cos], -1), np.concatenate([sin, sin], -1))
    assert not np.allclose(half_split[:, :, 0], _eager(x, freqs), rtol=1e-13, atol=1e-12)
    swapped = pairs[..., ::-1].reshape(5, 12)  # (sin, cos) read as (cos, sin)
    assert not np.allclose(llm.apply_rotary_emb_interleaved(x, swapped), _eager(x, freqs), rtol=1e-13, atol=1e-12)


def test_interleaved_magnitude_bounds_the_output(rng):
    x, pairs = _rope_inputs(rng, 1, 4, 8)
    out, magnitude = reference.evaluate_with_magnitude(INTERLEAVED, {"x": x, "freqs_cis": pairs.reshape(4, 8)})
    assert (np.abs(out) <= magnitude + 1e-9).all() and (magnitude <= np.sqrt(2) * np.abs(x).max() + 1e-9).all()


def _per_row(x, qmin=-128, qmax=127, zps=np.int8):
    rows = np.shape(x)[0]
    return reference.evaluate(PER_ROW, {"input": x, "quant_min": qmin, "quant_max": qmax,
                                        "input_scales": np.zeros(rows, np.float32),
                                        "input_zps": np.zeros(rows, zps)})


def test_per_row_edges_take_the_fbgemm_branches():
    x = np.array([[0.0] * 4, [0.0, 1.0, 2.0, 2.55], [-2.55, -1.0, -0.5, -2.0], [1e-3, -1e-3, 2e-3, 0.0],
                  [-3.0] * 4], np.float32)
    scales, zps = _per_row(x)
    np.testing.assert_allclose(scales, [0.1, np.float32(2.55) / 255, np.float32(2.55) / 255, 6.1e-5,
                                        np.float32(3.0) / 255], rtol=1e-7)
    assert zps.dtype == np.int8 and zps.tolist() == [127, -128, 127, -128 + 85, 127]  # tiny: lo * 6.1e-5 / scale
    _, float_zps = _per_row(x, zps=np.float16)
    assert float_zps.dtype == np.float16 and float_zps.tolist() == zps.tolist()
    q4_scales, q4_zps = _per_row(x[1:2], -8, 7)
    assert q4_scales.tolist() == [pytest.approx(2.55 / 15, rel=1e-7)] and q4_zps.tolist() == [-8]
    assert _per_row(x[1:2], None, None)[1].tolist() == [-128]


def test_per_row_matches_the_float32_shader_emulation_on_whole_texels(rng):
    x = (rng.standard_normal((64, 32)) * rng.uniform(0.01, 300, (64, 1)) + rng.uniform(-2, 2, (64, 1)))
    x = x.astype(np.float32)
    scales, zps = _per_row(x)
    emulated_scales, emulated_zps = choose_qparams_per_row_etvk(x)
    np.testing.assert_allclose(scales, emulated_scales, rtol=2e-7)
    assert (zps == emulated_zps).all()


def test_torchao_asymmetric_qparams_fail_the_same_check():
    x = np.array([[0.0] * 4, [1e-3, -1e-3, 2e-3, 0.0]], np.float32)
    torchao_scales, _ = choose_qparams_per_token_asymmetric(x)
    assert not np.allclose(np.asarray(torchao_scales).reshape(-1), _per_row(x)[0], rtol=1e-7)


def test_per_row_reads_every_value_of_a_row():
    x = np.array([[0.5, 0.25, 1.0, 0.75, 9.0]], np.float32)
    assert _per_row(x)[0].tolist() == [pytest.approx(9.0 / 255, rel=1e-7)]
    assert choose_qparams_per_row_etvk(x)[0].tolist() != _per_row(x)[0].tolist()
    assert choose_qparams_per_row is reference.OPS[PER_ROW].fn
