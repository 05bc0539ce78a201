"""ET-VK tensor layouts in numpy: WHCN sizes, width packing, poison."""

from __future__ import annotations

import numpy as np
import pytest

from vkdiff.device.runtime import layouts

SHAPES = ((5,), (3, 5), (2, 3, 7), (2, 3, 4, 9))


def test_whcn_sizes_worked_example():
    assert layouts.whcn_sizes((2, 3, 4, 9)) == (9, 4, 3, 2)
    assert layouts.whcn_sizes((13, 256)) == (256, 13, 1, 1)


@pytest.mark.parametrize("shape", SHAPES)
def test_texels_round_trip(shape, rng):
    array = rng.standard_normal(shape).astype(np.float32)
    texels = layouts.to_texels(array)
    assert texels.shape[:3] == tuple(reversed(layouts.texture_extent(shape)))
    np.testing.assert_array_equal(layouts.from_texels(texels, shape), array)


def test_texel_packing_worked_example():
    array = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    texels = layouts.to_texels(array)
    assert texels.shape == (2, 3, 2, 4)
    np.testing.assert_array_equal(texels[1, 2, 0], [25, 26, 27, 28])
    np.testing.assert_array_equal(texels[1, 2, 1], [29, 0, 0, 0])


@pytest.mark.parametrize("dtype", (np.float32, np.float16, np.int32))
def test_poison_is_detected_and_distinct_from_data(dtype, rng):
    poisoned = layouts.poison_like((4, 5), dtype)
    assert layouts.unwritten_mask(poisoned).all()
    data = (rng.standard_normal((4, 5)) * 100).astype(dtype)
    assert not layouts.unwritten_mask(data).any()
    if np.dtype(dtype).kind == "f":
        assert np.isnan(poisoned).all()
