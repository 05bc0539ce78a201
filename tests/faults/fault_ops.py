"""Ops of the project's fault shaders (``fault_tree/``): one that never finishes, one that differs on a repeat,
one that loses its device, one that kills its process. Registered only where a test asks (``register``), never in vkdiff's catalogue."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from vkdiff.cases.kernels import SUITES, KernelCase, Suite
from vkdiff.device.shaders import build
from vkdiff.device.runtime import resources
from vkdiff.device.graph import ComputeGraph, TensorSpec
from vkdiff.device.launchers.registry import LAUNCHERS, Launcher
from vkdiff.reference.ops import OPS, ReferenceOp

FAULT_TREE = Path(__file__).parent / "fault_tree"
SPIN, TICKET, LOSE = "vkdiff_test.spin.default", "vkdiff_test.ticket.default", "vkdiff_test.lose_device.default"
ABORT = "vkdiff_test.abort.default"
OVERRUN = "vkdiff_test.overrun.default"
OVERRUN_FAR = "vkdiff_test.overrun_far.default"
ABORT_CODE = 134
N = 67


def make_tree(root: Path, base: Path) -> Path:
    """``base``'s ET-VK shaders (staging and all, linked) plus the fault shaders, as an ExecuTorch-shaped tree."""
    glsl = root / build.GLSL_SUBDIR
    glsl.mkdir(parents=True, exist_ok=True)
    for path in (base / build.GLSL_SUBDIR).iterdir():
        (glsl / path.name).symlink_to(path)
    codegen = Path("backends/vulkan/runtime/gen_vulkan_spv.py")
    if (base / codegen).is_file():
        (root / codegen).symlink_to(base / codegen)
    for path in FAULT_TREE.iterdir():
        shutil.copy(path, glsl / path.name)
    return root


def case(op: str) -> KernelCase:
    return KernelCase(op=op, name=op.split(".")[1], shape=(("N", N),), dtype="fp32", storage="buffer")


def _args(case: KernelCase, rng: np.random.Generator) -> dict[str, Any]:
    return {"self": rng.standard_normal(case.size("N")).astype(np.float32)}


def _output(args: Mapping[str, Any], dtype: Any = None) -> tuple[tuple[int, ...], Any]:
    return np.shape(args["self"]), np.float32


def _zeros(graph: ComputeGraph, label: str):
    tensor = resources.allocate(graph.device, TensorSpec((4,), "int32", "buffer", "width"), label)
    graph.device.queue.write_buffer(tensor.handle, 0, np.zeros(4, np.int32).tobytes())
    return tensor


def _spin(graph: ComputeGraph, args: Mapping[str, Any], out) -> None:
    groups = graph.device.limits["max-compute-workgroups-per-dimension"]
    graph.dispatch("vk_spin", global_wg=(64 * groups, groups, 1), local_wg=(64, 1, 1),
                   resources=[out, args["self"], _zeros(graph, "flag"), graph.sizes_ubo(out)])


def _ticket(graph: ComputeGraph, args: Mapping[str, Any], out) -> None:
    """The counter is made once per device and never cleared."""
    ctx = graph.ctx
    if not hasattr(ctx, "ticket_counter"):
        ctx.ticket_counter = _zeros(graph, "counter")
    graph.dispatch("vk_ticket", global_wg=(N, 1, 1), local_wg=(64, 1, 1),
                   resources=[out, args["self"], ctx.ticket_counter, graph.sizes_ubo(out)])


def _overrun(graph: ComputeGraph, args: Mapping[str, Any], out, past: int = 2) -> None:
    graph.dispatch("vk_overrun", global_wg=(N, 1, 1), local_wg=(64, 1, 1), spec={3: past},
                   resources=[out, args["self"], graph.sizes_ubo(out)])


def _lose(graph: ComputeGraph, args: Mapping[str, Any], out) -> None:
    graph.device.destroy()
    _ticket(graph, args, out)


def _abort(graph: ComputeGraph, args: Mapping[str, Any], out) -> None:
    """A driver that takes the process down with it."""
    os._exit(ABORT_CODE)


def register() -> None:
    """Add the fault ops' suites, references and launchers (a device worker's ``setup``)."""
    for op, fn, ref in ((SPIN, _spin, lambda self: self), (TICKET, _ticket, lambda self: 2.0 * self),
                        (LOSE, _lose, lambda self: 2.0 * self), (ABORT, _abort, lambda self: self),
                        (OVERRUN, _overrun, lambda self: 2.0 * self),
                        (OVERRUN_FAR, lambda g, a, o: _overrun(g, a, o, 100000), lambda self: 2.0 * self)):
        SUITES[op] = Suite(op=op, cases=lambda op=op: [case(op)], make_args=_args)
        OPS[op] = ReferenceOp(name=op, fn=ref, accumulation=None)
        LAUNCHERS[op] = [Launcher(op=op, add_node=fn, output=_output, constants=frozenset(), ports=(),
                                  registered_in="tests/faults/fault_ops.py")]


def unregister() -> None:
    for op in (SPIN, TICKET, LOSE, ABORT, OVERRUN, OVERRUN_FAR):
        SUITES.pop(op, None)
        OPS.pop(op, None)
        LAUNCHERS.pop(op, None)
