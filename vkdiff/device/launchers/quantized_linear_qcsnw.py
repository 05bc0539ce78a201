"""Launchers for ``aten._weight_int8pack_mm`` and ``et_vk.linear_qcs4w``: float activations, per-channel weights.

Ported from ``runtime/graph/ops/impl/QuantizedLinearQCSNW.cpp`` (``weight_int8pack_mm``, ``linear_qcs4w``,
``check_linear_qcsnw_args``, ``can_use_tiled_impl``, ``can_use_coop_impl``, ``add_linear_qcsnw_tiled_node``,
``add_linear_qcs8w_node``, the ``linear_qcs*_{global,local}_wg_size`` functions, ``resize_linear_qcsnw_node``)
and ``Staging.cpp`` (``prepack_standard_hw_transposed``, ``prepack_int4_linear_weight_transposed_interleaved``):

* ``check_linear_qcsnw_args``: input ``[M, K]`` or ``[B, M, K]``, weight 2-D, scales 1-D, input and output
  packed alike, ``K == weight K`` (``K == 2 * weight width`` for 4 bits), ``N == scales``, a buffer output
  contiguous;
* tiled route (``can_use_tiled_impl``: no batches, ``K % 4 == 0``, ``N % 4 == 0``, a width-packed input or
  output; ``linear_qcs4w`` refuses otherwise): variant
  ``linear_qcs{8,4}w_{tiled|coop}_<out>_<in>_<weight>_<scales>_<dtype>_o4x{R}``, ``R`` = 3, 4, 2, 1 rows, the
  first dividing M; ``_coop`` when M == 1 (not on Adreno 702). The 8-bit weight ``[N, K]`` is prepacked
  height/width transposed (``[K, N]``, int8, texture2d unless ``N > 4 * max2d`` or ``K > max2d``); the 4-bit
  weight by ``pack_int4_linear_weight_transposed_interleaved[_nobitw8buffer]_buffer`` into uint8 ``[K, N/2]``
  (always a buffer: both branches of the C++ storage choice say buffer); scales texture2d unless
  ``N > max2d``. The shader name is fixed at build (``VK_KERNEL_FROM_STR``) while the global size function
  re-derives the tile rows from the current M: ``(ceil(N4 / C) * ceil(M / R'), 1, B)`` with ``C`` = 2 texel
  columns for 4 bits, 1 for 8; local ``(8, 1, 8)`` (coop) or ``(64, 1, 1)``. Push constants: sizes of out,
  input, packed weight. No UBOs, no spec constants;
* fallback (``_weight_int8pack_mm`` only, when the tiled route is refused): ``linear_qcs8w_W_packed_W_packed_
  <dtype>_<storage>`` (``linear_qcsnw.glsl``) over ``numel(out)`` invocations, local ``(64, 1, 1)``; weight and
  scales in the output's storage; a texture input not width packed is copied to a width-packed temporary by
  ``aten.view_copy`` and the result copied back. Push constants (buffer): sizes/strides of out, sizes of the
  input, strides of input, weight, scales, numel of out; (texture) logical limits of out, sizes of input and
  weight;
* output ``[M, N]`` or ``[B, M, N]`` (``resize_linear_qcsnw_node``, N from the packed weight).

Cases name the route they expect (option ``route``: ``tiled_o4x{1..4}``, ``coop``, ``fallback``) and may
name ``weight_storage``; the launcher checks its picks against them.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.compute import create_local_wg_size
from vkdiff.device.graph.staging import SUFFIX, prepack_standard, staging_buffer, write_nchw
from vkdiff.device.launchers import view as view_copy
from vkdiff.device.launchers.utils.common import div_up, val_at
from vkdiff.device.launchers.linear import check_route
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Storage, Tensor

OP_INT8 = "aten._weight_int8pack_mm.default"
OP_INT4 = "et_vk.linear_qcs4w.default"
TREE = "executorch main cff6f4dd32"

PORTS = (
    Port(file="runtime/graph/ops/impl/QuantizedLinearQCSNW.cpp",
         functions=("weight_int8pack_mm", "linear_qcs4w", "check_linear_qcsnw_args", "can_use_tiled_impl",
                    "can_use_coop_impl", "add_linear_qcsnw_tiled_node", "add_linear_qcs8w_node",
                    "linear_qcsnw_tiled_global_wg_size", "linear_qcsnw_tiled_local_wg_size",
                    "linear_qcs8w_global_wg_size", "linear_qcs8w_local_wg_size", "resize_linear_qcsnw_node"),
         sha256="419295d83e16597c74202897298ee79d4fc624edd156f02b5232e39f9a22d594", tree=TREE),
    Port(file="runtime/graph/ops/impl/Staging.cpp",
         functions=("prepack_standard_hw_transposed", "prepack_int4_linear_weight_transposed_interleaved"),
         sha256="8e1ae8d3ebff29ea7805c6d8417ead0c94fdb0dd8d7f7efa98256fd86fbf365f", tree=TREE),
    *view_copy.PORTS,
)


def qcsnw_out_sizes(x_sizes: tuple[int, ...], n: int) -> tuple[int, ...]:
    """``resize_linear_qcsnw_node``'s sizes: ``[M, N]`` or ``[B, M, N]``."""
    m = val_at(-2, x_sizes)
    return (m, n) if len(x_sizes) == 2 else (x_sizes[0], m, n)


def _output(x_name: str, w_name: str):
    def output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
        """``resize_linear_qcsnw_node``: N is the weight's rows (its packed width, doubled for 4 bits)."""
        x = np.asarray(args[x_name])
        return qcsnw_out_sizes(x.shape, np.shape(args[w_name])[0]), x.dtype
    return output


def check_linear_qcsnw_args(nbits: int, x: Tensor, weight: TensorRef, scales: TensorRef, out: Tensor) -> None:
    """``check_linear_qcsnw_args``: each ``VK_CHECK_COND`` as ET-VK words it."""
    x_sizes, w_sizes, s_sizes = x.spec.sizes, np.shape(weight.data), np.shape(scales.data)
    k_factor = 2 if nbits == 4 else 1
    checks = (
        (len(x_sizes) in (2, 3), "mat1_sizes.size() == 2 || mat1_sizes.size() == 3"),
        (len(w_sizes) == 2, "qmat2_sizes.size() == 2"),
        (len(s_sizes) == 1, "scales_sizes.size() == 1"),
        (x.spec.info.packed_dim == out.spec.info.packed_dim, "graph.packed_dim_of(mat1) == graph.packed_dim_of(out)"),
        (val_at(-1, x_sizes) == val_at(-1, w_sizes) * k_factor,
         "utils::val_at(-1, mat1_sizes) == utils::val_at(-1, qmat2_sizes)" + (" * 2" if nbits == 4 else "")),
        (val_at(-1, s_sizes) == val_at(-2, w_sizes),
         "utils::val_at(-1, scales_sizes) == utils::val_at(-2, qmat2_sizes)"),
        (out.spec.storage != "buffer" or out.spec.layout == "width", "graph.is_contiguous(out)"),
    )
    for ok, text in checks:
        if not ok:
            raise EtVkRefusal(f"check_linear_qcsnw_args: VK_CHECK_COND({text}) fails for input {list(x_sizes)}, "
                              f"weight {list(w_sizes)}, scales {list(s_sizes)}")


def can_use_tiled_impl(x: Tensor, out: Tensor) -> bool:
    """``can_use_tiled_impl``: no batches, K and N multiples of 4, the input or output width packed."""
    sizes = x.spec.sizes
    if len(sizes) == 3 and sizes[0] != 1:
        return False
    if val_at(-1, sizes) % 4 or val_at(-1, out.spec.sizes) % 4:
        return False
    return x.spec.info.packed_dim == 0 or out.spec.info.packed_dim == 0


def can_use_coop_impl(graph: ComputeGraph, x: Tensor) -> bool:
    """``can_use_coop_impl``: GEMV (M == 1), except on Adreno 702."""
    if graph.route.vendor == "qualcomm" and "702" in graph.ctx.info.name:
        return False
    return val_at(-2, x.spec.sizes) == 1


def tile_rows(m: int) -> int:
    """The ``_o4x{R}`` tile rows: the first of 3, 4, 2 dividing M, else 1."""
    return next((rows for rows in (3, 4, 2) if m % rows == 0), 1)


def prepack_standard_hw_transposed(graph: ComputeGraph, ref: TensorRef, storage: Storage) -> Tensor:
    """``prepack_standard_hw_transposed``: the last two dims swapped, written by the standard prepack shader."""
    data = np.asarray(ref.data)
    sizes = (*data.shape[:-2], data.shape[-1], data.shape[-2])
    tensor = graph.add_tensor(sizes, data.dtype.name, storage, "width", label=f"prepacked_{ref.id}_t")
    write_nchw(graph, tensor, data, prepack=True, transpose_hw=True)
    return tensor


def prepack_int4_linear_weight_transposed_interleaved(graph: ComputeGraph, ref: TensorRef) -> Tensor:
    """``prepack_int4_linear_weight_transposed_interleaved``: uint8 ``[N, K/2]`` → uint8 ``[K, N/2]`` buffer."""
    n, k = np.shape(ref.data)[-2], np.shape(ref.data)[-1] * 2
    packed = graph.add_tensor((k, n // 2), "uint8", "buffer", "width", label="packed_int4_weight")
    x, y, z = packed.spec.logical_limits
    global_wg = (x, div_up(y, 2), z)
    name = ("pack_int4_linear_weight_transposed_interleaved" + ("" if graph.route.int8_buffers else "_nobitw8buffer")
            + "_buffer")
    src = staging_buffer(graph, np.asarray(ref.data, dtype=np.uint8), "int4_weight")
    graph.dispatch(name, global_wg=global_wg, local_wg=create_local_wg_size(global_wg), resources=[packed, src],
                   immediates=packed.spec.sizes_block(), prepack=True)
    return packed


def tiled_kernel_name(coop: bool, nbits: int, out: Tensor, x: Tensor, weight: Storage, scales: Storage) -> str:
    """``add_linear_qcsnw_tiled_node``'s variant: storages of out, input, weight, scales; dtype; tile rows."""
    stem = f"linear_qcs{nbits}w_{'coop' if coop else 'tiled'}"
    return (f"{stem}_{out.spec.storage}_{x.spec.storage}_{weight}_{scales}_{SUFFIX[out.spec.dtype]}"
            f"_o4x{tile_rows(val_at(-2, x.spec.sizes))}")


def add_linear_qcsnw_tiled_node(graph: ComputeGraph, coop: bool, nbits: int, x: Tensor, weight_ref: TensorRef,
                                scales_ref: TensorRef, out: Tensor, weight_storage: str | None = None) -> str:
    """``add_linear_qcsnw_tiled_node``; returns the route it took (``coop`` or ``tiled_o4x{R}``)."""
    max_extent = graph.device.limits["max-texture-dimension-2d"]
    n, k = np.shape(weight_ref.data)[-2], np.shape(weight_ref.data)[-1]
    w_storage: Storage = "buffer" if nbits == 4 or n > max_extent * 4 or k > max_extent else "texture2d"
    s_storage: Storage = "buffer" if n > max_extent else "texture2d"
    check_route("weight_storage", weight_storage, w_storage)
    name = tiled_kernel_name(coop, nbits, out, x, w_storage, s_storage)
    graph.ctx.require(name)  # VK_KERNEL_FROM_STR throws at graph build, before any prepack node runs
    q_mat2 = (prepack_int4_linear_weight_transposed_interleaved(graph, weight_ref) if nbits == 4
              else prepack_standard_hw_transposed(graph, weight_ref, w_storage))
    scales = prepack_standard(graph, scales_ref, s_storage, "width")
    n_out = val_at(-1, out.spec.sizes)

    def global_wg() -> tuple[int, int, int]:
        """``linear_qcsnw_tiled_global_wg_size``: tile rows from the current M, whatever the built variant."""
        rows, columns = tile_rows(val_at(-2, x.spec.sizes)), 2 if nbits == 4 else 1
        lx, ly, lz = out.spec.logical_limits
        return (div_up(lx, columns) * div_up(ly, rows), 1, lz)

    graph.dispatch(name, global_wg=global_wg, local_wg=(8, 1, 8) if coop else (64, 1, 1),
                   resources=[out, x, q_mat2, scales],
                   immediates=[graph.pc(out, "sizes"), graph.pc(x, "sizes"), graph.pc(q_mat2, "sizes")],
                   resize=lambda: graph.virtual_resize(out, qcsnw_out_sizes(x.spec.sizes, n_out)))
    return "coop" if coop else f"tiled_o4x{tile_rows(val_at(-2, x.spec.sizes))}"


def add_linear_qcs8w_node(graph: ComputeGraph, x: Tensor, weight_ref: TensorRef, scales_ref: TensorRef,
                          out: Tensor) -> None:
    """``add_linear_qcs8w_node``: the naive shader, with width-packed copies of a texture input and output."""
    x_w, out_w = x, out
    views = out.spec.storage != "buffer" and x.spec.info.packed_dim != 0
    if views:
        x_w = graph.add_tensor(x.spec.sizes, x.spec.dtype, x.spec.storage, "width", temporary=True, label="mat1_W_packed")
        view_copy.view(graph, {"self": x, "size": None}, x_w)
        out_w = graph.add_tensor(out.spec.sizes, out.spec.dtype, out.spec.storage, "width", temporary=True, label="out_W_packed")
    q_mat2 = prepack_standard_hw_transposed(graph, weight_ref, out.spec.storage)
    scales = prepack_standard(graph, scales_ref, out.spec.storage, "width")
    name = f"linear_qcs8w_W_packed_W_packed_{SUFFIX[out_w.spec.dtype]}_{out_w.spec.storage}"
    if out_w.spec.storage == "buffer":
        pcs = [graph.pc(out_w, "sizes"), graph.pc(out_w, "strides"), graph.pc(x_w, "sizes"), graph.pc(x, "strides"),
               graph.pc(q_mat2, "strides"), graph.pc(scales, "strides"), graph.pc(out_w, "numel")]
    else:
        pcs = [graph.pc(out_w, "logical_limits"), graph.pc(x_w, "sizes"), graph.pc(q_mat2, "sizes")]
    n_out = val_at(-1, out.spec.sizes)
    graph.dispatch(name, global_wg=lambda: (out_w.spec.numel, 1, 1), local_wg=(64, 1, 1),
                   resources=[out_w, x_w, q_mat2, scales], immediates=pcs,
                   resize=lambda: graph.virtual_resize(out_w, qcsnw_out_sizes(x_w.spec.sizes, n_out)))
    if views:
        view_copy.view(graph, {"self": out_w, "size": None}, out)


@register_op(OP_INT8, output=_output("self", "mat2"), constants=("mat2", "scales"), ports=PORTS)
def weight_int8pack_mm(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None,
                       weight_storage: str | None = None) -> None:
    """``weight_int8pack_mm``: the tiled or coop shader when ``can_use_tiled_impl``, else the naive one.

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): ``self`` (Tensor ``[M, K]`` / ``[B, M, K]``), ``mat2`` (int8 ``[N, K]``), ``scales``
            (``[N]``) as TensorRefs.
        out (Tensor): ``[..., M, N]``.
        route (str | None): the route the case expects (``tiled_o4x{R}``, ``coop``, ``fallback``); checked.
        weight_storage (str | None): the packed weight's storage the case expects (tiled routes); checked.
    """
    x, weight, scales = args["self"], args["mat2"], args["scales"]
    check_linear_qcsnw_args(8, x, weight, scales, out)
    if can_use_tiled_impl(x, out):
        picked = add_linear_qcsnw_tiled_node(graph, can_use_coop_impl(graph, x), 8, x, weight, scales, out,
                                             weight_storage)
    else:
        add_linear_qcs8w_node(graph, x, weight, scales, out)
        picked = "fallback"
    check_route("route", route, picked)


@register_op(OP_INT4, output=_output("self", "weight"), constants=("weight", "scales"), ports=PORTS)
def linear_qcs4w(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None) -> None:
    """``linear_qcs4w``: the tiled or coop 4-bit shader; ``VK_CHECK_COND(can_use_tiled_impl)`` otherwise.

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): ``self`` (Tensor ``[M, K]`` / ``[1, M, K]``), ``weight`` (uint8 ``[N, K/2]``, even k in
            the high nibble), ``scales`` (``[N]``) as TensorRefs.
        out (Tensor): ``[..., M, N]``.
        route (str | None): the route the case expects (``tiled_o4x{R}``, ``coop``); checked.
    """
    x, weight, scales = args["self"], args["weight"], args["scales"]
    check_linear_qcsnw_args(4, x, weight, scales, out)
    if not can_use_tiled_impl(x, out):
        raise EtVkRefusal(f"linear_qcs4w: VK_CHECK_COND(can_use_tiled_impl(graph, args[0], args[1], args[2], "
                          f"args[3])) fails for input {list(x.spec.sizes)}, output {list(out.spec.sizes)} "
                          f"(needs no batches, K % 4 == 0, N % 4 == 0)")
    check_route("route", route, add_linear_qcsnw_tiled_node(graph, can_use_coop_impl(graph, x), 4, x, weight,
                                                             scales, out))
