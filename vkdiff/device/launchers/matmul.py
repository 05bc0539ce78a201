"""Launchers for ``aten.mm.default``, ``aten.bmm.default`` and ``aten.addmm.default`` (``Matmul.cpp``).

Ported from ``runtime/graph/ops/impl/Matmul.cpp`` (``matmul_tiled``, ``addmm_tiled``,
``add_matmul_tiled_node``, ``add_addmm_tiled_node``, ``pick_matmul_tiled_shader``,
``pick_matmul_tiled_global_wg_size``) and ``GemmCommon.cpp`` (``resize_matmul_tiled_node``):

* a constant second operand (``val_is_tref(mat2)``) is packed by ``prepack_fp_linear_weight``
  untransposed (``[K, N]``; ``[B, K, N]`` stacks B batches) and runs the tiled *linear* node
  (``linear*`` variants, ``weight_B`` = B; see ``launchers/linear.py``); for addmm ``self`` is
  prepacked in the output's storage, width packed, passed through when it is already a tensor;
* a tensor second operand runs ``matmul[_vec][_bias][_tile_row_1|_tile_row_2]_<out storage>_<dtype>``:
  ``matmul`` (scalar) for a buffer output unless K and N are multiples of 4, the tile rows by
  ``pick_matmul_tile_m``; bindings out, mat1, mat2, [bias], then UBOs ``sizes`` of mat1, mat2, [bias];
  push constants ``alpha, beta`` (float) with a bias only; no spec constants;
* global ``(N4, ceil(M / tile_m), B)``, local ``pick_hw_square_wg_size``;
* operands and output must be width packed; output ``mat1``'s sizes with the last two ``M, N``
  (``resize_matmul_tiled_node``); the constant path resizes as ``resize_linear_node``.

``is_coopmat_eligible`` is ported; its coopmat nodes are not (``linear.coopmat_not_ported``).

Kernel cases choose the second operand's kind with option ``mat2`` (``const``: prepacked, the
default; ``tensor``: staged as a graph input in the output's storage) and name the kernel base
they expect with ``route`` (checked against the pick).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.staging import SUFFIX, graph_input, prepack_standard
from vkdiff.device.launchers.utils.common import pick_hw_square_wg_size
from vkdiff.device.launchers.linear import (MATMUL_PORT, PORTS as LINEAR_PORTS, add_linear_tiled_node, check_route,
                                            coopmat_not_ported, is_coopmat_eligible, prepack_fp_linear_weight,
                                            tiled_global_wg_size, tiled_kernel_base)
from vkdiff.device.launchers.registry import register_op
from vkdiff.device.runtime.resources import Tensor

PORTS = (MATMUL_PORT, *LINEAR_PORTS)


def resize_matmul_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``resize_matmul_tiled_node`` on numpy arguments: mat1's sizes with the last one mat2's."""
    a, b = np.asarray(args["self"]), np.asarray(args["mat2"])
    return (*a.shape[:-1], b.shape[-1]), a.dtype


def resize_addmm_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """``[M, N]`` from ``mat1`` and ``mat2``."""
    a, b = np.asarray(args["mat1"]), np.asarray(args["mat2"])
    return (a.shape[0], b.shape[-1]), a.dtype


def matmul_out_sizes(mat1: Tensor, mat2: Tensor) -> tuple[int, ...]:
    """``resize_matmul_tiled_node``: mat1's sizes, dim -1 from mat2, dim -2 from mat1."""
    return (*mat1.spec.sizes[:-1], mat2.spec.sizes[-1])


def _tiled_node(graph: ComputeGraph, mat1: Tensor, mat2: Tensor, bias: Tensor | None, out: Tensor,
                pcs: bytes, route: str | None) -> None:
    """``add_matmul_tiled_node`` (no bias) and ``add_addmm_tiled_node`` (bias and ``alpha, beta``)."""
    for tensor in (mat1, mat2, out) + ((bias,) if bias is not None else ()):
        if tensor.spec.info.packed_dim != 0:
            raise EtVkRefusal(f"matmul: every operand must be width packed, got {tensor.spec.layout}")

    def base() -> str:
        return tiled_kernel_base("matmul", out, mat1.spec.sizes[-1], bias is not None)

    def shader() -> str:
        """``pick_matmul_tiled_shader``."""
        return f"{base()}_{out.spec.storage}_{SUFFIX[out.spec.dtype]}"

    check_route("route", route, base())
    operands = [mat1, mat2] + ([bias] if bias is not None else [])
    graph.dispatch(shader, global_wg=lambda: tiled_global_wg_size(out),
                   local_wg=lambda: pick_hw_square_wg_size(tiled_global_wg_size(out)),
                   resources=[out, *operands, *(graph.sizes_ubo(t) for t in operands)], immediates=pcs,
                   resize=lambda: graph.virtual_resize(out, matmul_out_sizes(mat1, mat2)))


def _second_operand(graph: ComputeGraph, mat2: Any, out: Tensor, kind: str) -> Any:
    """The kernel cases' adapter: ``mat2="tensor"`` stages the constant as a graph input (a tensor operand)."""
    if kind not in ("const", "tensor"):
        raise ValueError(f"mat2 option {kind!r} not in ('const', 'tensor')")
    if kind == "tensor" and isinstance(mat2, TensorRef):
        return graph_input(graph, np.asarray(mat2.data), out.spec.storage, "width", label="mat2")
    return mat2


def _passthrough(graph: ComputeGraph, value: Any, out: Tensor) -> Tensor:
    """``prepack_standard(value, out storage, width packed, passthrough=true)``."""
    return prepack_standard(graph, value, out.spec.storage, "width") if isinstance(value, TensorRef) else value


def _batches(ref: TensorRef) -> int:
    shape = np.shape(ref.data)
    return int(shape[0]) if len(shape) >= 3 else 1


@register_op("aten.mm.default", output=resize_matmul_output, constants=("mat2",), ports=PORTS)
def matmul_tiled(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, mat2: str = "const",
                 route: str | None = None, weight_storage: str | None = None) -> None:
    """``matmul_tiled``: ``mm`` / ``bmm`` with a constant (packed, linear node) or tensor second operand.

    Args:
        graph (ComputeGraph): the graph the nodes join.
        args (Mapping[str, Any]): ``self`` (Tensor), ``mat2`` (TensorRef or Tensor).
        out (Tensor): the output.
        mat2 (str): ``const`` or ``tensor`` (kernel cases: how a constant ``mat2`` enters the graph).
        route (str | None): the kernel base the case expects (checked).
        weight_storage (str | None): the packed weight's storage the case expects (constant path, checked).

    Example::

        matmul_tiled(graph, {"self": a, "mat2": TensorRef(id=2, data=b)}, out)
    """
    mat1, second = args["self"], _second_operand(graph, args["mat2"], out, mat2)
    m, k, n = mat1.spec.sizes[-2], mat1.spec.sizes[-1], out.spec.sizes[-1]
    eligible = is_coopmat_eligible(graph, out, m, n, k)
    if isinstance(second, TensorRef):
        b = _batches(second)
        packed = prepack_fp_linear_weight(graph, second, is_transposed=False, b=b, force_buffer=eligible)
        check_route("weight_storage", weight_storage, packed.spec.storage)
        if eligible:
            coopmat_not_ported("add_linear_coopmat_node")
        add_linear_tiled_node(graph, mat1, packed, None, False, out, weight_b=b, route=route)
    elif eligible:
        coopmat_not_ported("add_matmul_coopmat_node")
    else:
        _tiled_node(graph, mat1, second, None, out, b"", route)


register_op("aten.bmm.default", output=resize_matmul_output, constants=("mat2",), ports=PORTS)(matmul_tiled)


@register_op("aten.addmm.default", output=resize_addmm_output, constants=("self", "mat2"), ports=PORTS)
def addmm_tiled(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, mat2: str = "const",
                route: str | None = None, weight_storage: str | None = None) -> None:
    """``addmm_tiled``: ``beta * self + alpha * (mat1 @ mat2)``; options as ``matmul_tiled``'s."""
    mat1, second = args["mat1"], _second_operand(graph, args["mat2"], out, mat2)
    alpha = float(1.0 if args.get("alpha") is None else args["alpha"])
    beta = float(1.0 if args.get("beta") is None else args["beta"])
    if isinstance(second, TensorRef):
        b = _batches(second)
        packed = prepack_fp_linear_weight(graph, second, is_transposed=False, b=b)
        check_route("weight_storage", weight_storage, packed.spec.storage)
        has_bias = args.get("self") is not None
        bias = _passthrough(graph, args["self"], out) if has_bias else None
        add_linear_tiled_node(graph, mat1, packed, bias, has_bias, out, weight_b=b, alpha=alpha, beta=beta,
                              route=route)
    else:
        bias = _passthrough(graph, args["self"], out)
        _tiled_node(graph, mat1, second, bias, out, np.array([alpha, beta], np.float32).tobytes(), route)
