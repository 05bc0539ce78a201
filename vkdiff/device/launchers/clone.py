"""Launcher for ``aten.clone.default``: ET-VK picks its shader by the storages and layouts of input and output.

Ported from ``runtime/graph/ops/impl/Clone.cpp`` (``clone``, ``add_clone_node``, ``add_image_to_buffer_node``,
``add_buffer_to_image_node``, ``clone_image_to_buffer_global_wg_size``, ``resize_clone_node``):

* texture → texture, same hashed layout: ``clone_<out dtype>``, bindings out, in, push constant
  ``logical_limits_pc_of(out)``, no spec constants;
* texture → texture, other layout: ``add_view_copy_node`` (``view_texture_<dtype>``, see
  ``launchers/view.py``);
* texture → buffer: ``clone_image_to_buffer_<image dtype>_<buffer dtype>``, bindings buffer, image,
  ``texture_meta_ubo(image)``, ``buffer_meta_ubo(buffer)``; spec constants (image, buffer) hashed layouts;
  global size ``create_global_wg_size(image)`` (its logical limits);
* buffer → texture: ``clone_buffer_to_image_<image dtype>_<buffer dtype>``, bindings image, buffer and the same
  UBOs; spec constants (image hashed layout, ``transpose_hw = 0``, buffer hashed layout); default global size;
* buffer → buffer: ``add_view_copy_node`` (``view_buffer_<dtype>``);
* every route is a ``DynamicDispatchNode`` with the default local size; resize (``resize_clone_node``):
  the output takes the input's sizes when the ranks agree, else keeps its own;
* int8x4 → int8x4 (checked first): ``add_q8ta_clone_node`` of ``Q8taClone.cpp`` (``launchers/utils/q8ta_clone.py``),
  which has no resize function.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.staging import SUFFIX
from vkdiff.device.graph.vtensor import INT8X4, TensorSpec
from vkdiff.device.launchers.utils.common import default_global_wg
from vkdiff.device.launchers.permute import TREE
from vkdiff.device.launchers.utils.q8ta_clone import PORT as Q8TA_CLONE_PORT, add_q8ta_clone_node
from vkdiff.device.launchers.registry import Port, register_op
from vkdiff.device.launchers.view import DIM_ORDER_COPY_PORTS as VIEW_PORTS, add_view_copy_node
from vkdiff.device.runtime.resources import Tensor

OP = "aten.clone.default"
PORTS = (Port(file="runtime/graph/ops/impl/Clone.cpp",
              functions=("clone", "add_clone_node", "add_image_to_buffer_node", "add_buffer_to_image_node",
                         "clone_image_to_buffer_global_wg_size", "resize_clone_node"),
              sha256="39396a0096cf2f77ab39a5faf791dfec48026ed9ef3b851dad1fb7c03bf800dd", tree=TREE),
         Q8TA_CLONE_PORT, *VIEW_PORTS)


def resize_clone_node(graph: ComputeGraph, out: Tensor, x: Tensor) -> None:
    """``resize_clone_node``: the input's sizes when the ranks agree (squeeze through clone keeps its own)."""
    if len(out.spec.sizes) == len(x.spec.sizes):
        graph.virtual_resize(out, x.spec.sizes)


def add_clone_node(graph: ComputeGraph, x: Tensor, out: Tensor) -> None:
    """``add_clone_node``: ``clone_<dtype>``, texel for texel over the output's logical limits."""
    name = f"clone_{SUFFIX[out.spec.dtype]}"
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(out), resources=[out, x],
                   immediates=[graph.pc(out, "logical_limits")], resize=lambda: resize_clone_node(graph, out, x))


def add_image_to_buffer_node(graph: ComputeGraph, image: Tensor, buffer: Tensor) -> None:
    """``add_image_to_buffer_node``: one invocation per texel of the image (``create_global_wg_size(image)``)."""
    name = f"clone_image_to_buffer_{SUFFIX[image.spec.dtype]}_{SUFFIX[buffer.spec.dtype]}"
    graph.dispatch(lambda: name, global_wg=lambda: tuple(image.spec.logical_limits),
                   resources=[buffer, image, graph.meta_ubo(image), graph.meta_ubo(buffer)],
                   spec={3: image.spec.hashed_layout, 4: buffer.spec.hashed_layout},
                   resize=lambda: resize_clone_node(graph, buffer, image))


def add_buffer_to_image_node(graph: ComputeGraph, buffer: Tensor, image: Tensor) -> None:
    """``add_buffer_to_image_node``: the image's default global size, ``transpose_hw = 0``."""
    name = f"clone_buffer_to_image_{SUFFIX[image.spec.dtype]}_{SUFFIX[buffer.spec.dtype]}"
    graph.dispatch(lambda: name, global_wg=lambda: default_global_wg(image),
                   resources=[image, buffer, graph.meta_ubo(image), graph.meta_ubo(buffer)],
                   spec={3: image.spec.hashed_layout, 4: 0, 5: buffer.spec.hashed_layout},
                   resize=lambda: resize_clone_node(graph, image, buffer))


def clone_route(src: TensorSpec, dst: TensorSpec) -> str:
    """``clone``'s choice by the two placements: ``q8ta_clone`` (both int8x4), ``clone``, ``view_texture``,
    ``image_to_buffer``, ``buffer_to_image`` or ``view_buffer``."""
    if src.dtype == INT8X4 and dst.dtype == INT8X4:
        return "q8ta_clone"
    if src.storage == "texture3d" and dst.storage == "texture3d":
        return "clone" if src.hashed_layout == dst.hashed_layout else "view_texture"
    if src.storage == "texture3d" and dst.storage == "buffer":
        return "image_to_buffer"
    if src.storage == "buffer" and dst.storage == "texture3d":
        return "buffer_to_image"
    return "view_buffer"


def add_clone(graph: ComputeGraph, x: Tensor, out: Tensor) -> None:
    """``clone``: the node of the route ``clone_route`` picks."""
    route = clone_route(x.spec, out.spec)
    if route == "q8ta_clone":
        return add_q8ta_clone_node(graph, x, out)
    if route == "clone":
        return add_clone_node(graph, x, out)
    if route == "image_to_buffer":
        return add_image_to_buffer_node(graph, x, out)
    if route == "buffer_to_image":
        return add_buffer_to_image_node(graph, x, out)
    add_view_copy_node(graph, x, out, lambda: resize_clone_node(graph, out, x))


def clone_output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    x = np.asarray(args["self"])
    return x.shape, x.dtype


@register_op(OP, output=clone_output, constants=(), ports=PORTS)
def clone(graph: ComputeGraph, args: Mapping[str, Any], out: Tensor) -> None:
    """``clone``: ``out = self.clone()``, whatever the two tensors' storages and layouts.

    Args:
        graph (ComputeGraph): where the node goes.
        args (Mapping): ``self`` (Tensor) and the ignored ``memory_format``, by schema name.
        out (Tensor): the output; its storage and layout may differ from ``self``'s.

    Example::

        clone(graph, {"self": x_texture, "memory_format": None}, out_buffer)
    """
    add_clone(graph, args["self"], out)

