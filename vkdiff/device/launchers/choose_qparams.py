"""Launcher for ``torchao.choose_qparams_affine`` (per-row) through ``choose_qparams_per_row_*``.

Ported from ``runtime/graph/ops/impl/ChooseQParams.cpp`` (``choose_qparams_affine_impl`` →
``add_choose_qparams_per_row_node``): only the per-row case is supported
(``can_use_choose_qparams_per_row``: a vectorizable contiguous 2-D input whose block
size is ``[1, ..., K]``); variant ``choose_qparams_per_row_<input storage>_<dtype>_{zpint8|zpinherit}``
by the zero-point tensor's dtype; global ``(1, div_up(H, 4), 1)``, local ``(64, 1, 1)``; push
constants ``quant_min, quant_max`` (int32; the C++ tests ``quant_min`` for None in both
places); UBO: input sizes. Outputs: scales and zero points ``[..., H]``.

``etvk.choose_qparams_per_row`` (``choose_qparams_per_row``) calls ``add_choose_qparams_per_row_node``
directly, without ``can_use_choose_qparams_per_row``'s checks: any input, any ``K``. Its outputs are the
caller's ``input_scales`` and ``input_zps`` (arguments 3 and 4, constants here: only their sizes and dtypes
matter); the resize keeps their rank and sets the last dim to the input's height. The zero points' dtype
picks ``zpint8`` or ``zpinherit``.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import div_up, val_at
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "torchao.choose_qparams_affine.default"
OP_PER_ROW = "etvk.choose_qparams_per_row.default"

PORTS = (Port(file="runtime/graph/ops/impl/ChooseQParams.cpp",
              functions=("choose_qparams_affine_impl", "add_choose_qparams_per_row_node",
                         "can_use_choose_qparams_per_row", "pick_choose_qparams_per_row_shader",
                         "pick_choose_qparams_per_row_global_wg_size", "resize_choose_qparams_per_row",
                         "pick_choose_qparams_per_row_local_wg_size", "choose_qparams_per_row"),
              sha256="da7da832d0d062c81d432035b63badd45e502d27686ceb019ff84a3fe2fd80ef",
              tree="executorch main cff6f4dd32"),)


def zp_dtype_mode(dtype: str) -> str:
    """``add_zp_dtype_mode_suffix``: int8 zero points, or zero points in the float dtype (``zpinherit``)."""
    if dtype == "int8":
        return "zpint8"
    if dtype in ("float16", "float32"):
        return "zpinherit"
    raise EtVkRefusal(f"Unsupported per-token zero-point dtype for dq8ca: {dtype}")


def with_zp_suffix(graph: ComputeGraph, name: str, zp_dtype: str) -> str:
    """``name`` plus the zero-point mode where the tree has zero-point modes (since d78d5e49dd).

    Older trees name one variant per (storage, dtype), whose zero-point binding is int8
    whatever the graph allocated; the binding check then reports the mismatch.
    """
    suffixed = f"{name}_{zp_dtype_mode(zp_dtype)}"
    return suffixed if graph.ctx.has(suffixed) or not graph.ctx.has(name) else name


def resize_choose_qparams_per_row(args: Mapping[str, Any], dtype: Any = None) -> list[tuple[tuple[int, ...], Any]]:
    """``resize_choose_qparams_per_row``: scales and zero points ``[..., H]`` in their requested dtypes."""
    x = np.asarray(args["input"])
    rows = (*x.shape[:-1],)
    return [(rows, np.dtype(args.get("scale_dtype") or x.dtype)), (rows, np.dtype(args.get("zero_point_dtype") or "int8"))]


class UnsupportedInputError(ValueError):
    """``VK_THROW("Unsupported input case for choose_qparams_affine")``."""


def can_use_per_row(x: Tensor, block_size) -> bool:
    """``can_use_choose_qparams_per_row``."""
    spec = x.spec
    contiguous_2d = len(spec.sizes) >= 2 and spec.info.packed_dim == 0 and (
        spec.storage != "buffer" or val_at(-1, spec.sizes) % 4 == 0)
    return bool(contiguous_2d and int(block_size[-1]) == val_at(-1, spec.sizes)
                and all(int(b) == 1 for b in block_size[:-1]))


@register_op(OP, output=resize_choose_qparams_per_row, constants=(), ports=PORTS,
             placements={"out0": "texture3d", "out1": "texture3d"})
def choose_qparams_affine_impl(graph: ComputeGraph, args: Mapping[str, Any], out: tuple[Tensor, Tensor]) -> None:
    """``choose_qparams_affine_impl`` → ``add_choose_qparams_per_row_node``."""
    x = args["input"]
    scales, zps = out
    if not can_use_per_row(x, args["block_size"]):
        raise UnsupportedInputError(f"Unsupported input case for choose_qparams_affine (input {x.spec.sizes}, "
                                    f"block_size {list(args['block_size'])})")
    add_choose_qparams_per_row_node(graph, x, args.get("quant_min"), args.get("quant_max"), scales, zps)


def add_choose_qparams_per_row_node(graph: ComputeGraph, x: Tensor, quant_min: int | None, quant_max: int | None,
                                    scales: Tensor, zps: Tensor) -> None:
    """``add_choose_qparams_per_row_node``: int8 range when ``quant_min`` is None (it alone is tested)."""
    if quant_min is not None and quant_max is None:
        raise EtVkRefusal("extract_scalar<int32_t>(quant_max): quant_max is None while quant_min is set")
    qmin = -128 if quant_min is None else int(quant_min)
    qmax = 127 if quant_min is None else int(quant_max)
    name = with_zp_suffix(graph, f"choose_qparams_per_row_{x.spec.storage}_{SUFFIX[x.spec.dtype]}", zps.spec.dtype)

    def resize() -> None:
        rows = (*scales.spec.sizes[:-1], val_at(-2, x.spec.sizes))
        graph.virtual_resize(scales, rows)
        graph.virtual_resize(zps, rows)

    graph.dispatch(lambda: name, global_wg=lambda: (1, div_up(val_at(-2, x.spec.sizes), 4), 1),
                   local_wg=lambda: (64, 1, 1), resources=[scales, zps, x, graph.sizes_ubo(x)],
                   immediates=np.array([qmin, qmax], np.int32).tobytes(), resize=resize)


def resize_choose_qparams_per_row_args(args: Mapping[str, Any],
                                       dtype: Any = None) -> list[tuple[tuple[int, ...], Any]]:
    """``resize_choose_qparams_per_row`` for ``etvk.choose_qparams_per_row``: the caller's outputs, last dim H."""
    height = val_at(-2, np.shape(args["input"]))
    return [((*np.shape(args[name])[:-1], height), np.asarray(args[name]).dtype)
            for name in ("input_scales", "input_zps")]


@register_op(OP_PER_ROW, output=resize_choose_qparams_per_row_args, constants=("input_scales", "input_zps"),
             ports=PORTS, placements={"out0": "texture3d", "out1": "texture3d"})
def choose_qparams_per_row(graph: ComputeGraph, args: Mapping[str, Any], out: tuple[Tensor, Tensor]) -> None:
    """``choose_qparams_per_row``: ``(input, quant_min, quant_max, input_scales, input_zps)``, no route check."""
    scales, zps = out
    add_choose_qparams_per_row_node(graph, args["input"], args.get("quant_min"), args.get("quant_max"), scales, zps)
