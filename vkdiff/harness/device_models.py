"""Programs through the house: a prepared program on one device under a routing profile, one ``device`` result.

``vkdiff.executors.program_runs`` runs every call of the method node by node (and with the
references), repeated and replayed whole as asked; ``vkdiff.verdicts.program_runs`` judges
what ran. Eager PyTorch's calls of a catalogue case are computed here once per case.

Catalogue model cases get here through their lowering (``prepare_model``); a user's
``.pte`` or module through ``vkdiff.subjects.programs``. Both are a ``PreparedProgram``.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vkdiff.datamodel import PreparedProgram, Result, Status, versions
from vkdiff.device.runtime.registrations import runtime_ops
from vkdiff.device.shaders.trees import origin_of
from vkdiff.executors.program_runs import run_program
from vkdiff.verdicts.program import PORT_STALE_FLAG
from vkdiff.verdicts.program_runs import judge_program
from vkdiff.verdicts.registrations import unloadable
from vkdiff.verdicts.host import no_delegate, not_lowered, unprepared

if TYPE_CHECKING:
    from vkdiff.cases.model_case import ModelCase

__all__ = ["PORT_STALE_FLAG", "check_on_device", "identity", "prepare_model", "prepare_or_status", "run_prepared"]

_EAGER_CACHE: dict[str, "EagerRun"] = {}


@dataclasses.dataclass(kw_only=True)
class EagerRun:
    """Eager PyTorch's calls of one case: one, or a prefill and its greedy decode steps."""

    inputs: list[tuple]
    """Each call's inputs (torch tensors)."""
    outputs: list[np.ndarray]
    """Each call's outputs, flattened in order (float64)."""
    tokens: list[int]
    """Each call's greedy token (argmax of the logits) for generation cases, else empty."""


def eager_run(case: ModelCase) -> EagerRun:
    """The quantized eager model's calls (memoised: devices share them); generation cases feed eager's tokens."""
    if case.id not in _EAGER_CACHE:
        import torch

        from vkdiff.harness.dynamic import below_bound_calls
        from vkdiff.harness.models import eager, flat_outputs
        from vkdiff.capture import quiet_libraries

        with quiet_libraries():
            model, inputs, _ = eager(case)
        calls, outputs, tokens = [inputs], [], []
        with torch.no_grad(), quiet_libraries():
            for step in range(1 + (case.decode_steps if case.decode else 0)):
                outputs.append(flat_outputs(model(*calls[step])))
                if case.decode is None:
                    break
                tokens.append(int(np.argmax(outputs[-1])))
                if step < case.decode_steps:
                    calls.append(case.decode(calls[step], tokens[-1]))
            more_calls = case.more_calls or (below_bound_calls(model, inputs, case.dynamic_shapes)
                                             if case.dynamic_shapes is not None and case.decode is None else ())
            for more in more_calls:
                calls.append(more)
                outputs.append(flat_outputs(model(*more)))
        _EAGER_CACHE.clear()
        _EAGER_CACHE[case.id] = EagerRun(inputs=calls, outputs=outputs, tokens=tokens)
    return _EAGER_CACHE[case.id]


def eager_output(case: ModelCase) -> tuple[np.ndarray, tuple]:
    """The first call's outputs (flattened) and inputs."""
    run = eager_run(case)
    return run.outputs[0], run.inputs[0]


def identity(case: ModelCase, repro: str = "") -> dict[str, Any]:
    """The device-independent fields of a model case's device result (what a device worker is sent)."""
    return dict(case=case.id, op=case.name, variant=case.variant, rule="device", knobs=dict(case.knobs),
                seed=case.seed(), repro=repro)


def check_on_device(case: ModelCase, ctx, *, route_name: str = "native", tree=None, repro: str = "",
                    tamper=None, repeat: int = 1, replays: int = 0) -> Result:
    """One model case's program on one device under a routing profile: one ``device`` result (never raises)."""
    return run_prepared(ctx, model=prepare_or_status(case), ident=identity(case, repro), route_name=route_name,
                        tree=tree, tamper=tamper, repeat=repeat, replays=replays)


def run_prepared(ctx, *, model: PreparedProgram | tuple[Status, str], ident: dict[str, Any],
                 route_name: str = "native", tree=None, tamper=None, repeat: int = 1, replays: int = 0,
                 keep: list | None = None) -> Result:
    """``check_on_device`` once the host has prepared the program: numpy, wgpu and (for host ops) torch.

    A delegate the tree's runtime cannot load is judged before any device work (``unloadable_on``). ``replays``
    whole-graph replays follow the node-by-node run (``--mode graph``). ``tamper`` is host work after
    each node of delegate 0 (or ``{delegate: tamper}``); each call's
    ``{delegate index: DelegateRun}`` is appended to ``keep`` when given (bisect and repro use them)."""
    from vkdiff.device.runtime.routing import route_for

    start = time.perf_counter()
    route = route_for(route_name, ctx.info)
    knobs = {**ident["knobs"], "route": route.name, **({"limits": ctx.limits_profile} if ctx.limits_profile else {})}
    base = dict(ident, knobs=knobs, device=ctx.info.slug, versions=versions(), device_info=ctx.info_dict)
    tampers = tamper if isinstance(tamper, dict) else ({0: tamper} if tamper is not None else {})
    if isinstance(model, tuple):
        status, fields = model[0], dict(reason=model[1])
    elif (refused := unloadable_on(model, tree)) is not None:
        status, fields = refused
    else:
        runs = run_program(model, ctx, route, tree=tree, tampers=tampers, repeat=repeat, replays=replays,
                           keep=keep)
        status, fields = judge_program(model, runs)
    fields.setdefault("metrics", {})["route"] = route.to_dict()
    return Result(status=status.name, seconds=round(time.perf_counter() - start, 3), **base, **fields)


def unloadable_on(model: PreparedProgram, tree: Path | None) -> tuple[Status, dict[str, Any]] | None:
    """The verdict on a delegate holding an op ``tree``'s runtime does not register (None: all load, or no tree)."""
    registered = runtime_ops(tree)
    return None if registered is None else unloadable(model, registered, origin_of(Path(tree)))


def prepare_model(case: ModelCase) -> PreparedProgram | tuple[Status, str]:
    """Lower (cached) and evaluate eager once; a (status, reason) when the case cannot run on a device."""
    from vkdiff.capture import quiet_libraries
    from vkdiff.lowering.edge import LowerError
    from vkdiff.lowering.lower import lower
    from vkdiff.harness.models import model_tolerance

    try:
        with quiet_libraries():
            lowered = lower(case)
    except LowerError as exc:
        return not_lowered(str(exc))
    program = lowered.program()
    if not program.vulkan_methods():
        return no_delegate(getattr(case, "expect_delegate", True))
    run = eager_run(case)
    return PreparedProgram(case_id=case.id, program=program, method="forward",
                           steps=[[np.asarray(x) for x in inputs] for inputs in run.inputs], expected=run.outputs,
                           tolerance=case.tolerance or model_tolerance(lowered), tokens=run.tokens)


def prepare_or_status(case: ModelCase) -> PreparedProgram | tuple[Status, str]:
    """``prepare_model``, with anything it raises as a (status, reason): a run never stops on one case."""
    try:
        return prepare_model(case)
    except Exception as exc:  # lowering or eager broke in a way the host results also show
        return unprepared(exc)
