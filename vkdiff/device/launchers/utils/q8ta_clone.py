"""``add_q8ta_clone_node``: an int8x4 buffer copied into another packed-int8 layout, block by block.

Ported from ``runtime/graph/ops/impl/Q8taClone.cpp`` (``add_q8ta_clone_node``), with ``BlockConfig`` from
``Common.cpp`` (``launchers/utils/block_config.py``). No op registers this file: ``Clone.cpp``'s ``clone``
(``aten.clone.default``, ``launchers/clone.py``) calls it when both tensors are int8x4 (the layout pass inserts
such clones, e.g. ``4h4w`` → ``4c1w`` before a residual ``q8ta_add``).

* checks: both tensors int8x4 (``VK_CHECK_COND``);
* variant ``q8ta_clone``; bindings out, in, ``buffer_meta_ubo`` of out and in; no push constants;
* block configs ``outp = create_block_config_from_io_packed_dims(out, in)``,
  ``inp = create_block_config_from_other(in, outp)`` (the shader transposes each 4×4 block when they differ);
  spec constants from id 3: in layout, out layout, inp, outp;
* global size ``pick_linear_global_wg_with_block_config`` over the output's sizes with ``inp``, local
  ``pick_square_local_wg_with_block_config``;
* no resize function: ``DynamicDispatchNode`` re-picks its sizes, but the output keeps the sizes it was built
  with when the input shrinks.
"""

from __future__ import annotations

from vkdiff.device.boundary import EtVkRefusal
from vkdiff.device.graph import ComputeGraph
from vkdiff.device.graph.vtensor import INT8X4
from vkdiff.device.launchers.utils import block_config as bc
from vkdiff.device.shaders.ports import Port
from vkdiff.device.runtime.resources import Tensor

PORT = Port(file="runtime/graph/ops/impl/Q8taClone.cpp", functions=("add_q8ta_clone_node",),
            sha256="54574293dfc87e4b5d59878d97055ec7bf15b15597bf2efcc1d1d7c37b1f0d76",
            tree="executorch main cff6f4dd32")


def add_q8ta_clone_node(graph: ComputeGraph, x: Tensor, out: Tensor) -> None:
    """``add_q8ta_clone_node``: ``out = x`` between int8x4 buffers of any packed-int8 layouts."""
    for tensor, role in ((x, "packed_int8_input"), (out, "packed_int8_output")):
        if tensor.spec.dtype != INT8X4:
            raise EtVkRefusal(f"VK_CHECK_COND(graph.dtype_of({role}) == vkapi::kInt8x4): {tensor.spec.dtype}")
    outp = bc.create_block_config_from_io_packed_dims(out.spec, x.spec)
    inp = bc.create_block_config_from_other(x.spec, outp)
    packed = inp.as_packed_int()

    def global_wg() -> tuple[int, int, int]:
        return bc.pick_linear_global_wg_with_block_config(out.spec.sizes, packed)

    graph.dispatch(lambda: "q8ta_clone", global_wg=global_wg,
                   local_wg=lambda: bc.pick_square_local_wg_with_block_config(global_wg(), packed),
                   resources=[out, x, graph.meta_ubo(out), graph.meta_ubo(x)],
                   spec={3: x.spec.hashed_layout, 4: out.spec.hashed_layout, 5: packed, 6: outp.as_packed_int()})
