"""The int8 conv weight packings on the pinned main tree, read back raw from the device and compared with
``vkdiff/reference/quantized/packing.py``: ``pack_q8_conv2d_weights`` (``q8ta_conv2d``, ``_pw``, ``_transposed`` and
``conv2d_q8ta_q8csw_q8to``'s direct route), ``pack_q8_conv2d_dw_weights`` (``q8ta_conv2d_dw`` and the q8to ``dw``
route) and the 8-bit linear packing the im2col routes and ``conv2d_q8csw`` reuse, for channels off 4, kernels 1×1,
3×3, 2×5, groups, on texture2d and (past ``max-texture-dimension-2d``) buffer storage. Each packing's companion test
shows plausible mistakes (kernel axes swapped, channel blocks unpadded, a block transposed) would not pass."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from tests.testutils import requires_tree, requires_vulkan
from vkdiff.device.runtime import resources
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.launchers import q8ta_conv2d, q8ta_conv2d_dw, q8ta_conv2d_pw, q8ta_conv2d_transposed
from vkdiff.device.launchers import quantized_convolution
from vkdiff.device.runtime.resources import Tensor
from vkdiff.reference.quantized import packing, q8ta_conv

pytestmark = [requires_tree, requires_vulkan]

CONV_SHAPES = ((5, 3, 1, (1, 1)), (7, 6, 1, (3, 3)), (6, 10, 2, (2, 5)), (9, 9, 3, (3, 3)), (3, 1, 1, (2, 5)))
"""``(OC, C_in, groups, (KH, KW))``: channels off 4, ``ICg`` 1 to 6, grouped."""
DW_SHAPES = ((5, (3, 3)), (3, (2, 5)), (12, (1, 1)), (7, (1, 4)))
"""``(C, (KH, KW))``: the channels the pattern pads to 4, kernel rows of 1 to 5 columns."""
CONV_PORTS = ("q8ta_conv2d",)
DW_PORTS = ("q8ta_conv2d_dw",)
"""The launchers whose prepack functions are tested (``quantized_convolution`` imports these same ports)."""


def _codes(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    """int8 codes over the whole range, -128 included (every byte's sign bit exercised)."""
    return np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8)


def _device(graph: ComputeGraph, packed: Tensor, expected: np.ndarray) -> np.ndarray:
    """The packed tensor's raw words in ``expected``'s shape (a texture's texels or a buffer's ivec4s, in order)."""
    return resources.read_raw(graph.device, packed)[: expected.size].reshape(expected.shape)


def _limit(graph: ComputeGraph) -> int:
    return int(graph.device.limits["max-texture-dimension-2d"])


def _conv_prepack(graph: ComputeGraph, port: str, matrix: np.ndarray, oc: int, c_in: int, groups: int,
                  kernel: tuple[int, int]) -> Tensor:
    """The port's ``prepack_quantized_conv2d_weight`` (one port, which the q8to launcher imports)."""
    ref = TensorRef(id="weights", data=matrix)
    return q8ta_conv2d.prepack_quantized_conv2d_weight(graph, ref, oc, c_in // groups, kernel)


def _dw_prepack(graph: ComputeGraph, port: str, weight: np.ndarray) -> Tensor:
    ref = TensorRef(id="weights", data=weight)
    return q8ta_conv2d_dw.prepack_quantized_conv2d_dw_weight(graph, ref)


def _check_conv(et_ctx, port: str, oc: int, c_in: int, groups: int, kernel: tuple[int, int], storage: str
                ) -> tuple[np.ndarray, np.ndarray]:
    """Packs a random conv weight on the device; returns ``(matrix, device words)`` after the exact comparison."""
    matrix = q8ta_conv.conv_weight_matrix(_codes(oc * c_in, (oc, c_in // groups, *kernel)))
    graph = ComputeGraph(et_ctx)
    packed = _conv_prepack(graph, port, matrix, oc, c_in, groups, kernel)
    assert packed.storage == storage and graph.dispatches[-1].shader == f"pack_q8_conv2d_weights_{storage}"
    expected = packing.pack_q8_conv2d_weight(matrix, kernel, c_in // groups)
    got = _device(graph, packed, expected)
    np.testing.assert_array_equal(got, expected)
    return matrix, got


@pytest.mark.parametrize("port", CONV_PORTS)
@pytest.mark.parametrize("oc,c_in,groups,kernel", CONV_SHAPES)
def test_conv_blocks_land_where_the_numpy_layout_puts_them(et_ctx, port, oc, c_in, groups, kernel):
    _check_conv(et_ctx, port, oc, c_in, groups, kernel, "texture2d")


@pytest.mark.parametrize("port", CONV_PORTS)
@pytest.mark.parametrize("side", ["wide", "tall"])
def test_conv_blocks_past_the_2d_limit_are_a_buffer_in_the_same_layout(et_ctx, port, side):
    """Wide: ``KW·OC4 > limit`` (2×5 kernel, OC ≡ 3 mod 4); tall: ``KH·IC4 > limit`` (3×1 kernel, ICg ≡ 2 mod 4)."""
    limit = _limit(ComputeGraph(et_ctx))
    shape = ((4 * (limit // 5 + 1) - 1, 3, 1, (2, 5)) if side == "wide"
             else (5, 4 * (limit // 3 + 1) - 2, 1, (3, 1)))
    _check_conv(et_ctx, port, *shape, "buffer")


@pytest.mark.parametrize("oc,c_in", [(5, 3), (13, 20)])
def test_pointwise_weight_is_the_conv_packing_with_a_1x1_kernel(et_ctx, oc, c_in):
    """``prepack_quantized_conv2d_pw_weight`` (``IC`` = all input channels; groups 1)."""
    matrix = q8ta_conv.conv_weight_matrix(_codes(oc + c_in, (oc, c_in, 1, 1)))
    graph = ComputeGraph(et_ctx)
    x = graph.add_tensor((1, c_in, 2, 3), "int8", "buffer", "int8x4_4w4c", label="x")
    out = graph.add_tensor((1, oc, 2, 3), "int8", "buffer", "int8x4_4w4c", label="out")
    packed = q8ta_conv2d_pw.prepack_quantized_conv2d_weight(graph, TensorRef(id="weights", data=matrix),
                                                            int(out.spec.sizes[-3]), int(x.spec.sizes[-3]), (1, 1))
    expected = packing.pack_q8_conv2d_weight(matrix, (1, 1), c_in)
    np.testing.assert_array_equal(_device(graph, packed, expected), expected)


def _kernel_axes_swapped(matrix: np.ndarray, kernel: tuple[int, int], icg: int) -> np.ndarray:
    """The mistake: taps read as ``(kw, kh)`` (column ``(kw·KH + kh)·ICg + ic``)."""
    kh, kw = kernel
    taps = matrix[:, : kh * kw * icg].reshape(-1, kw, kh, icg).transpose(0, 2, 1, 3).reshape(matrix.shape[0], -1)
    return packing.pack_q8_conv2d_weight(q8ta_conv.pad_channels(taps), kernel, icg)


def _channels_unpadded(matrix: np.ndarray, kernel: tuple[int, int], icg: int) -> np.ndarray:
    """The mistake: each block's 4 bytes read straight from the column stream, running into the next tap."""
    kh, kw = kernel
    ic4 = -(-icg // 4)
    stream = np.concatenate([matrix, np.zeros((matrix.shape[0], 4 * ic4), np.int8)], axis=1)
    cols = (np.arange(kh * kw)[:, None, None] * icg + np.arange(ic4)[None, :, None] * 4
            + np.arange(4)[None, None, :]).reshape(-1)
    padded = stream[:, cols].reshape(-1, kh * kw * ic4 * 4)
    return packing.pack_q8_conv2d_weight(padded, kernel, ic4 * 4)


def _block_transposed(words: np.ndarray) -> np.ndarray:
    """The mistake: every ivec4 block transposed (lanes and bytes exchanged)."""
    blocks = np.ascontiguousarray(words.astype("<i4")).view(np.int8).reshape(-1, 4, 4)
    return np.ascontiguousarray(blocks.transpose(0, 2, 1)).view("<i4").reshape(words.shape).astype(np.int32)


CONV_MISTAKES: dict[str, Callable[[np.ndarray, tuple[int, int], int], np.ndarray]] = {
    "kernel axes swapped": _kernel_axes_swapped,
    "channels not padded per tap": _channels_unpadded,
    "blocks transposed": lambda m, k, icg: _block_transposed(packing.pack_q8_conv2d_weight(m, k, icg)),
}


@pytest.mark.parametrize("mistake", CONV_MISTAKES)
def test_a_conv_packing_mistake_is_caught(et_ctx, mistake):
    """A 2×5 kernel with ``ICg = 5`` (groups 2) tells each mistake apart from the device's words (same size)."""
    matrix, got = _check_conv(et_ctx, "q8ta_conv2d", 6, 10, 2, (2, 5), "texture2d")
    wrong = CONV_MISTAKES[mistake](matrix, (2, 5), 5)
    assert wrong.size == got.size and not np.array_equal(wrong.reshape(got.shape), got)


@pytest.mark.parametrize("c_in,oc_per_group,groups,kernel", [(6, 6, 1, (2, 5)), (8, 4, 2, (3, 3))])
def test_transposed_weight_is_regrouped_then_packed_as_a_conv(et_ctx, c_in, oc_per_group, groups, kernel):
    """``[IC, OCg, KH, KW]`` regrouped to ``[OC, align4(KH·KW·ICg)]`` then ``pack_q8_conv2d_weights``; the
    companion: the IC and OC axes left unswapped (read as a conv's ``[OC, ICg, KH, KW]``) are caught."""
    weight = _codes(c_in * kernel[1], (c_in, oc_per_group, *kernel))
    oc, icg = oc_per_group * groups, c_in // groups
    matrix = q8ta_conv.transposed_weight_matrix(weight, groups)
    graph = ComputeGraph(et_ctx)
    packed = q8ta_conv2d_transposed.prepack_quantized_conv2d_weight(graph, TensorRef(id="weights", data=matrix), oc,
                                                                    icg, kernel)
    expected = packing.pack_q8_conv2d_weight(matrix, kernel, icg)
    got = _device(graph, packed, expected)
    np.testing.assert_array_equal(got, expected)
    unswapped = packing.pack_q8_conv2d_weight(q8ta_conv.conv_weight_matrix(weight.reshape(oc, icg, *kernel)),
                                              kernel, icg)
    assert unswapped.shape == got.shape and not np.array_equal(unswapped, got)


def _check_dw(et_ctx, port: str, c: int, kernel: tuple[int, int], storage: str) -> tuple[np.ndarray, np.ndarray]:
    """Packs a random depthwise weight (``[KH, KW, align4(C)]``) on the device; returns ``(weight, device words)``."""
    weight = q8ta_conv.dw_weight(_codes(c * kernel[0], (c, 1, *kernel)))
    graph = ComputeGraph(et_ctx)
    packed = _dw_prepack(graph, port, weight)
    assert packed.storage == storage and graph.dispatches[-1].shader == f"pack_q8_conv2d_dw_weights_{storage}"
    expected = packing.pack_q8_conv2d_dw_weight(weight)
    got = _device(graph, packed, expected)
    np.testing.assert_array_equal(got, expected)
    return weight, got


@pytest.mark.parametrize("port", DW_PORTS)
@pytest.mark.parametrize("c,kernel", DW_SHAPES)
def test_dw_blocks_land_where_the_numpy_layout_puts_them(et_ctx, port, c, kernel):
    _check_dw(et_ctx, port, c, kernel, "texture2d")


@pytest.mark.parametrize("port", DW_PORTS)
@pytest.mark.parametrize("side", ["wide", "tall"])
def test_dw_blocks_past_the_2d_limit_are_a_buffer_in_the_same_layout(et_ctx, port, side):
    """Wide: ``C4 > limit`` (1×2 kernel, C ≡ 3 mod 4); tall: ``KH·KW4 > limit`` (``KH = limit + 1``, 1 column)."""
    limit = _limit(ComputeGraph(et_ctx))
    c, kernel = (4 * limit + 3, (1, 2)) if side == "wide" else (3, (limit + 1, 1))
    _check_dw(et_ctx, port, c, kernel, "buffer")


def _rows_unpadded(weight: np.ndarray) -> np.ndarray:
    """The mistake: blocks of 4 taps over the flat ``KH·KW`` taps, kernel rows not padded to 4 columns."""
    kh, kw, c = weight.shape
    flat = np.zeros((-(-kh * kw // 4) * 4, c), np.int8)
    flat[: kh * kw] = weight.reshape(kh * kw, c)
    words = np.ascontiguousarray(flat).view("<i4").reshape(-1, 4, c // 4)
    return np.ascontiguousarray(words.transpose(0, 2, 1)).reshape(-1, c).astype(np.int32)


DW_MISTAKES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "kernel rows not padded": _rows_unpadded,
    "blocks transposed": lambda w: _block_transposed(packing.pack_q8_conv2d_dw_weight(w)),
}


@pytest.mark.parametrize("mistake", DW_MISTAKES)
def test_a_dw_packing_mistake_is_caught(et_ctx, mistake):
    """A 3×3 kernel (9 taps: both layouts have 3 block rows) with 5 channels padded to 8."""
    weight, got = _check_dw(et_ctx, "q8ta_conv2d_dw", 5, (3, 3), "texture2d")
    wrong = DW_MISTAKES[mistake](weight)
    assert wrong.shape == got.shape and not np.array_equal(wrong, got)


def test_the_q8to_launcher_shares_the_q8ta_prepack_ports():
    assert quantized_convolution.prepack_quantized_conv2d_weight is q8ta_conv2d.prepack_quantized_conv2d_weight
    assert quantized_convolution.prepack_quantized_conv2d_dw_weight is q8ta_conv2d_dw.prepack_quantized_conv2d_dw_weight


@pytest.mark.parametrize("prepack", [quantized_convolution.prepack_quantized_linear_weight])
def test_im2col_routes_pack_the_conv_matrix_as_a_linear_weight(et_ctx, prepack):
    """``conv2d_q8csw`` / ``conv2d_q8ta_q8csw`` and the q8to im2col route: ``pack_q8_linear_weight`` of the
    ``[OC, align4(KH·KW·ICg)]`` matrix (7 channels, 3×3 over 3), which the conv packing is not."""
    matrix = q8ta_conv.conv_weight_matrix(_codes(7, (7, 3, 3, 3)))
    graph = ComputeGraph(et_ctx)
    packed = prepack(graph, TensorRef(id="weights", data=matrix))
    assert graph.dispatches[-1].shader == "pack_q8_linear_weight_texture2d"
    expected = packing.pack_q8_linear_weight(matrix)
    got = _device(graph, packed, expected)
    np.testing.assert_array_equal(got, expected)
    assert not np.array_equal(packing.pack_q8_conv2d_weight(matrix, (3, 3), 3).reshape(-1)[: got.size],
                              got.reshape(-1))

