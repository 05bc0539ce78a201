"""Launchers for ``et_vk.apply_rotary_emb.default`` and ``et_vk.apply_rotary_emb_hf.default`` (RoPE).

Ported from ``runtime/graph/ops/impl/RotaryEmbedding.cpp``. Both ops return ``(xq_out, xk_out)``,
bound as outputs 0 and 1, then ``xq, xk, freqs_cos, freqs_sin``; both are
``DynamicDispatchNode``s with ``default_pick_local_wg_size`` (``create_local_wg_size``) and
``resize_rotary_embedding_node`` (each output takes its input's sizes). All four inputs must
be width packed with the standard axis map.

``apply_rotary_emb`` (``add_rotary_embedding_node``, llama's interleaved pairs):

* checks: ``xq`` and ``xk`` share head_dim (-1) and sequence length (-3), head_dim is twice
  the freqs' last dim, ``freqs_cos`` and ``freqs_sin`` have the same sizes;
* variant ``rotary_embedding_<xq_out storage>_<xq_out dtype>``;
* UBOs ``meta_ubo`` of xq_out, xk_out, freqs_cos; spec constants from id 3: hashed layouts
  of xq_out and freqs_cos; no push constants;
* global ``(div_up(div_up_4(D), 2), Hq, S)`` of xq_out (``rotary_embedding_global_wg_size``):
  each invocation writes two texels (8 features) of one head. The shader returns when the
  second texel starts past head_dim, so only head_dims whose last group of 8 holds more than
  4 features are fully written (D % 8 in {0, 6} with textures; buffers index ``vec4``
  texels at ``linear_index / 4`` and need D % 8 == 0).

``apply_rotary_emb_hf`` (``add_rotary_embedding_hf_node``, Hugging Face's half split):

* checks: as above, but freqs ``[max_seq, rotary_dim]`` with ``rotary_dim <= head_dim``,
  ``rotary_dim % 8 == 0`` and ``max_seq >= S``;
* variant ``rotary_embedding_hf_<storage>_<dtype>``; UBOs as above plus ``start_pos``
  (``get_or_create_int_param_buffer``: follows ``set_symint``); spec constants: the two hashed
  layouts and ``partial_rotary`` (1 when ``rotary_dim < head_dim``: the tail passes through);
* global ``(div_up_4(D), Hq, S)`` (``rotary_embedding_hf_global_wg_size``).

``apply_rotary_emb_interleaved`` (``add_rotary_embedding_interleaved_node``, EdgeTAM's pairs with a
fused ``(cos, sin)`` table):

* checks: ``x`` is 3-D ``[B, N, C]`` with ``C % 4 == 0``; ``freqs_cis`` holds ``N * C`` elements at any
  rank; ``x`` and ``out`` width packed with the standard axis map; ``freqs_cis`` in a buffer (the
  partitioner pins it there: ``placements``);
* variant ``apply_rotary_emb_interleaved_<out storage>_<out dtype>``; UBO ``meta_ubo(out)``; spec
  constant id 3: ``hashed_layout_of(out)``; no push constants;
* global ``(div_up_4(C), N, B)`` (``rotary_embedding_interleaved_global_wg_size``, which checks the
  output is 3-D), one texel per invocation; resize: ``out`` takes ``x``'s sizes.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph, SymInt
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.graph.vtensor import DEFAULT_AXIS_MAP
from vkdiff.device.launchers.utils.common import div_up, val_at
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.apply_rotary_emb.default"
OP_HF = "et_vk.apply_rotary_emb_hf.default"
OP_INTERLEAVED = "et_vk.apply_rotary_emb_interleaved.default"

PORTS = (Port(file="runtime/graph/ops/impl/RotaryEmbedding.cpp",
              functions=("apply_rotary_emb", "add_rotary_embedding_node", "rotary_embedding_global_wg_size",
                         "resize_rotary_embedding_node", "apply_rotary_emb_hf", "add_rotary_embedding_hf_node",
                         "rotary_embedding_hf_global_wg_size", "apply_rotary_emb_interleaved",
                         "add_rotary_embedding_interleaved_node", "rotary_embedding_interleaved_global_wg_size",
                         "resize_rotary_embedding_interleaved_node"),
              sha256="60ea1c3a6278fe964a8f4356cf15fae1d6b2f1b86ca46a21b442a01e494c8463",
              tree="executorch main cff6f4dd32"),)


def resize_rotary_embedding_output(args: Mapping[str, Any], dtype: Any = None) -> list[tuple[tuple[int, ...], Any]]:
    """``resize_rotary_embedding_node`` on numpy arguments: ``xq_out`` like ``xq``, ``xk_out`` like ``xk``."""
    xq, xk = np.asarray(args["xq"]), np.asarray(args["xk"])
    return [(xq.shape, xq.dtype), (xk.shape, xk.dtype)]


def _size_at(index: int, t: Tensor) -> int:
    """``graph.size_at<int>(index, t)``."""
    return val_at(index, t.spec.sizes)


def _require(ok: bool, what: str) -> None:
    """``VK_CHECK_COND``."""
    if not ok:
        raise EtVkRefusal(f"rotary embedding (RotaryEmbedding.cpp): check failed: {what}")


def check_layouts(*tensors: Tensor) -> None:
    """Every input width packed with the standard axis map (``packed_dim_of``, ``has_standard_axis_map``)."""
    for t in tensors:
        _require(t.spec.info.packed_dim == 0, f"width-packed input, got {t.spec.layout}-packed {list(t.spec.sizes)}")
        _require(tuple(t.spec.axis_map) == DEFAULT_AXIS_MAP, "standard axis map")


def rotary_embedding_global_wg_size(xq_out: Tensor) -> tuple[int, int, int]:
    """``rotary_embedding_global_wg_size``: ``(D8, Hq, S)``, two texels of head_dim per invocation."""
    d4 = div_up(_size_at(-1, xq_out), 4)
    return (div_up(d4, 2), _size_at(-2, xq_out), _size_at(-3, xq_out))


def rotary_embedding_hf_global_wg_size(xq_out: Tensor) -> tuple[int, int, int]:
    """``rotary_embedding_hf_global_wg_size``: ``(D4, Hq, S)``, one texel per invocation (passthrough included)."""
    return (div_up(_size_at(-1, xq_out), 4), _size_at(-2, xq_out), _size_at(-3, xq_out))


def _resize_node(graph: ComputeGraph, xq: Tensor, xk: Tensor, xq_out: Tensor, xk_out: Tensor):
    def resize_rotary_embedding_node() -> None:
        graph.virtual_resize(xq_out, xq.spec.sizes)
        graph.virtual_resize(xk_out, xk.spec.sizes)

    return resize_rotary_embedding_node


def add_rotary_embedding_node(graph: ComputeGraph, xq: Tensor, xk: Tensor, freqs_cos: Tensor, freqs_sin: Tensor,
                              xq_out: Tensor, xk_out: Tensor) -> None:
    """``add_rotary_embedding_node``."""
    _require(_size_at(-1, xq) == _size_at(-1, xk), "xq and xk head_dim")
    _require(_size_at(-3, xq) == _size_at(-3, xk), "xq and xk sequence length")
    _require(_size_at(-1, xq) == _size_at(-1, freqs_cos) * 2, "head_dim == 2 * freqs_cos width")
    _require(tuple(freqs_cos.spec.sizes) == tuple(freqs_sin.spec.sizes), "freqs_cos and freqs_sin sizes")
    check_layouts(xq, xk, freqs_cos, freqs_sin)
    name = f"rotary_embedding_{xq_out.spec.storage}_{SUFFIX[xq_out.spec.dtype]}"
    graph.dispatch(name, global_wg=lambda: rotary_embedding_global_wg_size(xq_out),
                   resources=[xq_out, xk_out, xq, xk, freqs_cos, freqs_sin, graph.meta_ubo(xq_out),
                              graph.meta_ubo(xk_out), graph.meta_ubo(freqs_cos)],
                   spec={3: xq_out.spec.hashed_layout, 4: freqs_cos.spec.hashed_layout},
                   resize=_resize_node(graph, xq, xk, xq_out, xk_out))


def add_rotary_embedding_hf_node(graph: ComputeGraph, xq: Tensor, xk: Tensor, freqs_cos: Tensor, freqs_sin: Tensor,
                                 start_pos: SymInt | int, xq_out: Tensor, xk_out: Tensor) -> None:
    """``add_rotary_embedding_hf_node``."""
    _require(_size_at(-1, xq) == _size_at(-1, xk), "xq and xk head_dim")
    _require(_size_at(-3, xq) == _size_at(-3, xk), "xq and xk sequence length")
    _require(_size_at(-1, freqs_cos) <= _size_at(-1, xq), "rotary_dim <= head_dim")
    _require(_size_at(-1, freqs_cos) % 8 == 0, "rotary_dim % 8 == 0")
    _require(tuple(freqs_cos.spec.sizes) == tuple(freqs_sin.spec.sizes), "freqs_cos and freqs_sin sizes")
    _require(_size_at(-2, freqs_cos) >= _size_at(-3, xq), "freqs max_seq_len >= sequence length")
    check_layouts(xq, xk, freqs_cos, freqs_sin)
    partial_rotary = int(_size_at(-1, freqs_cos) < _size_at(-1, xq))
    name = f"rotary_embedding_hf_{xq_out.spec.storage}_{SUFFIX[xq_out.spec.dtype]}"
    graph.dispatch(name, global_wg=lambda: rotary_embedding_hf_global_wg_size(xq_out),
                   resources=[xq_out, xk_out, xq, xk, freqs_cos, freqs_sin, graph.meta_ubo(xq_out),
                              graph.meta_ubo(xk_out), graph.meta_ubo(freqs_cos), graph.symint_ubo(start_pos)],
                   spec={3: xq_out.spec.hashed_layout, 4: freqs_cos.spec.hashed_layout, 5: partial_rotary},
                   resize=_resize_node(graph, xq, xk, xq_out, xk_out))


@register_op(OP, output=resize_rotary_embedding_output, constants=(), ports=PORTS)
def apply_rotary_emb(graph: ComputeGraph, args: Mapping[str, Any], out: tuple[Tensor, Tensor]) -> None:
    """``apply_rotary_emb``: ``et_vk.apply_rotary_emb(xq, xk, freqs_cos, freqs_sin) -> (xq_out, xk_out)``.

    Args:
        graph (ComputeGraph): the graph the node joins.
        args (Mapping[str, Any]): ``xq [B, S, Hq, D]``, ``xk [B, S, Hkv, D]``, ``freqs_cos``, ``freqs_sin [S, D/2]``.
        out (tuple[Tensor, Tensor]): ``(xq_out, xk_out)``, allocated at the inputs' maximal sizes.

    Example::

        apply_rotary_emb(graph, {"xq": xq, "xk": xk, "freqs_cos": cos, "freqs_sin": sin}, (xq_out, xk_out))
    """
    xq_out, xk_out = out
    add_rotary_embedding_node(graph, args["xq"], args["xk"], args["freqs_cos"], args["freqs_sin"], xq_out, xk_out)


@register_op(OP_HF, output=resize_rotary_embedding_output, constants=(), ports=PORTS)
def apply_rotary_emb_hf(graph: ComputeGraph, args: Mapping[str, Any], out: tuple[Tensor, Tensor]) -> None:
    """``apply_rotary_emb_hf``: Hugging Face RoPE with tables ``[max_seq, rotary_dim]`` read from ``start_pos``.

    Args:
        graph (ComputeGraph): the graph the node joins.
        args (Mapping[str, Any]): ``xq``, ``xk`` as for ``apply_rotary_emb``; ``freqs_cos``, ``freqs_sin``
            ``[max_seq, rotary_dim]``; ``start_pos`` (SymInt or int).
        out (tuple[Tensor, Tensor]): ``(xq_out, xk_out)``.
    """
    xq_out, xk_out = out
    add_rotary_embedding_hf_node(graph, args["xq"], args["xk"], args["freqs_cos"], args["freqs_sin"],
                                 args["start_pos"], xq_out, xk_out)


def resize_rotary_embedding_interleaved_output(args: Mapping[str, Any],
                                               dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_rotary_embedding_interleaved_node`` on numpy arguments: ``out`` like ``x``."""
    x = np.asarray(args["x"])
    return x.shape, x.dtype


def rotary_embedding_interleaved_global_wg_size(out: Tensor) -> tuple[int, int, int]:
    """``rotary_embedding_interleaved_global_wg_size``: ``(div_up_4(C), N, B)`` of a 3-D output."""
    _require(len(out.spec.sizes) == 3, f"3-D output, got {list(out.spec.sizes)}")
    b, n, c = out.spec.sizes
    return (div_up(c, 4), n, b)


def add_rotary_embedding_interleaved_node(graph: ComputeGraph, x: Tensor, freqs_cis: Tensor, out: Tensor) -> None:
    """``add_rotary_embedding_interleaved_node``."""
    sizes = tuple(x.spec.sizes)
    _require(len(sizes) == 3, f"x is 3-D [B, N, C], got {list(sizes)}")
    _require(sizes[2] % 4 == 0, f"C % 4 == 0, got C={sizes[2]}")
    _require(int(np.prod(freqs_cis.spec.sizes)) == sizes[1] * sizes[2], "freqs_cis numel == N * C")
    check_layouts(x, out)
    _require(freqs_cis.spec.storage == "buffer", "freqs_cis in buffer storage")
    name = f"apply_rotary_emb_interleaved_{out.spec.storage}_{SUFFIX[out.spec.dtype]}"

    def resize_rotary_embedding_interleaved_node() -> None:
        graph.virtual_resize(out, x.spec.sizes)

    graph.dispatch(name, global_wg=lambda: rotary_embedding_interleaved_global_wg_size(out),
                   resources=[out, x, freqs_cis, graph.meta_ubo(out)], spec={3: out.spec.hashed_layout},
                   resize=resize_rotary_embedding_interleaved_node)


@register_op(OP_INTERLEAVED, output=resize_rotary_embedding_interleaved_output, constants=(), ports=PORTS,
             placements={"freqs_cis": "buffer:width"})
def apply_rotary_emb_interleaved(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``apply_rotary_emb_interleaved``: ``et_vk.apply_rotary_emb_interleaved(x, freqs_cis) -> out``.

    Args:
        graph (ComputeGraph): the graph the node joins.
        args (Mapping[str, Any]): ``x [B, N, C]``; ``freqs_cis`` of ``N * C`` elements (``[N, C]`` or
            ``[1, N, C/2, 2]``), flat ``(cos, sin)`` pairs.
        out (Tensor): the output, allocated at ``x``'s maximal sizes.
    """
    add_rotary_embedding_interleaved_node(graph, args["x"], args["freqs_cis"], out)
