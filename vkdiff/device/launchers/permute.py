"""Launcher for ``aten.permute.default`` and ``aten.permute_copy.default`` through ``permute_{buffer|texture3d}_*``.

Ported from ``runtime/graph/ops/impl/Permute.cpp`` (``permute`` → ``add_permute_node``, ``check_args``,
``WHCNPermuteDims``, ``resize_permute_node``); ``Squeeze.cpp`` and ``Unsqueeze.cpp`` reuse ``add_permute_node``
on textures:

* ``check_args``: input and output have the same packed dim (``check_same_packed_dim``);
* variant ``permute_<out storage>_<out dtype>`` (``permute_buffer_float``, ``permute_texture3d_half``);
* UBOs ``meta_ubo(out)``, ``meta_ubo(in)``; spec constants from id 3: out and in hashed layouts;
* buffers: a third spec constant, the WHCN permutation packed 4 bits per dim over ``kTensorDimLimit`` (8)
  entries (``WHCNPermuteDims::pack_into_int32``; negative dims wrapped); no push constants;
* textures: at most 4 dims (``VK_CHECK_COND``); push constant ``ivec4`` WHCN permutation, identity past the
  permutation's rank;
* ``DynamicDispatchNode`` with the default global (numel of out, or its logical limits) and local sizes;
* resize (``resize_permute_node``, resize arg ``permute_dims``): equal ranks permute the input's sizes;
  an output of lower rank (permute implementing squeeze) takes the trailing permuted sizes; one of higher
  rank (unsqueeze) maps ``permute_dims[i] - offset`` and leaves 1 where that is negative. Dims are read
  with ``std::vector::at`` as serialized: a negative dim throws there (only on a resize; the build takes the
  serialized output sizes).
"""

from __future__ import annotations

import struct
from typing import Any, Mapping, Sequence

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

TREE = "executorch main cff6f4dd32"
PORTS = (Port(file="runtime/graph/ops/impl/Permute.cpp",
              functions=("permute", "add_permute_node", "check_args", "WHCNPermuteDims", "resize_permute_node"),
              sha256="9f22488387ae93153e78c9e985fc4efc84fb202d55e5ceefaa0e17e500a31594", tree=TREE),)

TENSOR_DIM_LIMIT = 8
"""``api::kTensorDimLimit``."""


def permuted_sizes(in_sizes: Sequence[int], out_ndim: int, dims: Sequence[int]) -> tuple[int, ...]:
    """``resize_permute_node``'s output sizes for an output of rank ``out_ndim``.

    Raises:
        ValueError: ``VK_THROW("Invalid permute dims")`` (no rank relation matches).
    """
    in_ndim, dims = len(in_sizes), [int(d) for d in dims]
    if in_ndim == out_ndim == len(dims):
        return tuple(_at(in_sizes, d) for d in dims)
    if in_ndim > out_ndim and in_ndim == len(dims):
        offset = in_ndim - out_ndim
        return tuple(_at(in_sizes, dims[i + offset]) for i in range(out_ndim))
    if in_ndim < out_ndim == len(dims):
        offset = out_ndim - in_ndim
        return tuple(_at(in_sizes, d - offset) if d - offset >= 0 else 1 for d in dims)
    raise EtVkRefusal("Invalid permute dims")


def _at(sizes: Sequence[int], index: int) -> int:
    """``std::vector::at``: a negative dim (kept as serialized) is out of range, not counted from the end."""
    if not 0 <= index < len(sizes):
        raise EtVkRefusal(f"vector::_M_range_check: __n (which is {index}) >= this->size() (which is {len(sizes)})")
    return int(sizes[index])


def whcn_permute_dims(dims: Sequence[int]) -> list[int]:
    """``WHCNPermuteDims::initialize``: the WHCN dim each WHCN output dim reads, identity past the rank."""
    ndim = len(dims)
    out = list(range(TENSOR_DIM_LIMIT))
    for whcn_i in range(ndim):
        value = int(dims[ndim - 1 - whcn_i])
        value = value + ndim if value < 0 else value
        out[whcn_i] = ndim - 1 - value
    return out


def pack_into_int32(whcn: Sequence[int]) -> int:
    """``WHCNPermuteDims::pack_into_int32``: 4 bits per dim, WHCN dim 0 lowest."""
    packed = 0
    for i, value in enumerate(whcn[:TENSOR_DIM_LIMIT]):
        packed |= (value & 0x0F) << (i * 4)
    return int(np.array(packed & 0xFFFFFFFF, np.uint32).view(np.int32))


def texture_permute_dims(dims: Sequence[int]) -> bytes:
    """The texture path's ``ivec4`` push constant.

    Raises:
        ValueError: more than 4 dims (``Texture storage only supports permute with up to 4 dims``).
    """
    if len(dims) > 4:
        raise EtVkRefusal("Texture storage only supports permute with up to 4 dims")
    return struct.pack("<4i", *whcn_permute_dims(dims)[:4])


def add_permute_node(graph: ComputeGraph, x: Tensor, dims: Sequence[int], out: Tensor) -> None:
    """``add_permute_node``: one ``permute_*`` dispatch resized by ``resize_permute_node``.

    Raises:
        ValueError: the packed dims of input and output differ (``check_args``), or a texture permute has
            more than 4 dims.
    """
    if x.spec.info.packed_dim != out.spec.info.packed_dim:
        raise EtVkRefusal("check_same_packed_dim(graph, in, out) failed: input and output packed dims differ")
    dims = [int(d) for d in dims]
    name = f"permute_{out.spec.storage}_{SUFFIX[out.spec.dtype]}"
    spec: dict[int, int] = {3: out.spec.hashed_layout, 4: x.spec.hashed_layout}
    immediates = b""
    if out.spec.storage == "buffer":
        spec[5] = pack_into_int32(whcn_permute_dims(dims))
    else:
        immediates = texture_permute_dims(dims)

    def resize() -> None:
        """``resize_permute_node``."""
        graph.virtual_resize(out, permuted_sizes(x.spec.sizes, len(out.spec.sizes), dims))

    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out),
                   resources=[out, x, graph.meta_ubo(out), graph.meta_ubo(x)], spec=spec, immediates=immediates,
                   resize=resize, resize_args=(tuple(dims),))


def permute_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_permute_node`` on numpy arguments (equal ranks)."""
    x = np.asarray(args["self"])
    dims = [d % x.ndim for d in args["dims"]] if x.ndim else []
    return permuted_sizes(x.shape, x.ndim, dims), x.dtype


@register_op("aten.permute.default", output=permute_output, constants=(), ports=PORTS)
@register_op("aten.permute_copy.default", output=permute_output, constants=(), ports=PORTS)
def permute(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``permute``: ``out = self.permute(dims)``.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor) and ``dims`` (int list, negatives allowed), by schema name.
        out (Tensor): the output, same packed dim as ``self``.

    Raises:
        ValueError: the C++ checks fail (packed dims differ; a texture permute past 4 dims).

    Example::

        permute(graph, {"self": x, "dims": [0, 2, 3, 1]}, out)
    """
    add_permute_node(graph, args["self"], args["dims"], out)
