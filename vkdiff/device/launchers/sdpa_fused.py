"""Launchers for ``llama.custom_sdpa.default`` and ``et_vk.sdpa.default``: ET-VK's SDPA without a KV cache update.

Ported from ``runtime/graph/ops/impl/SDPA.cpp``:

* ``llama.custom_sdpa`` → ``sdpa_impl`` (``launchers/sdpa.py``: its checks, temporaries and three nodes
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

from collections.abc import Mapping
from typing import Any

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.launchers.utils.common import div_up
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.launchers.sdpa import (
    check_cond,
    dtype_suffix,
    size_at,
    storage_suffix,
    pick_sdpa_av_shader,
    resize_sdpa_attn_weights_softmax_node,
    resize_sdpa_out_node,
    resize_sdpa_with_kv_cache,
    sdpa_impl,
)
from vkdiff.device.resources import Tensor
from vkdiff.device.routing import route_for

CUSTOM_SDPA_OP = "llama.custom_sdpa.default"
FUSED_SDPA_OP = "et_vk.sdpa.default"

PORTS = (
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


@register_op(CUSTOM_SDPA_OP, output=resize_sdpa_with_kv_cache, constants=(), ports=PORTS)
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


@register_op(FUSED_SDPA_OP, output=resize_fused_sdpa, constants=(), ports=PORTS)
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
