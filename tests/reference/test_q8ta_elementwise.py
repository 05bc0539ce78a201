"""vkdiff.reference.quantized.q8ta_elementwise against ``torch.ops.quantized_decomposed`` and ET-VK's eager ``et_vk.q8ta_relu``,
``q8ta_add`` and ``q8ta_pixel_shuffle`` (bit-exact codes), each with a companion that a plausible mistake fails."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (quantized_decomposed ops)

from vkdiff import reference
from vkdiff.cases.kernels import all_cases
from vkdiff.device.graph import Launch
from vkdiff.executors import references
from vkdiff.executors.kernel import checked
from vkdiff.verdicts.kernels import contraction_followed
from vkdiff.reference.quantized import q8ta_elementwise as q8e

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (et_vk ops)

QD = torch.ops.quantized_decomposed
OPS = ("quantized_decomposed.quantize_per_tensor.default", "quantized_decomposed.dequantize_per_tensor.default",
       "et_vk.q8ta_relu.default", "et_vk.q8ta_add.default", "et_vk.q8ta_pixel_shuffle.default")
QPARAMS = ((0.0375, 3), (0.02, -128), (0.02, 127), (0.25, 0), (1e-6, 5))
"""(scale, zero point): ordinary, both int8 extremes, a power of two (exact ties), a tiny scale (|x / s| > 2**31)."""


def f32(value: float) -> float:
    return float(np.float32(value))


def codes(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    q = rng.integers(-128, 128, shape).astype(np.int8)
    q.reshape(-1)[:2] = (-128, 127)
    return q


def floats(rng: np.random.Generator, shape: tuple[int, ...], scale: float) -> np.ndarray:
    """Values around the code range at ``scale``, a third of them exact ``k + 0.5`` multiples of it."""
    k = rng.integers(-140, 140, shape)
    frac = np.where(rng.random(shape) < 1 / 3, 0.5, rng.uniform(-0.5, 0.5, shape))
    return ((k + frac) * scale).astype(np.float32)


def quantize_oracle(x, scale, zp, qmin=-128, qmax=127) -> np.ndarray:
    return QD.quantize_per_tensor(torch.from_numpy(x), scale, zp, qmin, qmax, torch.int8).numpy()


def test_every_op_is_registered_by_its_schema_name():
    assert set(OPS) <= set(reference.OPS)


@pytest.mark.parametrize("scale, zp", QPARAMS)
@pytest.mark.parametrize("qmin", (-128, -127))
def test_quantize_matches_quantized_decomposed(rng, scale, zp, qmin):
    x = floats(rng, (3, 5, 7), f32(scale))
    if scale == 1e-6:
        x[0] = rng.choice([-1.0, 1.0], x[0].shape) * 10.0 ** rng.uniform(2, 4, x[0].shape)
    got = q8e.quantize_per_tensor_op(x, f32(scale), zp, qmin, 127, "int8")
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, quantize_oracle(x, f32(scale), zp, qmin))
    half = x.astype(np.float16)
    np.testing.assert_array_equal(q8e.quantize_per_tensor_op(half, f32(scale), zp, qmin, 127),
                                  quantize_oracle(half, f32(scale), zp, qmin))


def test_quantize_worked_example():
    """Ties go to even (0.5 → 0, 1.5 → 2, -2.5 → -2), then the zero point; the clamp pins the rest."""
    x = np.array([0.5, 1.5, -2.5, 1e9, -1e9], np.float32) * np.float32(0.25)
    np.testing.assert_array_equal(q8e.quantize_per_tensor_op(x, 0.25, 3, -128, 127), [3, 5, 1, 127, -128])


def test_rounding_half_away_from_zero_is_caught(rng):
    """Companion: ``std::round`` (ET-VK's own C++ tests) differs from ATen on the exact ties the suites draw."""
    x = floats(rng, (64,), 0.25)
    away = np.clip(np.sign(x * 4) * np.floor(np.abs(x * 4) + 0.5), -128, 127).astype(np.int8)
    assert (away != quantize_oracle(x, 0.25, 0)).any()
    np.testing.assert_array_equal(q8e.quantize_per_tensor_op(x, 0.25, 0, -128, 127), quantize_oracle(x, 0.25, 0))


def test_zero_point_of_the_wrong_sign_is_caught(rng):
    """Companion: ``round(x / s) - zp`` disagrees with the oracle wherever it is not clamped."""
    x = floats(rng, (64,), 0.0375)
    wrong = np.clip(np.rint(x * np.float32(1 / np.float32(0.0375))) - 3, -128, 127).astype(np.int8)
    assert (wrong != quantize_oracle(x, f32(0.0375), 3)).sum() > 32


@pytest.mark.parametrize("scale, zp", QPARAMS)
@pytest.mark.parametrize("out_dtype", ("float32", "float16"))
def test_dequantize_matches_quantized_decomposed(rng, scale, zp, out_dtype):
    q = codes(rng, (2, 5, 3, 7))
    got = q8e.dequantize_per_tensor_op(q, f32(scale), zp, -128, 127, "int8", out_dtype)
    want = QD.dequantize_per_tensor(torch.from_numpy(q), f32(scale), zp, -128, 127, torch.int8,
                                    out_dtype=getattr(torch, out_dtype)).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_dequantize_zero_point_sign_is_caught(rng):
    """Companion: ``(q + zp) * s`` is off by ``2 * zp * s`` from the oracle everywhere."""
    q = codes(rng, (40,))
    want = QD.dequantize_per_tensor(torch.from_numpy(q), f32(0.02), 7, -128, 127, torch.int8).numpy()
    wrong = q8e.dequantize_per_tensor_op(q, f32(0.02), -7, -128, 127)
    np.testing.assert_allclose(wrong - want, 14 * np.float32(0.02), rtol=1e-5)


RELU_QPARAMS = ((0.05, 3, 0.03, -128), (0.04, -5, 0.04, -5), (0.03, 127, 0.02, 5), (0.1, 0, 0.01, -128),
                (0.5, 0, 1.0, 0))


@pytest.mark.parametrize("qparams", RELU_QPARAMS)
def test_q8ta_relu_matches_the_eager_op(rng, qparams):
    q = codes(rng, (2, 5, 3, 7))
    in_s, in_zp, out_s, out_zp = qparams
    args = {"input": q, "input_scale": f32(in_s), "input_zero_point": in_zp, "output_scale": f32(out_s),
            "output_zero_point": out_zp}
    want = torch.ops.et_vk.q8ta_relu(torch.from_numpy(q), f32(in_s), in_zp, f32(out_s), out_zp).numpy()
    np.testing.assert_array_equal(reference.evaluate("et_vk.q8ta_relu.default", args), want)


def test_relu_on_codes_instead_of_values_is_caught(rng):
    """Companion: ``max(q, 0)`` before dequantizing (ignoring the zero point) differs for a zero point != 0."""
    q = codes(rng, (64,))
    right = q8e.q8ta_relu(q, 0.05, 20, 0.05, 20)
    wrong = q8e.quantize_per_tensor_op(q8e.dequantize_per_tensor_op(np.maximum(q, 0), 0.05, 20, -128, 127),
                                       0.05, 20, -128, 127)
    assert (right != wrong).any()


ADD_QPARAMS = ((0.05, 3, 0.02, -7, 0.06, 1), (0.03, -128, 0.03, -128, 0.05, -128), (0.03, 127, 0.02, 127, 0.05, 127),
               (0.1, 0, 0.1, 0, 0.005, 0), (0.25, 0, 0.25, 0, 0.5, 0))


@pytest.mark.parametrize("qparams", ADD_QPARAMS)
@pytest.mark.parametrize("alpha, b_shape", ((1.0, (2, 5, 3, 7)), (0.5, (2, 5, 3, 7)), (-1.0, (1, 5, 1, 7))))
def test_q8ta_add_matches_the_eager_op(rng, qparams, alpha, b_shape):
    a, b = codes(rng, (2, 5, 3, 7)), codes(rng, b_shape)
    a_s, a_zp, b_s, b_zp, o_s, o_zp = (f32(v) if isinstance(v, float) else v for v in qparams)
    args = {"input_a": a, "input_b": b, "input_a_scale": a_s, "input_a_zero_point": a_zp, "input_b_scale": b_s,
            "input_b_zero_point": b_zp, "output_scale": o_s, "output_zero_point": o_zp, "alpha": alpha}
    want = torch.ops.et_vk.q8ta_add(torch.from_numpy(a), torch.from_numpy(b), a_s, a_zp, b_s, b_zp, o_s, o_zp,
                                    alpha).numpy()
    np.testing.assert_array_equal(reference.evaluate("et_vk.q8ta_add.default", args), want)


def test_add_ignoring_alpha_is_caught(rng):
    """Companion: the shader's ``X + Y`` (alpha dropped) is not the op's ``X + alpha * Y``."""
    a, b = codes(rng, (64,)), codes(rng, (64,))
    qparams = (0.05, 3, 0.02, -7, 0.06, 1)
    assert (q8e.q8ta_add_op(a, b, *qparams, alpha=0.5) != q8e.q8ta_add_op(a, b, *qparams, alpha=1.0)).sum() > 32


SHUFFLE_QPARAMS = ((0.05, 3, 1 / 0.03, -2), (0.05, 3, 20.0, 3), (0.02, -128, 25.0, -128), (0.1, 0, 100.0, 0),
                   (0.5, 0, 1.0, 0), (0.05, 3, float(np.nextafter(np.float32(20.0), np.float32(21.0))), 3))


@pytest.mark.parametrize("qparams", SHUFFLE_QPARAMS)
@pytest.mark.parametrize("shape, r", (((2, 16, 4, 4), 2), ((1, 12, 3, 7), 2), ((1, 18, 2, 3), 3), ((8, 3, 5), 2)))
def test_q8ta_pixel_shuffle_matches_the_eager_op(rng, qparams, shape, r):
    q = codes(rng, shape)
    in_s, in_zp, inv, out_zp = qparams
    args = {"input": q, "input_scale": f32(in_s), "input_zero_point": in_zp, "output_inv_scale": f32(inv),
            "output_zero_point": out_zp, "upscale_factor": r}
    want = torch.ops.et_vk.q8ta_pixel_shuffle(torch.from_numpy(q), f32(in_s), in_zp, f32(inv), out_zp, r).numpy()
    got = reference.evaluate("et_vk.q8ta_pixel_shuffle.default", args)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_pixel_shuffle_with_swapped_sub_pixels_is_caught(rng):
    """Companion: channel ``c·r² + j·r + i`` for output ``(h·r + i, w·r + j)`` puts codes in the wrong places."""
    q = codes(rng, (1, 8, 3, 5))
    right = q8e.q8ta_pixel_shuffle(q, 0.05, 3, 20.0, 3, 2)
    swapped = q.reshape(1, 2, 2, 2, 3, 5).transpose(0, 1, 3, 2, 4, 5).reshape(1, 8, 3, 5)
    assert (q8e.q8ta_pixel_shuffle(swapped, 0.05, 3, 20.0, 3, 2) != right).any()


def test_a_contracted_dequantize_multiply_moves_exactly_the_codes_an_h100_moved():
    """NVIDIA's compiler fuses ``(a - z_a) * s_a + db`` into one fma (Vulkan allows it): on this case's data the
    H100 gave exactly these three codes one step off the separate-rounding reference, and the fma(a) model
    predicts exactly them; fma(b) moves none here."""
    (case,) = all_cases(r"^q8ta_add\[N2-C5-H3-W7-int8-buffer-int8x4_4w-mid\]$")
    prepared = references.prepare_case(case)
    models = reference.contracted(case.op, prepared.args)
    moved = {name: np.argwhere(codes != prepared.expected).tolist() for name, codes in models.items()}
    assert moved == {"fma(a)": [[0, 3, 0, 3], [1, 1, 2, 4], [1, 2, 2, 1]], "fma(b)": []}
    assert all(np.abs(codes.astype(int) - prepared.expected).max() <= 1 for codes in models.values())


def test_only_an_output_equal_to_a_whole_model_passes_as_contracted():
    (case,) = all_cases(r"^q8ta_add\[N2-C5-H3-W7-int8-buffer-int8x4_4w-mid\]$")
    prepared = references.prepare_case(case)
    fma_a = reference.contracted(case.op, prepared.args)["fma(a)"]
    assert contraction_followed(checked(case.op, Launch(output=fma_a, variant=""), prepared)) == "fma(a)"
    mixed = fma_a.copy()
    mixed.reshape(-1)[-1] = np.int8(min(int(mixed.reshape(-1)[-1]) + 1, 127) if mixed.reshape(-1)[-1] < 127 else 126)
    assert contraction_followed(checked(case.op, Launch(output=mixed, variant=""), prepared)) is None
    assert contraction_followed(checked(case.op, Launch(output=prepared.expected.astype(np.float32), variant=""), prepared)) is None


def test_the_contraction_models_keep_alpha():
    """A GPU that ignores alpha must not pass as 'contracted': every model applies alpha as the reference does."""
    (case,) = all_cases(r"^q8ta_add\[N2-C5-H3-W7-int8-buffer-int8x4_4w4c-mid-alpha0\.5\]$")
    prepared = references.prepare_case(case)
    without_alpha = reference.evaluate(case.op, {**prepared.args, "alpha": 1.0})
    for name, codes in reference.contracted(case.op, prepared.args).items():
        assert np.abs(codes.astype(int) - prepared.expected).max() <= 1, name
        assert (codes != without_alpha).sum() > 10, name
    assert contraction_followed(checked(case.op, Launch(output=without_alpha, variant=""), prepared)) is None
