"""Launcher for ``et_vk.adamw_step.default``: one AdamW step, in place.

Ported from ``runtime/graph/ops/impl/AdamwStep.cpp`` (``adamw_step``, ``add_adamw_step_node``,
``check_adamw_step_args``):

* variant ``adamw_step_<param storage>_<param dtype>``; the yaml builds ``adamw_step_buffer_float`` only;
* checks: every tensor float32, ``m``, ``v`` and ``grad`` of ``param``'s numel, both bias corrections nonzero
  once cast to float;
* bindings: ``param``, ``m``, ``v`` (read-write), ``grad``; no UBOs, no spec constants;
* push constants (32 bytes): ``numel_pc_of(param)`` (read at encode), then ``lr, beta1, beta2, eps`` and
  ``weight_decay, bias_correction1, bias_correction2`` as float32, fixed at build;
* global size ``default_pick_global_wg_size`` (``param``'s numel on a buffer), local ``create_local_wg_size``;
  no resize function (the numel push constant and the global size follow ``param``).

The outputs are ``param``, ``m`` and ``v`` themselves (the schema's ``Tensor(a!)`` returns): the node writes
them and never touches the op's own output values.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.adamw_step.default"
PORT = Port(file="runtime/graph/ops/impl/AdamwStep.cpp",
            functions=("adamw_step", "add_adamw_step_node", "check_adamw_step_args"),
            sha256="711691be88268241f294b3758170282ae9e31edff5e5cd06e3af845e62f0e134",
            tree="executorch main cff6f4dd32")
STATE = ("param", "m", "v")
"""The arguments the op updates in place, in output order."""


def output_of(args: Mapping[str, Any], dtype: Any = None) -> list[tuple[tuple[int, ...], Any]]:
    """``param``, ``m`` and ``v`` as they came in (the op returns its updated inputs)."""
    return [(np.shape(args[name]), np.asarray(args[name]).dtype) for name in STATE]


def check_adamw_step_args(param: Tensor, m: Tensor, v: Tensor, grad: Tensor) -> None:
    """``check_adamw_step_args``: float32 tensors of one numel."""
    for name, tensor in zip(("param", "m", "v", "grad"), (param, m, v, grad)):
        if tensor.spec.dtype != "float32":
            raise EtVkRefusal(f"adamw_step: VK_CHECK_COND(graph.dtype_of({name}) == vkapi::kFloat) failed "
                              f"({tensor.spec.dtype})")
    for name, tensor in zip(("m", "v", "grad"), (m, v, grad)):
        if tensor.spec.numel != param.spec.numel:
            raise EtVkRefusal(f"adamw_step: VK_CHECK_COND(graph.numel_of({name}) == numel) failed "
                              f"({tensor.spec.numel} != {param.spec.numel})")


@register_op(OP, output=output_of, constants=(), ports=(PORT,), mutates=STATE)
def adamw_step(graph: ComputeGraph, args: Mapping[str, Any], out: Any) -> None:
    """``add_adamw_step_node``: ``param``, ``m``, ``v`` updated in place from ``grad`` and the scalars.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``param``, ``m``, ``v``, ``grad`` (tensors), ``lr``, ``beta1``, ``beta2``, ``eps``,
            ``weight_decay``, ``bias_correction1``, ``bias_correction2`` (floats).
        out: the op's output values, unused (the C++ writes its inputs).

    Raises:
        EtVkRefusal: a check of the C++ fails (dtype, numel, a bias correction that is 0 as a float).

    Example::

        adamw_step(graph, {"param": p, "m": m, "v": v, "grad": g, "lr": 1e-3, "beta1": 0.9, "beta2": 0.999,
                           "eps": 1e-8, "weight_decay": 0.01, "bias_correction1": 0.1,
                           "bias_correction2": 0.001}, out)
    """
    param, m, v, grad = (args[name] for name in ("param", "m", "v", "grad"))
    check_adamw_step_args(param, m, v, grad)
    bc1, bc2 = np.float32(args["bias_correction1"]), np.float32(args["bias_correction2"])
    for name, value in (("bc1", bc1), ("bc2", bc2)):
        if value == 0:
            raise EtVkRefusal(f"adamw_step: VK_CHECK_COND({name} != 0.0f) failed")
    pc0 = np.array([args[name] for name in ("lr", "beta1", "beta2", "eps")], np.float32).tobytes()
    pc1 = np.array([args["weight_decay"], bc1, bc2], np.float32).tobytes()
    graph.dispatch(f"adamw_step_{param.spec.storage}_{SUFFIX[param.spec.dtype]}",
                   global_wg=lambda: default_global_wg(param), resources=[param, m, v, grad],
                   immediates=[graph.pc(param, "numel"), pc0, pc1])
