"""A user's program as cases: a ``.pte``, a module factory lowered with a recipe, or a saved artifact.

Each becomes one ``ProgramCase`` per method checked: a ``PreparedProgram`` (its calls'
inputs, eager's outputs when a module was given, the tolerance) plus the identity its
results carry. The runner runs a ``ProgramCase`` on every adapter exactly as it runs a
catalogue model case's program. Everything here that can fail on the user's input raises
``SubjectError`` with one line naming the input and what to do, before any device work.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from vkdiff.cases.program_case import ProgramCase
from vkdiff.datamodel import PreparedProgram, Program, Tolerance
from vkdiff.subjects import inputs as program_inputs


class SubjectError(ValueError):
    """The program, module, inputs or options cannot be checked as given (one line: what and what to do)."""


@dataclasses.dataclass(kw_only=True)
class CheckOptions:
    """How to check a subject: the options of ``vkdiff check``."""

    method: str | None = None
    inputs: tuple[Path, ...] = ()
    """Files of the calls' inputs (one per call, or one ``.npz`` keyed by call)."""
    shapes: Sequence[Sequence[Sequence[int]]] = ()
    """Below-bound calls: each tensor input's sizes per extra call."""
    int_range: tuple[int, int] | None = None
    seed: int = 0
    atol: float | None = None
    rtol: float | None = None
    etrecord: Path | None = None


def _tolerance(program: Program, options: CheckOptions) -> Tolerance:
    """``Tolerance.for_graphs`` of the program's Vulkan delegates, with the user's ``--atol``/``--rtol``."""
    base = Tolerance.for_graphs(d.graph for m in program.methods.values() for d in m.delegates if d.graph is not None)
    return Tolerance(atol=base.atol if options.atol is None else options.atol,
                     rtol=base.rtol if options.rtol is None else options.rtol)


def methods_to_check(program: Program, method: str | None) -> list[str]:
    """``method``, or every method with a Vulkan delegate.

    Raises:
        SubjectError: an unknown method, or no Vulkan delegate at all.
    """
    if method is not None:
        if method not in program.methods:
            raise SubjectError(f"--method {method}: {program.name} has methods {', '.join(sorted(program.methods))}")
        if not any(d.vulkan for d in program.methods[method].delegates):
            raise SubjectError(f"--method {method}: {program.name}'s method {method!r} has no Vulkan delegate; "
                               f"nothing for a Vulkan device to check")
        return [method]
    found = program.vulkan_methods()
    if not found:
        backends = sorted({d.backend for m in program.methods.values() for d in m.delegates}) or ["none"]
        raise SubjectError(f"{program.name}: no Vulkan delegate in any method (delegates: {', '.join(backends)}); "
                           f"lower it with VulkanPartitioner to check it on a Vulkan device")
    return found


def calls_for(program: Program, method: str, options: CheckOptions) -> list[list[Any]]:
    """The method's calls: the user's (every call ``--inputs`` gives) or one seeded at the bound, then one per
    ``--shapes``."""
    plan = program.methods[method]
    try:
        if options.inputs:
            given = program_inputs.load_calls(options.inputs, plan)
        else:
            given = [program_inputs.generate(plan, program.sha256, session_seed=options.seed,
                                             int_range=options.int_range)]
        more = [program_inputs.generate(plan, program.sha256, sizes=sizes, call=len(given) + k,
                                        session_seed=options.seed, int_range=options.int_range)
                for k, sizes in enumerate(options.shapes)]
    except program_inputs.InputError as exc:
        raise SubjectError(str(exc)) from None
    return [*given, *more]


def read_schemas_from(tree: Path) -> None:
    """Read programs with ``tree``'s flatbuffer schemas (before executorch's, which a runner does not have)."""
    from vkdiff.program import schema_files

    schema_files.add_root(tree)


def pte_cases(path: Path, options: CheckOptions, command: Sequence[str]) -> list[ProgramCase]:
    """One case per method of the ``.pte`` at ``path`` that has a Vulkan delegate (or ``--method``).

    Raises:
        SubjectError: not a program, truncated, no Vulkan delegate, an unknown method, or bad inputs.
    """
    from vkdiff.program.pte import ProgramLoadError, load_pte

    if not path.is_file():
        raise SubjectError(f"{path}: no such file")
    try:
        program = load_pte(path.read_bytes(), path.name)
    except ProgramLoadError as exc:
        raise SubjectError(str(exc)) from None
    notes = []
    if options.etrecord is not None:
        from vkdiff.lowering.etrecord import EtrecordError, attach_etrecord

        try:
            notes = attach_etrecord(program, options.etrecord)
        except EtrecordError as exc:
            raise SubjectError(str(exc)) from None
    cases = []
    for method in methods_to_check(program, options.method):
        model = PreparedProgram(case_id=f"{path.stem}[pte-{method}]", program=program, method=method,
                                steps=calls_for(program, method, options), tolerance=_tolerance(program, options))
        cases.append(_case(model, program, method, "pte", command))
        cases[-1].notes = [n for n in notes if n.startswith(f"{method}/")]
    return cases


def _case(model: PreparedProgram, program: Program, method: str, kind: str, command: Sequence[str],
          knobs: dict[str, Any] | None = None) -> ProgramCase:
    ident = dict(case=model.case_id, op=kind, variant=method, rule="device",
                 knobs={"program": program.name, "method": method, "sha256": program.sha256[:16], **(knobs or {})},
                 seed=0)
    return ProgramCase(id=model.case_id, ident=ident, model=model,
                       command=(*command, *(("--method", method) if len(program.methods) > 1 else ())))


def import_factory(spec: str) -> tuple[Callable[[], Any], str]:
    """``path.py:factory`` → (the function, case name ``<file stem>.<function>``).

    Raises:
        SubjectError: no such file or function, or importing the file raised.
    """
    file, sep, name = spec.rpartition(":")
    path = Path(file)
    if not sep or not name or path.suffix != ".py":
        raise SubjectError(f"{spec}: give a module factory as path/to/file.py:function")
    if not path.is_file():
        raise SubjectError(f"{spec}: no such file {path}")
    module_name = f"vkdiff_user_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]}"
    try:
        loader = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(loader)
        sys.modules[module_name] = module
        loader.loader.exec_module(module)
        factory = getattr(module, name)
    except AttributeError:
        raise SubjectError(f"{spec}: {path} has no function {name!r}") from None
    except Exception as exc:
        raise SubjectError(f"{spec}: importing {path} raised {type(exc).__name__}: {exc}") from None
    return factory, f"{path.stem}.{name}"


def call_factory(factory: Callable[[], Any], what: str) -> tuple[Any, tuple, Any]:
    """(module in eval mode, example inputs, dynamic shapes or None) from a factory.

    Raises:
        SubjectError: it raised, or returned something other than ``(module, example_inputs[, dynamic_shapes])``.
    """
    try:
        made = factory()
    except Exception as exc:
        raise SubjectError(f"{what}: the factory raised {type(exc).__name__}: {exc}") from None
    if not isinstance(made, tuple) or len(made) not in (2, 3) or not hasattr(made[0], "eval"):
        raise SubjectError(f"{what}: the factory must return (module, example_inputs[, dynamic_shapes]), got "
                           f"{type(made).__name__}")
    example = tuple(made[1]) if isinstance(made[1], (tuple, list)) else (made[1],)
    return made[0].eval(), example, made[2] if len(made) == 3 else None


def module_case(factory: str | Callable[[], Any], recipe: str, partitioner: str = "vulkan", *,
                name: str | None = None, tolerance: Tolerance | None = None):
    """The catalogue-shaped ``ModelCase`` of a user's factory (lowered exactly as catalogue cases are).

    Args:
        factory (str | Callable): ``path.py:function``, or the function, returning
            ``(module, example_inputs[, dynamic_shapes])``.
        recipe (str): a catalogue recipe (``fp32``, ``4w``, ``8da4w``, ...).
        partitioner (str): ``vulkan`` (default), ``vulkan-fp16``, ``xnnpack``...
        name (str | None): the case name (default: ``<file stem>.<function>``).
        tolerance (Tolerance | None): the model-output bound against eager, replacing vkdiff's policy.

    Raises:
        SubjectError: an unknown recipe or partitioner, or the factory failed.
    """
    from vkdiff.cases.model_case import ModelCase
    from vkdiff.lowering.recipes import PARTITIONERS, RECIPES

    if recipe not in RECIPES or recipe.startswith("llm-"):
        raise SubjectError(f"--recipe {recipe}: choose one of {', '.join(r for r in RECIPES if not r.startswith('llm-'))}")
    if partitioner not in PARTITIONERS:
        raise SubjectError(f"--partitioner {partitioner}: choose one of {', '.join(PARTITIONERS)}")
    if isinstance(factory, str):
        factory, default = import_factory(factory)
    else:
        default = f"{getattr(factory, '__module__', 'user').rsplit('.', 1)[-1]}.{getattr(factory, '__name__', 'model')}"
    model, example, dynamic = call_factory(factory, name or default)
    return ModelCase(name=name or default, build=lambda: copy.deepcopy(model), inputs=lambda generator: example,
                     recipe=recipe, partitioner=partitioner, rules=("numerics",), dynamic_shapes=dynamic,
                     tolerance=tolerance)


def module_cases(case, options: CheckOptions, command: Sequence[str]) -> tuple[list[ProgramCase], Any]:
    """Lower a module case and prepare its program (eager's outputs as the oracle, a generation's calls and tokens
    when it decodes); (cases, the lowering or None).

    A lowering failure is not a usage error: its ``LOWER_FAIL`` is the host result, and the device case is ``NOT_RUN``.
    """
    from vkdiff.harness.device_models import prepare_model

    model = prepare_model(case)
    if isinstance(model, tuple):
        ident = dict(case=case.id, op=case.name, variant=case.variant, rule="device", knobs=case.knobs, seed=0)
        return [ProgramCase(id=case.id, ident=ident, model=model, command=tuple(command))], None
    if options.shapes:
        more = calls_for(model.program, "forward", dataclasses.replace(options, inputs=()))[1:]
        model.steps += more
        model.expected += [_eager_of(case, call) for call in more]
    if options.atol is not None or options.rtol is not None:
        model.tolerance = _tolerance(model.program, options)
    pc = _case(model, model.program, "forward", case.name, command, case.knobs)
    pc.ident.update(variant=case.variant)
    return [pc], model


def _eager_of(case, call: list[Any]) -> np.ndarray:
    """Eager's outputs for one below-bound call."""
    import torch

    from vkdiff.harness.models import eager, flat_outputs

    model, _, _ = eager(case)
    with torch.no_grad():
        return flat_outputs(model(*[torch.from_numpy(np.asarray(x)) for x in call]))


def check_command(argv: Sequence[str]) -> tuple[str, ...]:
    """The ``vkdiff check`` words of ``argv`` that select the subject (not devices, profiles or outputs)."""
    drop = {"--device", "--route", "--limits-profile", "--results", "-r", "--report", "--repeat", "--timeout",
            "--et-src", "--inspector"}
    out, skip = ["vkdiff", "check"], False
    for word in argv:
        if skip:
            skip = False
            continue
        if word in drop:
            skip = True
            continue
        if any(word.startswith(flag + "=") for flag in drop):
            continue
        out.append(word)
    return tuple(out)
