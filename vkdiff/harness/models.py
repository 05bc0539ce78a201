"""Model cases on the host: lower, evaluate the fused program with references, check every fusion rule."""

from __future__ import annotations

import dataclasses
import time
import traceback
from typing import Any

import numpy as np

from vkdiff.cases.model_case import ModelCase
from vkdiff.fusions import Finding, FusionContext
from vkdiff.verdicts.compare import ErrorStatistics
from vkdiff.verdicts.host import (cpu_runtime_finding, findings_evidence, judge_rules, lowering_outcome, rule_outcome,
                                  runtime_failed, xnnpack_lowering_failed)
from vkdiff.datamodel import HOST, Result, Status, Tolerance, versions
from vkdiff.capture import quiet_libraries
from vkdiff.lowering.edge import LowerError, LoweredCase
from vkdiff.lowering.lower import lower
from vkdiff.lowering.recipes import RECIPES


def eager(case: ModelCase) -> tuple[Any, tuple, list[list[str]]]:
    """The quantized eager model (the function the delegate must compute), inputs, and tied parameter groups."""
    model, inputs = case.instantiate()
    tied = tied_parameter_groups(model)
    return RECIPES[case.recipe](model, inputs), inputs, tied


def tied_parameter_groups(model) -> list[list[str]]:
    """Names of parameters that share one tensor (tied weights), before quantization."""
    groups: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(param), []).append(name)
    return [names for names in groups.values() if len(names) > 1]


def weight_qparams(model) -> dict[str, dict[str, Any]]:
    """Per quantized module: whether its weight's zero points are non-zero (torchao tensors or quantizer modules)."""
    import torch

    out = {}
    for fqn, module in model.named_modules():
        weight = getattr(module, "weight", None)
        zero = getattr(weight, "zero_point", None)
        if zero is None:
            zero = getattr(module, "zeros", None)
        if isinstance(zero, torch.Tensor):
            out[fqn] = {"zero_point_nonzero": bool(torch.count_nonzero(zero).item()), "type": type(weight).__name__}
    return out


def model_tolerance(lowered: LoweredCase) -> Tolerance:
    """Model-level bound of a lowering: the policy of its Vulkan delegates (``Tolerance.for_graphs``)."""
    return Tolerance.for_graphs(lowered.delegates)


def flat_outputs(outputs: Any) -> np.ndarray:
    """A model's output(s) as one float64 vector: a tensor, or a tuple/list of them in order, flattened."""
    items = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    arrays = [np.asarray(o.detach().float().numpy() if hasattr(o, "detach") else o, np.float64).reshape(-1)
              for o in items]
    return np.concatenate(arrays) if arrays else np.zeros(0)


def reference_output(lowered: LoweredCase, inputs: tuple) -> np.ndarray | str:
    """The lowered program evaluated with the reference ops (host instructions with torch's ATen ops), every output
    flattened in order; a string says why not."""
    from vkdiff.executors.host_ops import HostOpError
    from vkdiff.executors.program import DelegateSkipped, ReferenceDelegates, run_method

    program = lowered.program()
    if "forward" not in program.methods:
        return f"the lowered program has no method forward (methods: {', '.join(sorted(program.methods))})"
    try:
        run = run_method(program.methods["forward"], [np.asarray(x) for x in inputs], ReferenceDelegates())
    except (DelegateSkipped, HostOpError) as exc:
        return str(exc.cause if isinstance(exc, DelegateSkipped) else exc)
    return flat_outputs(run.outputs)


def check_case(case: ModelCase, shader_variants: frozenset[str] | None = None, repro: str = "") -> list[Result]:
    """Lower one model case and run each of its rules; one Result per rule (never raises).

    Args:
        case (ModelCase): the case.
        shader_variants (frozenset | None): variant names of the ExecuTorch tree, when one is given.
        repro (str): the command that reruns the case, recorded on every result.
    """
    start = time.perf_counter()
    base = dict(case=case.id, op=case.name, device=HOST, variant=case.variant, knobs=case.knobs,
                versions=versions(), seed=case.seed(), repro=repro)
    try:
        with quiet_libraries():
            lowered = lower(case)
    except LowerError as exc:
        status, reason = lowering_outcome(str(exc), case.accept_refusal)
        return [Result(rule="lower", status=status.name, reason=reason,
                       seconds=round(time.perf_counter() - start, 3), **base)]
    try:
        with quiet_libraries():
            findings = _findings(case, lowered, shader_variants)
    except Exception as exc:  # a harness bug must not abort the run
        return [Result(rule="rules", status=Status.ERROR.name, reason=f"{type(exc).__name__}: {exc}",
                       traceback="".join(traceback.format_exception(exc)), **base)]
    seconds = round(time.perf_counter() - start, 3)
    results = []
    for rule, items in findings.items():
        status, reason = rule_outcome(items)
        results.append(Result(
            rule=rule, status=status.name, reason=reason,
            metrics={"findings": findings_evidence(items), "lower_seconds": lowered.seconds,
                     "lower_cached": lowered.cached, "pte_size": lowered.pte_size, "partitions": lowered.partitions},
            seconds=seconds, **base))
    return results


def cpu_runtime(case: ModelCase, lowered: LoweredCase, inputs: tuple, expected: np.ndarray,
                tolerance: Tolerance, reference: np.ndarray | None = None) -> tuple[Finding, str | None]:
    """The same case lowered for XNNPACK and run by ExecuTorch's CPU runtime, against the eager model
    and (when the fused program could be evaluated) the reference.

    Returns the finding and the runtime error text (None when the program loaded and ran).
    """
    from vkdiff.executors.cpu_runtime import RuntimeInitError, run_pte

    target = lowered if case.partitioner == "xnnpack" else None
    try:
        target = target or lower(dataclasses.replace(case, partitioner="xnnpack"))
        out = flat_outputs(run_pte(target.pte, list(inputs)))
    except LowerError as exc:
        return xnnpack_lowering_failed(str(exc)), None
    except RuntimeInitError as exc:
        return runtime_failed(str(exc)), str(exc)
    return cpu_runtime_finding(out, expected, tolerance, reference), None


def _pt2e_tolerance(model) -> Tolerance:
    """PT2E outputs are int8-quantized: a few output quantization steps of slack."""
    from vkdiff.lowering.pt2e import output_qparams

    scales = [q["scale"] for q in output_qparams(model) if q]
    return Tolerance.quantized(max(scales), steps=3) if scales else Tolerance(atol=1e-2, rtol=1e-2)


def _findings(case: ModelCase, lowered: LoweredCase, shader_variants) -> dict[str, list[Finding]]:
    model, inputs, tied = eager(case)
    import torch

    with torch.no_grad():
        expected = flat_outputs(model(*inputs))
    reference = reference_output(lowered, inputs)
    stats = (ErrorStatistics.from_arrays(reference, expected, case.tolerance or model_tolerance(lowered))
             if isinstance(reference, np.ndarray) else reference)
    pt2e = case.recipe.startswith("pt2e")
    runtime_finding, runtime_error = None, None
    if "cpu_runtime" in case.rules or "cat_qparams" in case.rules:
        tolerance = _pt2e_tolerance(model) if pt2e else Tolerance(atol=2e-2, rtol=2e-2)
        runtime_finding, runtime_error = cpu_runtime(case, lowered, inputs, expected, tolerance,
                                                     reference if isinstance(reference, np.ndarray) else None)
    ctx = FusionContext(case_id=case.id, expect_ops=case.expect_ops, delegates=lowered.delegates,
                        partitions=lowered.partitions, delegated_ops=lowered.delegated_ops,
                        undelegated_ops=lowered.undelegated_ops, dequantize_dtypes=lowered.dequantize_dtypes,
                        weight_qparams=weight_qparams(model), tied_groups=tied, shader_variants=shader_variants,
                        numerics=stats if isinstance(stats, ErrorStatistics) else None,
                        bf16_scales=bf16_scales(lowered) if "bf16" in case.recipe else None,
                        qparam_flow=_qparam_flow(model) if pt2e else None, runtime_error=runtime_error)
    return judge_rules(case.rules, ctx, stats, runtime_finding)


def _qparam_flow(model) -> list[dict[str, Any]]:
    from vkdiff.lowering.pt2e import qparam_flow

    return qparam_flow(model)


def bf16_scales(lowered: LoweredCase) -> bool | None:
    """Whether every 4-bit weight scale constant is exactly bfloat16-representable (None: no scales)."""
    from vkdiff.fusions.transposed_scales import expected_scales_dims

    found = []
    for delegate in lowered.delegates:
        for operation in delegate.ops:
            expected = expected_scales_dims(delegate, operation)
            if expected is not None and expected[1] in delegate.constants:
                scales = np.asarray(delegate.constants[expected[1]], dtype=np.float32)
                found.append(bool(np.all((scales.view(np.uint32) & 0xFFFF) == 0)))
    return all(found) if found else None
