"""The numpy int8x4 layouts: a round trip, the documented word order, and ET-VK's block geometry."""

from __future__ import annotations

import numpy as np
import pytest

from vkdiff.reference.quantized import int8x4


@pytest.mark.parametrize("layout", sorted(int8x4.LAYOUTS))
@pytest.mark.parametrize("sizes", [(2, 5, 3, 7), (3, 9), (6,), (1, 8, 4, 8)], ids=str)
def test_pack_then_unpack_is_the_identity_and_each_element_has_its_own_byte(layout, sizes):
    x = np.random.default_rng(len(sizes)).integers(-128, 128, sizes).astype(np.int8)
    np.testing.assert_array_equal(int8x4.unpack(int8x4.pack(x, layout), sizes, layout), x)
    word, lane = int8x4.word_and_byte(sizes, layout)
    assert len(set(zip(word.reshape(-1).tolist(), lane.reshape(-1).tolist()))) == x.size


def test_4w4c_packs_four_channels_per_word_and_four_widths_per_block():
    x = np.arange(2 * 1 * 5, dtype=np.int8).reshape(1, 2, 1, 5)  # C=2 (padded to 4), W=5 (padded to 8)
    word, lane = int8x4.word_and_byte(x.shape, "4w4c")
    assert word[0, :, 0, :].tolist() == [[0, 1, 2, 3, 4]] * 2
    assert lane[0, :, 0, 0].tolist() == [0, 1]
    assert int8x4.words(x.shape, "4w4c") == 8


def test_4h4w_blocks_four_rows_of_four_widths():
    word, lane = int8x4.word_and_byte((1, 1, 5, 6), "4h4w")
    assert word[0, 0, :4, 0].tolist() == [0, 1, 2, 3] and word[0, 0, 0, 4] == 4 and word[0, 0, 4, 0] == 8
    assert lane[0, 0, 0, :].tolist() == [0, 1, 2, 3, 0, 1]


def test_4c1w_puts_widths_innermost_where_4c_puts_channel_blocks_there():
    assert int8x4.word_and_byte((1, 5, 1, 3), "4c")[0][0, :, 0, :].tolist() == [[0, 2, 4]] * 4 + [[1, 3, 5]]
    assert int8x4.word_and_byte((1, 5, 1, 3), "4c1w")[0][0, :, 0, :].tolist() == [[0, 1, 2]] * 4 + [[3, 4, 5]]


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="unknown int8x4 layout 'w4'"):
        int8x4.pack(np.zeros(4, np.int8), "w4")
    with pytest.raises(ValueError, match="expected int8"):
        int8x4.pack(np.zeros(4, np.int16), "4w")
