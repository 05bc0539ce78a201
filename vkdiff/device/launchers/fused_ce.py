"""Launcher for ``et_vk.fused_ce.default``: cross-entropy loss and its logits gradient in two dispatches.

Ported from ``runtime/graph/ops/impl/FusedCe.cpp`` (``fused_ce``, ``fused_ce_global_wg_size``,
``fused_ce_local_wg_size``, ``fused_ce_sum_global_wg_size``, ``fused_ce_sum_local_wg_size``,
``resize_fused_ce_node``, ``resize_fused_ce_sum_node``):

* checks, in order: ``logits`` and ``dlogits`` on buffers; ``logits`` 2-D; ``dlogits`` of ``logits``' sizes;
  ``labels`` int32 and 1-D of one label per row; ``loss`` of one element; at most 65535 rows;
* a temporary ``loss_partial [R]`` (buffer, ``logits``' dtype) holds each row's loss;
* node 1 ``fused_ce_<dlogits storage>_<dtype>`` (the yaml builds ``fused_ce_buffer_float``): bindings
  ``dlogits``, ``loss_partial`` (write), ``logits``, ``labels``; params buffers ``int vocab``, ``int n_rows``,
  ``float n_valid``, fixed at build (``create_params_buffer``); one workgroup per row: global
  ``(1, numel(loss_partial), 1)``, local ``(64, 1, 1)``; resize: ``dlogits`` to ``logits``' sizes,
  ``loss_partial`` to ``[R]``;
* node 2 ``fused_ce_sum_<loss storage>_<dtype>`` (``fused_ce_sum_buffer_float``): bindings ``loss`` (write),
  ``loss_partial``; params buffer ``int n_rows`` fixed at build; global ``(1, 1, 1)``, local ``(64, 1, 1)``;
  resize: ``loss`` to rank 0.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.runtime.resources import Tensor

OP = "et_vk.fused_ce.default"
PORT = Port(file="runtime/graph/ops/impl/FusedCe.cpp",
            functions=("fused_ce", "fused_ce_global_wg_size", "fused_ce_local_wg_size", "fused_ce_sum_global_wg_size",
                       "fused_ce_sum_local_wg_size", "resize_fused_ce_node", "resize_fused_ce_sum_node"),
            sha256="c60a7814a57d4ba79014022749367dcb3a846937ee8400be0c021e4b92f961df",
            tree="executorch main cff6f4dd32")
MAX_ROWS = 65535
"""One workgroup per row: the Vulkan minimum of ``maxComputeWorkGroupCount`` in y."""


def output_of(args: Mapping[str, Any], dtype: Any = None) -> list[tuple[tuple[int, ...], Any]]:
    """``fused_ce_meta``: a rank-0 loss and ``dlogits`` of ``logits``' sizes, both in ``logits``' dtype."""
    logits = np.asarray(args["logits"])
    return [((), logits.dtype), (logits.shape, logits.dtype)]


def check_fused_ce(logits: Tensor, labels: Tensor, loss: Tensor, dlogits: Tensor) -> None:
    """The ``VK_CHECK_COND``s of ``fused_ce``, in their order, with their messages."""
    logit_sizes, label_sizes = tuple(logits.spec.sizes), tuple(labels.spec.sizes)
    checks = (
        (lambda: logits.spec.storage == "buffer" and dlogits.spec.storage == "buffer",
         "fused_ce: logits and dlogits must use buffer storage"),
        (lambda: len(logit_sizes) == 2, "fused_ce: logits must be 2D [n_rows, vocab]"),
        (lambda: tuple(dlogits.spec.sizes) == logit_sizes, "fused_ce: dlogits must match logits shape"),
        (lambda: labels.spec.dtype == "int32", "fused_ce: labels must be int32"),
        (lambda: len(label_sizes) == 1, "fused_ce: labels must be 1D [N]"),
        (lambda: label_sizes[0] == logit_sizes[0], "fused_ce: labels length must equal number of rows"),
        (lambda: loss.spec.numel == 1, "fused_ce: loss must be a scalar"),
        (lambda: logit_sizes[0] <= MAX_ROWS, "fused_ce: n_rows exceeds max workgroup count"),
    )
    for holds, message in checks:
        if not holds():
            raise EtVkRefusal(f"{message} (logits {list(logits.spec.sizes)} {logits.spec.storage}, labels "
                              f"{list(labels.spec.sizes)} {labels.spec.dtype})")


@register_op(OP, output=output_of, constants=(), ports=(PORT,))
def fused_ce(graph: ComputeGraph, args: Mapping[str, Any], out: tuple[Tensor, Tensor]) -> None:
    """``fused_ce``: per-row loss and ``dlogits`` (node 1), then the loss summed over rows (node 2).

    Args:
        graph (ComputeGraph): where the nodes go.
        args (Mapping): ``logits [R, V]``, ``labels`` int32 ``[R]`` (negative: row ignored), ``n_valid`` (float).
        out (tuple[Tensor, Tensor]): ``loss`` (rank 0) and ``dlogits [R, V]``.

    Raises:
        EtVkRefusal: a check of the C++ fails (not buffers, wrong ranks or dtypes, too many rows).

    Example::

        fused_ce(graph, {"logits": logits, "labels": labels, "n_valid": 3.0}, (loss, dlogits))
    """
    logits, labels = args["logits"], args["labels"]
    loss, dlogits = out
    check_fused_ce(logits, labels, loss, dlogits)
    n_rows, vocab = (int(s) for s in logits.spec.sizes)
    partial = graph.add_tensor((n_rows,), logits.spec.dtype, "buffer", "width", temporary=True, label="loss_partial")

    def resize() -> None:
        graph.virtual_resize(dlogits, logits.spec.sizes)
        graph.virtual_resize(partial, (logits.spec.sizes[0],))

    def int_param(value: int) -> Any:
        return graph.uniform(np.array([value], np.int32).tobytes(), "int")

    n_valid = graph.uniform(np.array([args["n_valid"]], np.float32).tobytes(), "float")
    graph.dispatch(f"fused_ce_{dlogits.spec.storage}_{SUFFIX[dlogits.spec.dtype]}",
                   global_wg=lambda: (1, partial.spec.numel, 1), local_wg=lambda: (64, 1, 1),
                   resources=[dlogits, partial, logits, labels, int_param(vocab), int_param(n_rows), n_valid],
                   resize=resize)
    graph.dispatch(f"fused_ce_sum_{loss.spec.storage}_{SUFFIX[loss.spec.dtype]}", global_wg=lambda: (1, 1, 1),
                   local_wg=lambda: (64, 1, 1), resources=[loss, partial, int_param(n_rows)],
                   resize=lambda: graph.virtual_resize(loss, ()))
