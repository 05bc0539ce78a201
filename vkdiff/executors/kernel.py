"""Running a kernel case: its one-op graph launched at its own sizes, again at each smaller size, and repeated.

``run_kernel`` executes everything a verdict on the case needs and decides nothing: the
first launch with its references (``Checked``), each smaller run on the same graph
(``Smaller``, as ET-VK's backend resizes a built graph), and each repeat on a fresh
graph with the elements whose bits differ from the first. An exception ends the stage it
was raised in and is kept with the run (``vkdiff.verdicts.kernels`` judges it).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from vkdiff.cases.kernels import KernelCase, below_bound
from vkdiff.device.runtime.context import DeviceContext
from vkdiff.device.graph import Launch
from vkdiff.executors.bits import differing_elements, outputs
from vkdiff.executors.op_graph import OpGraph, ResizeError
from vkdiff.executors.references import (Envelope, Models, Prepared, compute_dtype, contractions, emulation, envelope,
                                         prepare_case, prepared_for, smaller_args)


@dataclasses.dataclass(kw_only=True)
class Checked:
    """A launch and the references it is judged against."""

    launch: Launch
    prepared: Prepared
    """The arguments it ran on, their reference output and tolerance."""
    emulation: Models | None
    """The reference with the launched variant's declared rounding (None: none declared, or no emulation)."""
    contractions: dict[str, np.ndarray]
    """Outputs a correct device may give instead of an integer reference (``reference.contracted``)."""
    envelope: Envelope | None = None
    """What any conformant device may give for the variant's declared arithmetic (``vkdiff.reference.spec``)."""
    compute: str = "float32"
    """The dtype the variant computes in."""


def checked(op: str, launched: Launch, prepared: Prepared, *, emulate: bool = True) -> Checked:
    """``launched`` with its references (``emulate=False``: judged by the tolerance policy alone)."""
    return Checked(launch=launched, prepared=prepared,
                   emulation=emulation(op, prepared, launched.arithmetic) if emulate else None,
                   contractions=contractions(op, prepared, launched.output),
                   envelope=envelope(op, prepared, launched.variant, launched.output,
                                     relaxed=launched.variant in launched.relaxed),
                   compute=compute_dtype(op, launched.variant))


@dataclasses.dataclass(kw_only=True)
class Smaller:
    """One run below the bound, on the graph built for the case."""

    case: KernelCase
    """The smaller case (its sizes and seed)."""
    output_sizes: list[tuple[int, ...]]
    """The outputs' sizes as the op's resize functions left them (empty when resizing threw)."""
    wanted: list[tuple[int, ...]]
    """The reference's output sizes."""
    run: Checked | None = None
    """The launch, when the sizes followed the reference's (else it is not launched)."""
    resize_error: Exception | None = None
    """What the op's own resize function threw (ET-VK's host code at execute)."""


@dataclasses.dataclass(kw_only=True)
class Repeat:
    """A repeat of the case on a fresh graph."""

    run: int
    """Which run (2 for the first repeat)."""
    differing: int = 0
    """Output elements whose bits differ from the first run's."""
    total: int = 0
    error: Exception | None = None


@dataclasses.dataclass(kw_only=True)
class KernelRun:
    """Everything a kernel case ran on one device."""

    case: KernelCase
    repeat: int
    """Runs asked for."""
    first: Checked | None = None
    """The launch at the case's own sizes (None when preparing, building or launching raised: ``error``)."""
    error: Exception | None = None
    smaller: list[Smaller] = dataclasses.field(default_factory=list)
    smaller_error: Exception | None = None
    """What stopped the smaller runs other than the op's own resize (a graph that cannot take the sizes, a launch,
    a reference)."""
    repeats: list[Repeat] = dataclasses.field(default_factory=list)
    """Repeats up to the first that differs or raises."""


def build(ctx: DeviceContext, case: KernelCase, prepared: Prepared) -> OpGraph:
    """The case's one-op graph, built for its own sizes (the upper bound of its smaller runs)."""
    return OpGraph(ctx, case.op, prepared.args, storage=case.storage, layout=case.layout, dtype=case.np_dtype,
                   **dict(case.options))


def launch(ctx: DeviceContext, case: KernelCase, prepared: Prepared) -> Launch:
    """Run the case's op through its registered launcher on ``ctx``."""
    return build(ctx, case, prepared).launch()


def run_kernel(ctx: DeviceContext, case: KernelCase, *, session_seed: int = 0, repeat: int = 1,
               prepared: Prepared | None = None) -> KernelRun:
    """Run ``case`` on ``ctx``: at its sizes, below them, and ``repeat - 1`` more times (never raises).

    Args:
        prepared (Prepared | None): the case's arguments and reference, when already computed.
    """
    run = KernelRun(case=case, repeat=repeat)
    try:
        prepared = prepared or prepare_case(case, session_seed)
        graph = build(ctx, case, prepared)
        run.first = checked(case.op, graph.launch(), prepared)
    except Exception as exc:  # the verdict maps it to a status
        run.error = exc
        return run
    try:
        run_smaller(run, graph, prepared, session_seed)
    except Exception as exc:  # the verdict maps it to a status
        run.smaller_error = exc
    run.repeats = repeats(ctx, case, prepared, run.first.launch.output, repeat)
    return run


def run_smaller(run: KernelRun, graph: OpGraph, prepared: Prepared, session_seed: int) -> None:
    """Run the graph built for the case again at each smaller size (``below_bound``), resized as ET-VK's backend
    does: each draws its own graph inputs and keeps the built constants and scalars (references computed ahead
    where the reference thread has them, ``prepare_smaller``)."""
    case = run.case
    constants = graph.launcher.constants
    ahead = prepared.smaller if prepared.smaller_constants == constants else {}
    for small in below_bound(case):
        expected = ahead.get(small.data_id) or prepared_for(small, smaller_args(small, prepared, constants,
                                                                                 session_seed))
        wanted = [tuple(np.shape(e)) for e in outputs(expected.expected)]
        try:
            graph.resize(expected.args)
        except ResizeError:
            raise
        except Exception as exc:  # the op's own resize function threw
            run.smaller.append(Smaller(case=small, output_sizes=[], wanted=wanted, resize_error=exc))
            return
        entry = Smaller(case=small, output_sizes=graph.output_sizes, wanted=wanted)
        if entry.output_sizes == wanted:
            entry.run = checked(case.op, graph.launch(), expected)
        run.smaller.append(entry)


def repeats(ctx: DeviceContext, case: KernelCase, prepared: Prepared, first: Any, repeat: int) -> list[Repeat]:
    """Runs 2..``repeat`` of the case on fresh graphs, up to the first whose output bits differ or that raises."""
    done = []
    for index in range(2, repeat + 1):
        try:
            differing = differing_elements(first, launch(ctx, case, prepared).output)
        except Exception as exc:  # the verdict maps it to a status
            done.append(Repeat(run=index, error=exc))
            break
        done.append(Repeat(run=index, differing=differing, total=sum(np.size(o) for o in outputs(first))))
        if differing:
            break
    return done
