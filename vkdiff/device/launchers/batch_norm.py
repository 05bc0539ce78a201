"""Launcher for ``aten._native_batch_norm_legit_no_training.default`` through ``batchnorm_<dtype>``.

Ported from ``runtime/graph/ops/impl/BatchNorm.cpp`` (``native_batch_norm`` → ``add_native_batch_norm_node``):

* 4-D input and output only; weight, bias, running mean and running var must be constants of ``C``
  elements (``check_and_prepack_arg``), prepacked width-packed in the output's storage;
* only the first output is written: the other two are zero-size dummies (``placements``: buffers, as a
  zero-size texture has no image);
* variant ``batchnorm_<out dtype>`` (texture3d only; the partitioner asks for channels-packed textures);
* bindings out, in, weight, bias, mean, var, UBOs ``logical_limits`` of out, ``epsilon`` (float) and
  ``num_texel_per_batch = ceil(C / 4)`` (int), both fixed at build;
* default global and local picks on out; resize: out takes in's sizes.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph, TensorRef
from vkdiff.device.graph.compute import create_local_wg_size
from vkdiff.device.graph.staging import prepack_standard
from vkdiff.device.launchers.utils.common import default_global_wg, div_up, dtype_suffix
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

PORTS = (Port(file="runtime/graph/ops/impl/BatchNorm.cpp",
              functions=("resize_batch_norm_node", "check_and_prepack_arg", "add_native_batch_norm_node",
                         "native_batch_norm"),
              sha256="6b93d75d9623862f7722d80faec9736effcf3b1113bd8a0e45a140656fe880ed",
              tree="executorch main cff6f4dd32"),)


def batch_norm_output(args: Mapping[str, Any], dtype: Any = None) -> list[tuple[tuple[int, ...], Any]]:
    """``(out, dummy, dummy)``: in's sizes, then two zero-size tensors."""
    x = np.asarray(args["input"])
    return [(x.shape, x.dtype), ((0,), x.dtype), ((0,), x.dtype)]


def check_and_prepack_arg(graph: ComputeGraph, ref: Any, storage: str, channels: int, name: str) -> Tensor:
    """``check_and_prepack_arg``: a constant of ``C`` elements, prepacked width-packed."""
    if not isinstance(ref, TensorRef):
        raise EtVkRefusal(f"native_batch_norm requires {name} to be a constant tensorref")
    if np.shape(ref.data)[0] != channels:
        raise EtVkRefusal(f"native_batch_norm: {name} has {np.shape(ref.data)[0]} elements, the input {channels} "
                         f"channels (VK_CHECK_COND)")
    return prepack_standard(graph, ref, storage, "width")


@register_op("aten._native_batch_norm_legit_no_training.default", output=batch_norm_output,
             constants=("weight", "bias", "running_mean", "running_var"), ports=PORTS,
             placements={"out1": "buffer", "out2": "buffer"})
def native_batch_norm(graph: ComputeGraph, args: Mapping[str, Any], outs: tuple[Tensor, Tensor, Tensor],
                      route: str | None = None) -> None:
    """``native_batch_norm`` (momentum unused).

    Args:
        graph (ComputeGraph): the graph the node joins.
        args (Mapping[str, Any]): ``input`` (Tensor, 4-D), ``weight``, ``bias``, ``running_mean``,
            ``running_var`` (TensorRefs ``[C]``), ``momentum``, ``eps``.
        outs (tuple[Tensor, Tensor, Tensor]): out and the two dummies.
        route (str | None): the route a kernel case expects (only ``texture``).
    """
    x, out = args["input"], outs[0]
    if len(x.spec.sizes) != 4 or len(out.spec.sizes) != 4:
        raise ValueError("BatchNorm only support 4d tensor")
    if route not in (None, "texture"):
        raise ValueError(f"native_batch_norm: BatchNorm.cpp has one route (texture), the case expects {route}")
    channels = int(x.spec.sizes[1])
    storage = out.spec.storage
    params = [check_and_prepack_arg(graph, args[name], storage, channels, name)
              for name in ("weight", "bias", "running_mean", "running_var")]
    if int(out.spec.sizes[1]) != channels:
        raise EtVkRefusal("out channel must match in channel")

    def resize_batch_norm_node() -> None:
        graph.virtual_resize(out, x.spec.sizes)

    graph.dispatch(f"batchnorm_{dtype_suffix(out.spec.dtype)}", global_wg=lambda: default_global_wg(out),
                   local_wg=lambda: create_local_wg_size(default_global_wg(out)),
                   resources=[out, x, *params, graph.logical_limits_ubo(out),
                              graph.uniform(np.array([float(args["eps"])], np.float32).tobytes(), "epsilon"),
                              graph.uniform(np.array([div_up(channels, 4)], np.int32).tobytes(), "num_texel_per_batch")],
                   resize=resize_batch_norm_node)
