"""Launchers for the ops ``SDPA.cpp`` registers: ``sdpa_with_kv_cache.default``, ``update_cache.default``,
``llama.custom_sdpa.default`` and ``et_vk.sdpa.default``; its test-only ``testing.compute_attn_weight_with_kv_cache``
is not ported.

Launchers for ``sdpa_with_kv_cache.default`` and ``update_cache.default`` (ET-VK's LLM-mode SDPA).

Ported from ``runtime/graph/ops/impl/SDPA.cpp`` (``sdpa_with_kv_cache_impl`` → ``update_cache_impl``
twice → ``sdpa_impl``), LLM mode only (``SDPAMode::LLM``: Q ``[1, S, Hq, D]``, caches
``[1, C_max, Hkv, D]``, context ``S + input_pos``); ``llama.custom_sdpa`` and the fused ``et_vk.sdpa``
path follow; ``testing.compute_attn_weight_with_kv_cache`` (test-only) is not ported:

* caches: ``add_tensor_like(cache_data, storage of q, width packed)``, NEW tensors (poisoned
  here, uninitialised on a phone), never the constant's data; each bound with ``bind_state``;
* cache update (per cache): ``sdpa_kv_cache_update_<cache storage>_<projected storage>_<dtype>``,
  global ``(div_up_4(D), S, H)`` re-picked when ``input_pos`` or the sizes change, local
  ``default_pick_local_wg_size``; UBOs cache sizes, projected sizes, ``input_pos``; no resize function;
* attention weights: ``sdpa_compute_attn_weights_{coop (S == 1) | tiled}_<q storage>_<k storage>_<dtype>``,
  global ``(div_up_4(S + input_pos), div_up_4(S), Hq)``, local ``(1, 64, 1)`` (coop) else
  ``pick_hw_square_wg_size``; spec constant 3 ``1 / sqrt(D)`` (float32); UBOs q sizes, k sizes,
  ``input_pos``; resize to ``[1, Hq, align_up_4(S), align_up_4(S + input_pos)]``;
* softmax: ``sdpa_attn_weights_softmax_<storage>_<dtype>``, global ``(1, S, Hq)``, local ``(64, 1, 1)``;
  UBOs q sizes, k sizes, ``input_pos``; resize to the attention weights' sizes;
* output: ``sdpa_compute_out_{tiled | coop | gqa_coop | gqa_coop_tile2}_<out storage>_<v storage>_<dtype>``:
  tiled for S > 1; for S == 1 ``gqa_coop`` when Hq > Hkv, Hq % Hkv == 0 and Hq / Hkv <= 8
  (``use_gqa_av_coop``), with ``_tile2`` on Adreno (``device_is_adreno``: ``graph.route.vendor ==
  "qualcomm"``), else ``coop``; global ``(div_up_4(D), div_up_4(S), Hq)``, for gqa ``(div_up_4(D)
  [halved, rounded up, for tile2], div_up_4(S), Hkv)``; local ``(1, 64, 1)`` for coop variants else
  ``pick_hw_square_wg_size``; spec constants 3, 4 ``(1.0, Hq / Hkv)`` when the GQA gate holds at build
  (given to every variant the node picks, as the C++ does); UBOs q sizes, v sizes, ``input_pos``;
  resize to q's sizes;
* temporaries: attention weights and their softmax, ``[1, Hq, align_up_4(max S), align_up_4(C_max)]``
  in q's dtype and storage, width packed; for buffers max S is clamped so the padded allocation stays
  under ``max_buffer_numel`` (``maxStorageBufferRange``: read from ``graph.ctx.info.limits
  ["max-storage-buffer-binding-size"]``, wgpu's name for the binding range).

Launchers for ``llama.custom_sdpa.default`` and ``et_vk.sdpa.default``: ET-VK's SDPA without a KV cache update.

Ported from ``runtime/graph/ops/impl/SDPA.cpp``:

* ``llama.custom_sdpa`` → ``sdpa_impl`` (above: its checks, temporaries and three nodes
  in LLM mode) on device tensors ``query [1, S, Hq, D]``, ``key`` / ``value`` ``[1, C_max, Hkv, D]`` (the
  caches as graph inputs, read up to ``start_pos + S``). The route is the AV shader the node picks:
  ``tiled`` for S > 1, else ``gqa_coop`` (Hq > Hkv, Hq % Hkv == 0, Hq / Hkv <= 8), ``gqa_coop_tile2``
  (the same on Adreno: option ``profile=adreno`` answers ``device_is_adreno``) or ``coop``; the QK shader
  is ``coop`` exactly when the AV one is not ``tiled``. Cases name it with option ``route``.
* ``et_vk.sdpa`` → ``fused_sdpa_impl`` (``SDPAMode::FUSED``): ``q [B, H, S, D]``, ``k`` / ``v`` ``[B, H, L, D]``,
  optional additive ``attn_mask`` (broadcast over B, H and S by the shader), optional ``scale``
  (float32; None: ``1 / sqrt(D)``); temporaries ``[B, H, S, L]`` in the output's storage, width packed:
  attention weights in float32, their softmax in q's dtype;

  - QK: ``fused_sdpa_qk_tiled[_bias]_<q storage>_<k storage>_<q dtype>`` (``_bias`` iff a mask is given:
    it is read as a third input and its sizes UBO follows), global ``(div_up_4(L), div_up_4(S), H * B)``,
    local ``default_pick_local_wg_size``, spec constant 3 the scale; UBOs q sizes, k sizes [, mask sizes];
    resize to ``[B, H, S, L]``;
  - softmax: ``fused_sdpa_softmax_<storage>_<dtype>`` of the softmax tensor, global ``(1, S, H * B)``, local
    ``(64, 1, 1)``; UBOs q sizes, k sizes; resize to the attention weights' sizes;
  - AV: ``fused_sdpa_av_tiled_<out storage>_<v storage>_<out dtype>``, global ``(div_up_4(D), div_up_4(S),
    H * B)``, local ``default_pick_local_wg_size``, no spec constants; UBOs q sizes, v sizes; resize to q's sizes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph, SymInt, TensorRef
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import div_up, pick_hw_square_wg_size, val_at
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor
from vkdiff.device.runtime.routing import route_for


# -- sdpa_with_kv_cache / update_cache (LLM mode) ----------------------------------------------------------------------

OP = "sdpa_with_kv_cache.default"
UPDATE_CACHE_OP = "update_cache.default"

PORTS = (
    Port(file="runtime/graph/ops/impl/SDPA.cpp",
         functions=("sdpa_with_kv_cache_impl", "update_cache_impl", "sdpa_impl", "compute_sdpa_dims",
                    "is_single_token", "resize_sdpa_attn_weights_node", "resize_sdpa_attn_weights_softmax_node",
                    "resize_sdpa_out_node", "kv_cache_update_global_wg_size", "use_gqa_av_coop",
                    "resolve_use_gqa", "resolve_use_tile2", "pick_sdpa_qk_shader", "pick_sdpa_qk_global_wg_size",
                    "pick_sdpa_qk_local_wg_size", "pick_sdpa_softmax_global_wg_size",
                    "pick_sdpa_softmax_local_wg_size", "pick_sdpa_av_shader", "pick_sdpa_av_global_wg_size",
                    "pick_sdpa_av_local_wg_size", "add_sdpa_kv_cache_update_node",
                    "add_sdpa_compute_attn_weights_node", "add_sdpa_attn_weights_softmax_node",
                    "add_sdpa_compute_out_node"),
         sha256="0c13b4330b1d5d75fb281ec52220469f188ca3928bc0d73102bdd626df194372",
         tree="executorch main cff6f4dd32"),
)

MAX_GQA_GROUP_SIZE = 8
"""``kMaxGqaGroupSize``: ``MAX_GROUP_SIZE`` of ``sdpa_compute_out_coop.glsl``'s GQA branch."""
SHADER_OVERRIDE_FORCE_NON_GQA, SHADER_OVERRIDE_FORCE_GQA, SHADER_OVERRIDE_FORCE_TILE2, SHADER_OVERRIDE_FORCE_BASE = (
    0, 1, 2, 3)
"""``kShaderOverride*`` (``SDPA.h``): the test-only knob of ``add_sdpa_compute_out_node``."""


def size_at(index: int, tensor: Tensor) -> int:
    return val_at(index, tensor.spec.sizes)


def _align_up_4(value: int) -> int:
    return div_up(value, 4) * 4


@dataclasses.dataclass(kw_only=True, frozen=True)
class SDPADims:
    """``SDPADims`` in LLM mode."""

    H: int
    """Query heads."""
    S: int
    """Tokens of this step."""
    D: int
    """Head dim."""
    context_len: int
    """``S + input_pos``."""
    max_context_len: int
    """The cache's ``C_max`` (0 without k)."""
    B: int = 1


def compute_sdpa_dims(graph: ComputeGraph, q: Tensor, k: Tensor | None, input_pos: SymInt | int) -> SDPADims:
    """``compute_sdpa_dims`` (``SDPAMode::LLM``): Q ``[1, S, H, D]``, K ``[1, C_max, H_kv, D]``."""
    seq_len = size_at(-3, q)
    return SDPADims(H=size_at(-2, q), S=seq_len, D=size_at(-1, q),
                    context_len=seq_len + graph.read_symint(input_pos),
                    max_context_len=size_at(-3, k) if k is not None else 0)


def is_single_token(q: Tensor) -> bool:
    """``is_single_token``: decode (S == 1)."""
    return size_at(-3, q) == 1


def storage_suffix(tensor: Tensor) -> str:
    """``add_storage_type_suffix``."""
    return tensor.spec.storage


def dtype_suffix(tensor: Tensor) -> str:
    """``add_dtype_suffix``."""
    return SUFFIX[tensor.spec.dtype]


# -- resize functions -------------------------------------------------------------------------------------------


def resize_sdpa_attn_weights_node(graph: ComputeGraph, attn_weights: Tensor, q: Tensor,
                                  input_pos: SymInt | int) -> None:
    """``resize_sdpa_attn_weights_node`` (LLM): ``[1, Hq, align_up_4(S), align_up_4(S + input_pos)]``."""
    seq_len = size_at(-3, q)
    context_len = seq_len + graph.read_symint(input_pos)
    graph.virtual_resize(attn_weights, (1, size_at(-2, q), _align_up_4(seq_len), _align_up_4(context_len)))


def resize_sdpa_attn_weights_softmax_node(graph: ComputeGraph, attn_weights_softmax: Tensor,
                                          attn_weights: Tensor) -> None:
    """``resize_sdpa_attn_weights_softmax_node``: the attention weights' sizes."""
    graph.virtual_resize(attn_weights_softmax, attn_weights.spec.sizes)


def resize_sdpa_out_node(graph: ComputeGraph, out: Tensor, q: Tensor) -> None:
    """``resize_sdpa_out_node``: q's sizes."""
    graph.virtual_resize(out, q.spec.sizes)


# -- pickers ----------------------------------------------------------------------------------------------------


def kv_cache_update_global_wg_size(projected: Tensor) -> tuple[int, int, int]:
    """``kv_cache_update_global_wg_size``: ``(div_up_4(D), S, H)`` of the projected k or v."""
    return div_up(size_at(-1, projected), 4), size_at(-3, projected), size_at(-2, projected)


def use_gqa_av_coop(num_q_heads: int, num_kv_heads: int) -> bool:
    """``use_gqa_av_coop``: GQA (Hq > Hkv, divisible) with a group size within ``kMaxGqaGroupSize``."""
    if num_kv_heads <= 0 or num_q_heads <= num_kv_heads or num_q_heads % num_kv_heads:
        return False
    return num_q_heads // num_kv_heads <= MAX_GQA_GROUP_SIZE


def resolve_use_gqa(num_q_heads: int, num_kv_heads: int, shader_override: int | None = None) -> bool:
    """``resolve_use_gqa``: ``use_gqa_av_coop`` unless the test-only override forces it (an ineligible shape raises)."""
    if shader_override is None:
        return use_gqa_av_coop(num_q_heads, num_kv_heads)
    force_gqa = shader_override != SHADER_OVERRIDE_FORCE_NON_GQA
    eligible = num_kv_heads > 0 and num_q_heads % num_kv_heads == 0 and \
        num_q_heads // num_kv_heads <= MAX_GQA_GROUP_SIZE
    if force_gqa and not eligible:
        raise ValueError(f"forcing GQA via shader_override requires a GQA-eligible shape: Hq ({num_q_heads}) "
                         f"divisible by Hkv ({num_kv_heads}) and group size <= {MAX_GQA_GROUP_SIZE}")
    return force_gqa


def resolve_use_tile2(graph: ComputeGraph, shader_override: int | None = None) -> bool:
    """``resolve_use_tile2``: forced by the override, else ``device_is_adreno()`` (``graph.route.vendor``)."""
    if shader_override == SHADER_OVERRIDE_FORCE_TILE2:
        return True
    if shader_override == SHADER_OVERRIDE_FORCE_BASE:
        return False
    return graph.route.vendor == "qualcomm"


def pick_sdpa_qk_shader(q: Tensor, k_cache: Tensor) -> str:
    """``pick_sdpa_qk_shader`` (LLM): coop for a single token, else tiled."""
    kind = "_coop" if is_single_token(q) else "_tiled"
    return f"sdpa_compute_attn_weights{kind}_{storage_suffix(q)}_{storage_suffix(k_cache)}_{dtype_suffix(q)}"


def pick_sdpa_qk_global_wg_size(graph: ComputeGraph, q: Tensor, k: Tensor,
                                input_pos: SymInt | int) -> tuple[int, int, int]:
    """``pick_sdpa_qk_global_wg_size``: ``(context_len tiles, S tiles, H * B)``."""
    d = compute_sdpa_dims(graph, q, k, input_pos)
    return div_up(d.context_len, 4), div_up(d.S, 4), d.H * d.B


def pick_sdpa_coop_or_square_local_wg_size(shader: str, global_wg: tuple[int, int, int]) -> tuple[int, int, int]:
    """``pick_sdpa_qk_local_wg_size`` / ``pick_sdpa_av_local_wg_size`` (LLM): ``(1, 64, 1)`` for coop, else square."""
    if "_coop" in shader:
        return 1, 64, 1
    return pick_hw_square_wg_size(global_wg)


def pick_sdpa_softmax_global_wg_size(q: Tensor) -> tuple[int, int, int]:
    """``pick_sdpa_softmax_global_wg_size`` (LLM): ``(1, S, Hq)``."""
    return 1, size_at(-3, q), size_at(-2, q)


def pick_sdpa_softmax_local_wg_size() -> tuple[int, int, int]:
    """``pick_sdpa_softmax_local_wg_size``: 64 workers along x."""
    return 64, 1, 1


def pick_sdpa_av_shader(graph: ComputeGraph, out: Tensor, v_cache: Tensor, q: Tensor,
                        shader_override: int | None = None) -> str:
    """``pick_sdpa_av_shader`` (LLM): tiled for S > 1; for one token gqa_coop[_tile2] or coop."""
    name = "sdpa_compute_out"
    if is_single_token(q):
        if resolve_use_gqa(size_at(-2, q), size_at(-2, v_cache), shader_override):
            name += "_gqa_coop" + ("_tile2" if resolve_use_tile2(graph, shader_override) else "")
        else:
            name += "_coop"
    else:
        name += "_tiled"
    return f"{name}_{storage_suffix(out)}_{storage_suffix(v_cache)}_{dtype_suffix(out)}"


def pick_sdpa_av_global_wg_size(graph: ComputeGraph, shader: str, q: Tensor, v_cache: Tensor,
                                input_pos: SymInt | int) -> tuple[int, int, int]:
    """``pick_sdpa_av_global_wg_size``: ``(D tiles, S tiles, Hq)``; gqa: z is Hkv, x halved for tile2."""
    d = compute_sdpa_dims(graph, q, None, input_pos)
    n4, m4 = div_up(d.D, 4), div_up(d.S, 4)
    if "_gqa_coop" in shader:
        x_dim = div_up(n4, 2) if "_tile2" in shader else n4
        return x_dim, m4, size_at(-2, v_cache) * d.B
    return n4, m4, d.H * d.B


# -- nodes ------------------------------------------------------------------------------------------------------


def add_sdpa_kv_cache_update_node(graph: ComputeGraph, input_pos: SymInt | int, projected: Tensor,
                                  cache: Tensor) -> None:
    """``add_sdpa_kv_cache_update_node``: write the projected k or v at ``input_pos`` of the cache."""
    name = f"sdpa_kv_cache_update_{storage_suffix(cache)}_{storage_suffix(projected)}_{dtype_suffix(projected)}"
    graph.dispatch(name, global_wg=lambda: kv_cache_update_global_wg_size(projected), local_wg=None,
                   resources=[cache, projected, graph.sizes_ubo(cache), graph.sizes_ubo(projected),
                              graph.symint_ubo(input_pos)],
                   resize_args=(input_pos,))


def add_sdpa_compute_attn_weights_node(graph: ComputeGraph, q: Tensor, k: Tensor, input_pos: SymInt | int,
                                       scale_val: float, attn_weights: Tensor) -> None:
    """``add_sdpa_compute_attn_weights_node`` (LLM): ``attn_weights = scale * Q @ K^T``."""
    shader = lambda: pick_sdpa_qk_shader(q, k)
    global_wg = lambda: pick_sdpa_qk_global_wg_size(graph, q, k, input_pos)
    graph.dispatch(shader, global_wg=global_wg,
                   local_wg=lambda: pick_sdpa_coop_or_square_local_wg_size(shader(), global_wg()),
                   resources=[attn_weights, q, k, graph.sizes_ubo(q), graph.sizes_ubo(k), graph.symint_ubo(input_pos)],
                   spec={3: scale_val},
                   resize=lambda: resize_sdpa_attn_weights_node(graph, attn_weights, q, input_pos),
                   resize_args=(q, k, input_pos))


def add_sdpa_attn_weights_softmax_node(graph: ComputeGraph, attn_weights: Tensor, q: Tensor, k: Tensor,
                                       input_pos: SymInt | int, attn_weights_softmax: Tensor) -> None:
    """``add_sdpa_attn_weights_softmax_node`` (LLM)."""
    name = f"sdpa_attn_weights_softmax_{storage_suffix(attn_weights_softmax)}_{dtype_suffix(attn_weights_softmax)}"
    graph.dispatch(name, global_wg=lambda: pick_sdpa_softmax_global_wg_size(q),
                   local_wg=pick_sdpa_softmax_local_wg_size,
                   resources=[attn_weights_softmax, attn_weights, graph.sizes_ubo(q), graph.sizes_ubo(k),
                              graph.symint_ubo(input_pos)],
                   resize=lambda: resize_sdpa_attn_weights_softmax_node(graph, attn_weights_softmax, attn_weights),
                   resize_args=(q, k, input_pos))


def add_sdpa_compute_out_node(graph: ComputeGraph, attn_weights_softmax: Tensor, v: Tensor, q: Tensor,
                              input_pos: SymInt | int, out: Tensor, shader_override: int | None = None) -> None:
    """``add_sdpa_compute_out_node`` (LLM, ``k`` = ``kDummyValueRef`` as ``sdpa_impl`` passes it)."""
    num_q_heads, num_kv_heads = size_at(-2, q), size_at(-2, v)
    spec: dict[int, int | float] = {}
    if resolve_use_gqa(num_q_heads, num_kv_heads, shader_override):
        spec = {3: 1.0, 4: num_q_heads // num_kv_heads}
    shader = lambda: pick_sdpa_av_shader(graph, out, v, q, shader_override)
    global_wg = lambda: pick_sdpa_av_global_wg_size(graph, shader(), q, v, input_pos)
    graph.dispatch(shader, global_wg=global_wg,
                   local_wg=lambda: pick_sdpa_coop_or_square_local_wg_size(shader(), global_wg()),
                   resources=[out, attn_weights_softmax, v, graph.sizes_ubo(q), graph.sizes_ubo(v),
                              graph.symint_ubo(input_pos)],
                   spec=spec, resize=lambda: resize_sdpa_out_node(graph, out, q),
                   resize_args=(q, input_pos))


# -- ops --------------------------------------------------------------------------------------------------------


def check_cond(condition: bool, what: str) -> None:
    """``VK_CHECK_COND``."""
    if not condition:
        raise EtVkRefusal(f"sdpa (SDPA.cpp): {what}")


def update_cache_impl(graph: ComputeGraph, value: Tensor, cache: Tensor, input_pos: SymInt | int) -> None:
    """``update_cache_impl``: checks, then ``add_sdpa_kv_cache_update_node``."""
    check_cond(size_at(-4, value) == 1 and size_at(-4, cache) == 1, "batch must be 1")
    check_cond(size_at(-1, value) == size_at(-1, cache), "head dim of value and cache differ")
    check_cond(size_at(-2, value) == size_at(-2, cache), "heads of value and cache differ")
    add_sdpa_kv_cache_update_node(graph, input_pos, value, cache)


def _max_buffer_numel(graph: ComputeGraph) -> int:
    """``ComputeGraph::max_buffer_numel`` (``maxStorageBufferRange``, as wgpu's binding-size limit)."""
    return int(graph.ctx.info.limits.get("max-storage-buffer-binding-size", 1 << 27))


def attn_weight_full_sizes(graph: ComputeGraph, q: Tensor, k_cache: Tensor) -> tuple[int, int, int, int]:
    """``sdpa_impl``'s temporaries: ``[1, Hq, align_up_4(max S), align_up_4(C_max)]``, S clamped for buffers."""
    num_q_heads, max_seq_len = size_at(-2, q), size_at(-3, q)
    padded_context_len = _align_up_4(size_at(-3, k_cache))
    if storage_suffix(q) == "buffer":
        limit = _max_buffer_numel(graph)
        if num_q_heads * _align_up_4(max_seq_len) * padded_context_len >= limit:
            max_seq_len = limit // (num_q_heads * padded_context_len)
            max_seq_len = (max_seq_len // 4) * 4 if max_seq_len % 4 else max_seq_len - 4
    return 1, num_q_heads, _align_up_4(max_seq_len), padded_context_len


def sdpa_impl(graph: ComputeGraph, q: Tensor, k_cache: Tensor, v_cache: Tensor, input_pos: SymInt | int,
              args: Mapping[str, Any], out: Tensor) -> None:
    """``sdpa_impl``: checks, the two temporaries, attention weights, softmax and output nodes."""
    check_cond(size_at(-4, q) == 1 and size_at(-4, k_cache) == 1 and size_at(-4, v_cache) == 1, "batch must be 1")
    check_cond(tuple(k_cache.spec.sizes) == tuple(v_cache.spec.sizes), "k and v caches differ in shape")
    check_cond(size_at(-1, q) == size_at(-1, k_cache), "head dim of q and the cache differ")
    check_cond(all(t.spec.layout == "width" for t in (q, k_cache, v_cache)), "q and the caches must be width packed")
    check_cond(args.get("drpout_p") is None or float(args["drpout_p"]) == 0, "dropout_p must be 0")
    check_cond(args.get("scale") is None, "scale must be None")
    check_cond(args.get("is_causal") is None or bool(args["is_causal"]), "is_causal must be true")
    check_cond(args.get("attn_mask") is None, "attn_mask must be None")
    sizes = attn_weight_full_sizes(graph, q, k_cache)
    attn_weights = graph.add_tensor(sizes, q.spec.dtype, storage_suffix(q), "width", temporary=True, label="attn_weights")
    attn_weights_softmax = graph.add_tensor(sizes, q.spec.dtype, storage_suffix(q), "width", temporary=True, label="attn_weights_softmax")
    scale_val = float(np.float32(1.0) / np.sqrt(np.float32(size_at(-1, q))))
    add_sdpa_compute_attn_weights_node(graph, q, k_cache, input_pos, scale_val, attn_weights)
    add_sdpa_attn_weights_softmax_node(graph, attn_weights, q, k_cache, input_pos, attn_weights_softmax)
    add_sdpa_compute_out_node(graph, attn_weights_softmax, v_cache, q, input_pos, out)


def resize_sdpa_with_kv_cache(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """The output is sized as q (``resize_sdpa_out_node``)."""
    q = np.asarray(args["query"])
    return q.shape, q.dtype


def resize_update_cache(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``update_cache``'s output value (left unwritten by ET-VK): sized as the cache."""
    cache = np.asarray(args["cache"])
    return cache.shape, cache.dtype


def _cache_like(graph: ComputeGraph, data: TensorRef, q: Tensor, label: str) -> Tensor:
    """``add_tensor_like(cache_data, storage of q, kWidthPacked)``: a new, uninitialised tensor, bound as state."""
    cache = graph.add_tensor(np.shape(data.data), np.asarray(data.data).dtype.name, storage_suffix(q), "width", label=label)
    bind_state = getattr(graph, "bind_state", None)
    if bind_state is not None:
        bind_state(data, cache)
    return cache


@register_op(OP, output=resize_sdpa_with_kv_cache, constants=("key_cache", "value_cache"), ports=PORTS)
def sdpa_with_kv_cache(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``sdpa_with_kv_cache_impl``: new k/v caches, their updates at ``start_pos``, then ``sdpa_impl``.

    Args:
        graph (ComputeGraph): the graph the nodes join.
        args (Mapping[str, Any]): ``query`` ``[1, S, Hq, D]``, ``key`` / ``value`` ``[1, S, Hkv, D]`` (width
            packed device tensors), ``key_cache`` / ``value_cache`` (constants ``[1, C_max, Hkv, D]``: only
            their sizes and dtype are used), ``start_pos`` (SymInt), ``seq_len`` (unused), ``attn_mask``
            (None), ``drpout_p`` (0), ``is_causal`` (None or true), ``scale`` (None).
        out (Tensor): ``[1, S, Hq, D]``, allocated at the maximal sizes.
    """
    q, input_pos = args["query"], args["start_pos"]
    k_cache = _cache_like(graph, args["key_cache"], q, "k_cache")
    v_cache = _cache_like(graph, args["value_cache"], q, "v_cache")
    update_cache_impl(graph, args["key"], k_cache, input_pos)
    update_cache_impl(graph, args["value"], v_cache, input_pos)
    sdpa_impl(graph, q, k_cache, v_cache, input_pos, args, out)


@register_op(UPDATE_CACHE_OP, output=resize_update_cache, constants=(), ports=PORTS)
def update_cache(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``update_cache_impl``: write ``value`` into ``cache`` at ``start_pos``; ``out`` is left as it is (unused).

    Args:
        graph (ComputeGraph): the graph the node joins.
        args (Mapping[str, Any]): ``value`` ``[1, S, H, D]`` and ``cache`` ``[1, C_max, H, D]`` (device tensors),
            ``start_pos`` (SymInt).
        out (Tensor): the op's output value, which ET-VK never writes.

    Raises:
        TypeError: ``cache`` is a constant (ET-VK reads a device tensor's storage type there).
    """
    cache = args["cache"]
    if isinstance(cache, TensorRef):
        raise TypeError(f"update_cache (SDPA.cpp): cache {cache.id} is a constant; ET-VK's update_cache_impl "
                        f"needs a device tensor")
    update_cache_impl(graph, args["value"], cache, args["start_pos"])


# -- llama.custom_sdpa / et_vk.sdpa ------------------------------------------------------------------------------------

CUSTOM_SDPA_OP = "llama.custom_sdpa.default"
FUSED_SDPA_OP = "et_vk.sdpa.default"

FUSED_PORTS = (
    Port(file="runtime/graph/ops/impl/SDPA.cpp",
         functions=("sdpa_impl", "fused_sdpa_impl", "compute_sdpa_dims", "resize_sdpa_attn_weights_node",
                    "resize_sdpa_attn_weights_softmax_node", "resize_sdpa_out_node", "pick_sdpa_qk_shader",
                    "pick_sdpa_qk_global_wg_size", "pick_sdpa_qk_local_wg_size", "pick_sdpa_softmax_global_wg_size",
                    "pick_sdpa_softmax_local_wg_size", "pick_sdpa_av_shader", "pick_sdpa_av_global_wg_size",
                    "pick_sdpa_av_local_wg_size", "add_sdpa_compute_attn_weights_node",
                    "add_sdpa_attn_weights_softmax_node", "add_sdpa_compute_out_node"),
         sha256="0c13b4330b1d5d75fb281ec52220469f188ca3928bc0d73102bdd626df194372",
         tree="executorch main cff6f4dd32"),
)

AV_ROUTES = ("tiled", "coop", "gqa_coop", "gqa_coop_tile2")
"""``sdpa_compute_out_<route>``: the AV shaders ``pick_sdpa_av_shader`` chooses among in LLM mode."""


def _with_profile(graph: ComputeGraph, profile: str | None) -> None:
    """Answer ``device_is_adreno`` from a routing profile (``routes.toml``) so lavapipe runs the Adreno route."""
    if profile is not None:
        graph.route = route_for(profile, graph.ctx.info)


def custom_sdpa_route(graph: ComputeGraph, q: Tensor, v: Tensor, out: Tensor) -> str:
    """The AV route ``pick_sdpa_av_shader`` takes at the current sizes (``tiled``, ``coop``, ``gqa_coop[_tile2]``)."""
    name = pick_sdpa_av_shader(graph, out, v, q).removeprefix("sdpa_compute_out_")
    return next(route for route in sorted(AV_ROUTES, key=len, reverse=True) if name.startswith(route + "_"))


@register_op(CUSTOM_SDPA_OP, output=resize_sdpa_with_kv_cache, constants=(), ports=FUSED_PORTS)
def custom_sdpa(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None,
                profile: str | None = None) -> None:
    """``sdpa_impl`` as ``llama.custom_sdpa`` registers it: the caches are the op's ``key`` and ``value``.

    Args:
        graph (ComputeGraph): the graph the nodes join.
        args (Mapping[str, Any]): ``query`` ``[1, S, Hq, D]``, ``key`` / ``value`` ``[1, C_max, Hkv, D]`` (width
            packed device tensors), ``start_pos`` (SymInt or int), ``attn_mask`` (None), ``drpout_p`` (0),
            ``is_causal`` (None or true), ``scale`` (None).
        out (Tensor): ``[1, S, Hq, D]``.
        route (str | None): the AV route the case expects (``AV_ROUTES``).
        profile (str | None): a routing profile answering ``device_is_adreno`` (``adreno``: the ``_tile2`` route).

    Raises:
        ValueError: the arguments take another route than ``route``.
    """
    _with_profile(graph, profile)
    q, k, v = args["query"], args["key"], args["value"]
    taken = custom_sdpa_route(graph, q, v, out)
    if route is not None and taken != route:
        raise ValueError(f"custom_sdpa: the case declares route={route} but the arguments take route={taken}")
    sdpa_impl(graph, q, k, v, args["start_pos"], args, out)


# -- et_vk.sdpa (SDPAMode::FUSED) -------------------------------------------------------------------------------


def fused_attn_weight_sizes(q: Tensor, k: Tensor) -> tuple[int, int, int, int]:
    """``[B, H, S, L]``: ``fused_sdpa_impl``'s temporaries and ``resize_sdpa_attn_weights_node`` (FUSED)."""
    return size_at(-4, q), size_at(-3, q), size_at(-2, q), size_at(-2, k)


def resize_fused_attn_weights_node(graph: ComputeGraph, attn_weights: Tensor, q: Tensor, k: Tensor) -> None:
    """``resize_sdpa_attn_weights_node`` in FUSED mode: the unpadded ``[B, H, S, L]``."""
    graph.virtual_resize(attn_weights, fused_attn_weight_sizes(q, k))


def pick_fused_qk_shader(q: Tensor, k: Tensor, attn_mask: Tensor | None) -> str:
    """``pick_sdpa_qk_shader`` (FUSED): the bias variant iff a mask is read."""
    name = "fused_sdpa_qk_tiled_bias" if attn_mask is not None else "fused_sdpa_qk_tiled"
    return f"{name}_{storage_suffix(q)}_{storage_suffix(k)}_{dtype_suffix(q)}"


def pick_fused_qk_global_wg_size(q: Tensor, k: Tensor) -> tuple[int, int, int]:
    """``pick_sdpa_qk_global_wg_size`` (FUSED): ``(div_up_4(L), div_up_4(S), H * B)``."""
    b, h, s, length = fused_attn_weight_sizes(q, k)
    return div_up(length, 4), div_up(s, 4), h * b


def pick_fused_softmax_global_wg_size(q: Tensor) -> tuple[int, int, int]:
    """``pick_sdpa_softmax_global_wg_size`` (FUSED): ``(1, S, H * B)``."""
    return 1, size_at(-2, q), size_at(-3, q) * size_at(-4, q)


def pick_fused_av_global_wg_size(q: Tensor) -> tuple[int, int, int]:
    """``pick_sdpa_av_global_wg_size`` (FUSED, never GQA): ``(div_up_4(D), div_up_4(S), H * B)``."""
    return div_up(size_at(-1, q), 4), div_up(size_at(-2, q), 4), size_at(-3, q) * size_at(-4, q)


def add_fused_qk_node(graph: ComputeGraph, q: Tensor, k: Tensor, attn_mask: Tensor | None, scale_val: float,
                      attn_weights: Tensor) -> None:
    """``add_sdpa_compute_attn_weights_node`` (FUSED): ``scale * q @ k^T [+ mask]`` in float32."""
    reads = [q, k] + ([attn_mask] if attn_mask is not None else [])
    ubos = [graph.sizes_ubo(q), graph.sizes_ubo(k)] + ([graph.sizes_ubo(attn_mask)] if attn_mask is not None else [])
    graph.dispatch(lambda: pick_fused_qk_shader(q, k, attn_mask), global_wg=lambda: pick_fused_qk_global_wg_size(q, k),
                   local_wg=None, resources=[attn_weights, *reads, *ubos], spec={3: scale_val},
                   resize=lambda: resize_fused_attn_weights_node(graph, attn_weights, q, k), resize_args=(q, k))


def add_fused_softmax_node(graph: ComputeGraph, attn_weights: Tensor, q: Tensor, k: Tensor,
                           attn_weights_softmax: Tensor) -> None:
    """``add_sdpa_attn_weights_softmax_node`` (FUSED): float32 in, q's dtype out."""
    name = f"fused_sdpa_softmax_{storage_suffix(attn_weights_softmax)}_{dtype_suffix(attn_weights_softmax)}"
    graph.dispatch(name, global_wg=lambda: pick_fused_softmax_global_wg_size(q), local_wg=(64, 1, 1),
                   resources=[attn_weights_softmax, attn_weights, graph.sizes_ubo(q), graph.sizes_ubo(k)],
                   resize=lambda: resize_sdpa_attn_weights_softmax_node(graph, attn_weights_softmax, attn_weights),
                   resize_args=(q, k))


def add_fused_av_node(graph: ComputeGraph, attn_weights_softmax: Tensor, v: Tensor, q: Tensor, k: Tensor,
                      out: Tensor) -> None:
    """``add_sdpa_compute_out_node`` (FUSED): ``softmax @ v``."""
    name = f"fused_sdpa_av_tiled_{storage_suffix(out)}_{storage_suffix(v)}_{dtype_suffix(out)}"
    graph.dispatch(name, global_wg=lambda: pick_fused_av_global_wg_size(q), local_wg=None,
                   resources=[out, attn_weights_softmax, v, graph.sizes_ubo(q), graph.sizes_ubo(v)],
                   resize=lambda: resize_sdpa_out_node(graph, out, q), resize_args=(q, k))


def _fused_scale(q: Tensor, scale: Any) -> float:
    """``1 / sqrt(D)`` in float32 when ``scale`` is None, else ``extract_scalar<float>``."""
    if scale is None:
        return float(np.float32(1.0) / np.sqrt(np.float32(size_at(-1, q))))
    return float(np.float32(scale))


def resize_fused_sdpa(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """The output is sized as q (``resize_sdpa_out_node``)."""
    q = np.asarray(args["q"])
    return q.shape, q.dtype


@register_op(FUSED_SDPA_OP, output=resize_fused_sdpa, constants=(), ports=FUSED_PORTS)
def fused_sdpa(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``fused_sdpa_impl``: checks, the two ``[B, H, S, L]`` temporaries, then the QK, softmax and AV nodes.

    Args:
        graph (ComputeGraph): the graph the nodes join.
        args (Mapping[str, Any]): ``q`` ``[B, H, S, D]``, ``k`` / ``v`` ``[B, H, L, D]``, ``attn_mask`` (None or a
            device tensor broadcast to ``[B, H, S, L]``), ``scale`` (None or float).
        out (Tensor): ``[B, H, S, D]``.
    """
    q, k, v, mask = args["q"], args["k"], args["v"], args.get("attn_mask")
    check_cond(all(len(t.spec.sizes) == 4 for t in (q, k, v)), "q, k and v must be 4-D")
    check_cond(size_at(-1, q) == size_at(-1, k), "head dim of q and k differ")
    check_cond(size_at(-2, k) == size_at(-2, v), "k and v differ in sequence length")
    check_cond(all(t.spec.layout == "width" for t in (q, k, v)), "q, k and v must be width packed")
    sizes = fused_attn_weight_sizes(q, k)
    attn_weights = graph.add_tensor(sizes, "float32", storage_suffix(out), "width", temporary=True, label="attn_weights")
    attn_weights_softmax = graph.add_tensor(sizes, q.spec.dtype, storage_suffix(out), "width", temporary=True, label="attn_weights_softmax")
    add_fused_qk_node(graph, q, k, mask, _fused_scale(q, args.get("scale")), attn_weights)
    add_fused_softmax_node(graph, attn_weights, q, k, attn_weights_softmax)
    add_fused_av_node(graph, attn_weights_softmax, v, q, k, out)
