"""Launcher for ``aten.linear.default`` (float linear, constant weight) and the tiled linear node mm/addmm share.

Ported from ``runtime/graph/ops/impl/Linear.cpp`` (``linear_packed_weight``, ``add_linear_tiled_node``,
``pick_linear_shader``, ``pick_linear_global_wg_size``), ``GemmCommon.cpp`` (``prepack_fp_linear_weight``,
``resize_linear_node``), ``Matmul.cpp`` (``pick_matmul_tile_m``) and ``GemmCoopmat.h`` (``is_coopmat_eligible``):

* the weight constant (``[N, K]``, or ``[K, N]`` untransposed for mm/addmm, ``[B, K, N]`` for bmm) is
  packed by ``pack_fp_linear_weight_<storage>_<dtype>_<staging dtype>`` (prepack node, global
  ``(N4, K4, B)``, push constants ``N, K, B, is_transposed``) into a width-packed ``[B*K4, N4*16]``
  tensor: texture2d unless ``N4*4`` texels or ``B*K4`` rows exceed ``max-texture-dimension-2d`` (then
  buffer), or buffer when the coopmat path is taken;
* the bias is prepacked in the output's storage, width packed (``passthrough=false``);
* variant ``<linear|linear_vec>[_bias][_tile_row_1|_tile_row_2]_<out storage>_<weight storage>_<dtype>``:
  ``linear`` (scalar) for a buffer output unless K and N are multiples of 4; the tile rows by
  ``pick_matmul_tile_m`` (4, 2 or 1 rows per thread: the largest giving ``N4 * ceil(M/tile) * B ≥ 4096``);
* bindings out, input, packed weight, [bias], then UBOs ``sizes`` of input, out, [bias];
  push constants ``weight_B`` (int) then, with a bias, ``alpha, beta`` (float); no spec constants;
* global ``(N4, ceil(M / tile_m), B)``, local ``pick_hw_square_wg_size``;
* output ``[M, N]`` or ``[B, M, N]`` (``resize_linear_node``: M from the input's dim -2, B its dim 0).

The cooperative-matrix nodes of ``GemmCoopmat.cpp`` are not ported: ``is_coopmat_eligible`` is, and is
false on every routing profile whose device naga can load coopmat shaders for (none today); a profile
declaring cooperative matrix reaches the refusal in ``coopmat_not_ported``.

Cases name the C++ route they expect with the ``route`` option (the kernel base, e.g.
``linear_vec_tile_row_1``) and may name ``weight_storage``: the launcher checks its pick against them.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.compute import create_local_wg_size
from vkdiff.device.graph.staging import SUFFIX, prepack_standard, staging_buffer, staging_dtype
from vkdiff.device.launchers.utils.common import div_up, pick_hw_square_wg_size, val_at
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "aten.linear.default"
TREE = "executorch main cff6f4dd32"

PORTS = (
    Port(file="runtime/graph/ops/impl/Linear.cpp",
         functions=("linear_packed_weight", "add_linear_tiled_node", "pick_linear_shader",
                    "pick_linear_global_wg_size"),
         sha256="bc82eb9ccca5b29910159c322bb712e836a99a34a7663a3b5c1df0d24da34d0f", tree=TREE),
    Port(file="runtime/graph/ops/impl/GemmCommon.cpp",
         functions=("prepack_fp_linear_weight", "resize_linear_node", "resize_matmul_tiled_node"),
         sha256="bc9dae41ab656174e5111c3cba5d27c729bccfdd285ebdf5d5703627e1851d4f", tree=TREE),
    Port(file="runtime/graph/ops/impl/GemmCoopmat.h", functions=("is_coopmat_eligible",),
         sha256="58d82a808d56dd079ccdcd0759a8c91afb2ce6164e46de3730312183182a7b74", tree=TREE),
)
MATMUL_PORT = Port(file="runtime/graph/ops/impl/Matmul.cpp",
                   functions=("pick_matmul_tile_m", "pick_matmul_tiled_shader", "pick_matmul_tiled_global_wg_size",
                              "add_matmul_tiled_node", "add_addmm_tiled_node", "matmul_tiled", "addmm_tiled"),
                   sha256="3e60872f7712660ec969be976d5678c9e19f64b8ff79df924aae12a6f8ab62d9", tree=TREE)

MIN_OCCUPANCY_THREADS = 4096
"""``kMinOccupancyThreads``."""
COOPMAT_TILE = (64, 64, 32)
"""``kCoopmatTileM``, ``kCoopmatTileN``, ``kCoopmatTileK``."""


class RouteMismatchError(AssertionError):
    """A case declares a route the ported C++ does not take for its shapes (the case is mis-declared)."""


def check_route(what: str, expected: str | None, picked: str) -> None:
    """Raise when a case's declared route (``route`` / ``weight_storage`` option) differs from the pick."""
    if expected is not None and expected != picked:
        raise RouteMismatchError(f"case declares {what} {expected!r} but the C++ picks {picked!r} for these shapes")


def pick_matmul_tile_m(out: Tensor) -> int:
    """``pick_matmul_tile_m`` (Matmul.cpp): the largest of 4, 2, 1 rows giving ≥ 4096 thread groups, else 1."""
    sizes = out.spec.sizes
    n, m = val_at(-1, sizes), val_at(-2, sizes)
    b = val_at(-3, sizes) if len(sizes) >= 3 else 1
    for tile_m in (4, 2, 1):
        if div_up(n, 4) * div_up(m, tile_m) * b >= MIN_OCCUPANCY_THREADS:
            return tile_m
    return 1


def tiled_kernel_base(stem: str, out: Tensor, k: int, has_bias: bool) -> str:
    """The shared part of ``pick_linear_shader`` / ``pick_matmul_tiled_shader``: scalar or vec, bias, tile rows."""
    n = val_at(-1, out.spec.sizes)
    use_scalar = out.spec.storage == "buffer" and (k % 4 != 0 or n % 4 != 0)
    base = stem if use_scalar else f"{stem}_vec"
    tile_m = pick_matmul_tile_m(out)
    tile = "_tile_row_1" if tile_m <= 1 else "_tile_row_2" if tile_m <= 2 else ""
    return f"{base}{'_bias' if has_bias else ''}{tile}"


def tiled_global_wg_size(out: Tensor) -> tuple[int, int, int]:
    """``pick_linear_global_wg_size`` / ``pick_matmul_tiled_global_wg_size``: ``(N4, ceil(M/tile_m), B)``."""
    sizes = out.spec.sizes
    b = val_at(-3, sizes) if len(sizes) >= 3 else 1
    return (div_up(val_at(-1, sizes), 4), div_up(val_at(-2, sizes), pick_matmul_tile_m(out)), b)


def is_coopmat_eligible(graph: ComputeGraph, out: Tensor, m: int, n: int, k: int) -> bool:
    """``is_coopmat_eligible`` (GemmCoopmat.h): 2-D buffer output, coopmat device, whole tiles."""
    route = graph.route
    if len(out.spec.sizes) > 2:
        return False
    return (route.cooperative_matrix and route.subgroup_size == 64 and not route.integrated
            and out.spec.storage == "buffer" and m % COOPMAT_TILE[0] == 0 and n % COOPMAT_TILE[1] == 0
            and k % COOPMAT_TILE[2] == 0)


def coopmat_not_ported(node: str) -> None:
    """The coopmat branch: ``GemmCoopmat.cpp``'s nodes are not re-hosted (see the module docstring)."""
    raise NotImplementedError(f"{node} (GemmCoopmat.cpp) is not ported to vkdiff; the routing profile declares "
                              f"cooperative matrix, which naga cannot load shaders for: run with --route native")


def prepack_fp_linear_weight(graph: ComputeGraph, weight: TensorRef, is_transposed: bool, b: int,
                             force_buffer: bool = False) -> Tensor:
    """``prepack_fp_linear_weight``: ``[N, K]`` (transposed) or ``[K, N]`` → width-packed ``[B*K4, N4*16]``."""
    data = np.asarray(weight.data)
    n, k = (data.shape[-2], data.shape[-1]) if is_transposed else (data.shape[-1], data.shape[-2])
    k4, n4 = div_up(k, 4), div_up(n, 4)
    height, width = b * k4, n4 * 16
    storage = "buffer"
    if not force_buffer:
        limit = graph.device.limits["max-texture-dimension-2d"]
        storage = "buffer" if width // 4 > limit or height > limit else "texture2d"
    packed = graph.add_tensor((height, width), data.dtype.name, storage, "width", label="packed_fp_weight")
    staging = staging_dtype(graph, data.dtype.name)
    src = staging_buffer(graph, data.astype(staging), "staging_fp_weight")
    name = f"pack_fp_linear_weight_{storage}_{SUFFIX[packed.spec.dtype]}_{SUFFIX[staging]}"
    global_wg = (n4, k4, b)
    graph.dispatch(name, global_wg=global_wg, local_wg=create_local_wg_size(global_wg), resources=[packed, src],
                   immediates=np.array([n, k, b, int(is_transposed)], np.int32).tobytes(), prepack=True)
    return packed


def linear_out_sizes(x: Tensor, n: int) -> tuple[int, ...]:
    """``resize_linear_node``'s sizes: ``[B, M, N]`` (B = the input's dim 0) from 3 dims up, else ``[M, N]``."""
    sizes = x.spec.sizes
    m = sizes[-2]
    return (sizes[0], m, n) if len(sizes) >= 3 else (m, n)


def add_linear_tiled_node(graph: ComputeGraph, x: Tensor, packed_weight: Tensor, packed_bias: Tensor | None,
                          has_bias: bool, out: Tensor, weight_b: int = 1, alpha: float = 1.0, beta: float = 1.0,
                          route: str | None = None) -> None:
    """``add_linear_tiled_node``."""
    if x.spec.info.packed_dim != 0 or out.spec.info.packed_dim != 0:
        raise EtVkRefusal(f"linear: input ({x.spec.layout}) and output ({out.spec.layout}) must be width packed")
    orig_n = out.spec.sizes[-1]

    def base() -> str:
        return tiled_kernel_base("linear", out, val_at(-1, x.spec.sizes), has_bias)

    def shader() -> str:
        """``pick_linear_shader``."""
        return f"{base()}_{out.spec.storage}_{packed_weight.spec.storage}_{SUFFIX[out.spec.dtype]}"

    check_route("route", route, base())
    reads = [x, packed_weight] + ([packed_bias] if has_bias else [])
    ubos = [graph.sizes_ubo(x), graph.sizes_ubo(out)] + ([graph.sizes_ubo(packed_bias)] if has_bias else [])
    pcs = np.array([weight_b], np.int32).tobytes()
    if has_bias:
        pcs += np.array([alpha, beta], np.float32).tobytes()
    graph.dispatch(shader, global_wg=lambda: tiled_global_wg_size(out),
                   local_wg=lambda: pick_hw_square_wg_size(tiled_global_wg_size(out)),
                   resources=[out, *reads, *ubos], immediates=pcs,
                   resize=lambda: graph.virtual_resize(out, linear_out_sizes(x, orig_n)))


def resize_linear_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    """The output the graph allocates: ``[..., M, N]`` in the input's dtype (``resize_linear_node`` for 2-3 dims)."""
    x, w = np.asarray(args["input"]), np.asarray(args["weight"])
    return (*x.shape[:-1], w.shape[0]), x.dtype


@register_op(OP, output=resize_linear_output, constants=("weight", "bias"), ports=PORTS + (MATMUL_PORT,))
def linear_packed_weight(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor, route: str | None = None,
                         weight_storage: str | None = None) -> None:
    """``linear_packed_weight``: ``aten.linear(input, weight, bias)`` with a constant ``[N, K]`` weight.

    Args:
        graph (ComputeGraph): the graph the nodes join.
        args (Mapping[str, Any]): ``input`` (Tensor), ``weight`` (TensorRef), ``bias`` (TensorRef or None).
        out (Tensor): the output.
        route (str | None): the kernel base the case expects (checked, never forced).
        weight_storage (str | None): the packed weight's storage the case expects (checked).

    Example::

        linear_packed_weight(graph, {"input": x, "weight": TensorRef(id=1, data=w), "bias": None}, out)
    """
    x, weight, bias = args["input"], args["weight"], args.get("bias")
    has_bias = bias is not None
    sizes = x.spec.sizes
    m, k, n = (sizes[-2] if len(sizes) >= 2 else 1), sizes[-1], out.spec.sizes[-1]
    use_coopmat = is_coopmat_eligible(graph, out, m, n, k)
    packed = prepack_fp_linear_weight(graph, weight, is_transposed=True, b=1, force_buffer=use_coopmat)
    check_route("weight_storage", weight_storage, packed.spec.storage)
    packed_bias = prepack_standard(graph, bias, out.spec.storage, "width") if has_bias else None
    if use_coopmat:
        coopmat_not_ported("add_linear_coopmat_node")
    add_linear_tiled_node(graph, x, packed, packed_bias, has_bias, out, route=route)
