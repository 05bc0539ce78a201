"""Execute a method the way ExecuTorch's runtime does: its chain in order, delegates through a pluggable executor.

Kernel calls run on the host (``HostOps``: torch's ATen ops); each delegate call hands
its input values to the delegate executor and writes the outputs it returns. The
reference executor (``ReferenceDelegates``) evaluates Vulkan delegates with the numpy
reference ops; ``vkdiff.executors.device.DeviceDelegates`` runs them node by node on a
device. Executors keep state between calls of one method (KV caches of a generation).

A delegate that one executor cannot run may be given a ``fallback`` (the reference on the
same inputs), so the delegates after it still see values of the right shape; the run
records which delegate fell back and why. Nothing here judges: verdicts compare runs.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Protocol, Sequence

import numpy as np

from vkdiff.datamodel import DelegateEntry, Method
from vkdiff.executors import interpret
from vkdiff.executors.host_ops import HostOpError, HostOps


class DelegateExecutor(Protocol):
    """Runs one delegate call: ``(entry, inputs in input order) -> (outputs in output order, record)``."""

    def __call__(self, entry: DelegateEntry, inputs: list[Any]) -> tuple[list[Any], Any]: ...


class DelegateSkipped(RuntimeError):
    """A delegate call could not run on this executor (``reason`` says why; the status it maps to travels on
    ``cause``)."""

    def __init__(self, index: int, cause: BaseException):
        super().__init__(f"delegate {index}: {cause}")
        self.index, self.cause = index, cause


@dataclasses.dataclass(kw_only=True)
class DelegateCallRun:
    """One delegate call within one method execution."""

    delegate: int
    """Delegate index."""
    instruction: int
    """Position of its ``DelegateCall`` in the chain."""
    inputs: list[Any]
    outputs: list[Any]
    record: Any = None
    """What the executor returned: the reference trace (value id → array), or a device's ``DelegateRun``."""
    skipped: BaseException | None = None
    """Why this executor could not run it (then ``outputs`` came from the fallback, if any)."""


@dataclasses.dataclass(kw_only=True)
class MethodRun:
    """One execution of a method."""

    values: dict[int, Any]
    """Every value the chain computed (numpy arrays and Python scalars)."""
    outputs: list[Any]
    calls: list[DelegateCallRun]
    host_seconds: float
    """Time in host kernel calls."""
    seconds: float


class ReferenceDelegates:
    """Vulkan delegates evaluated with the reference ops (float64), state kept per delegate between calls."""

    def __init__(self):
        self.state: dict[int, dict[int, np.ndarray]] = {}

    def __call__(self, entry: DelegateEntry, inputs: list[Any]) -> tuple[list[Any], Any]:
        if entry.graph is None:
            raise interpret.UnsupportedOpError(f"{entry.backend} delegate: vkdiff evaluates Vulkan delegates only")
        env = interpret.trace(entry.graph, inputs, self.state.setdefault(entry.index, {}))
        return [env[vid] for vid in entry.graph.output_ids], env


def split_delegate_args(entry: DelegateEntry, args: Sequence[int]) -> tuple[list[int], list[int]]:
    """(input ids, output ids) of a delegate call: a Vulkan delegate takes as many inputs as its graph has."""
    count = len(entry.graph.input_ids) if entry.graph is not None else len(args) - 1
    return list(args[:count]), list(args[count:])


def run_method(method: Method, inputs: Sequence[Any], delegates: DelegateExecutor, *,
               fallback: DelegateExecutor | None = None, host: HostOps | None = None) -> MethodRun:
    """Execute ``method`` once for ``inputs`` (in the method's input order).

    Raises:
        HostOpError: a host instruction cannot run.
        DelegateSkipped: a delegate could not run and there is no fallback (or the fallback failed too).
    """
    start = time.perf_counter()
    host = host or HostOps(method.values, method.constants)
    env: dict[int, Any] = {vid: _as_value(method.values[vid], x) for vid, x in zip(method.inputs, inputs)}
    calls, host_seconds, pc = [], 0.0, 0
    while pc < len(method.instructions):
        ins = method.instructions[pc]
        if ins.kind == "kernel":
            tick = time.perf_counter()
            try:
                host.run(ins.op, ins.args, env)
            except HostOpError as exc:
                raise HostOpError(f"instruction {pc}{_frame(ins.frames)}: {exc}") from None
            host_seconds += time.perf_counter() - tick
        elif ins.kind == "delegate":
            calls.append(_delegate_call(method, pc, ins.delegate, ins.args, env, host, delegates, fallback))
        elif ins.kind == "move":
            env[ins.args[1]] = host.value(ins.args[0], env)
        elif ins.kind == "jump_false" and not bool(host.value(ins.args[0], env)):
            pc = ins.args[1]
            continue
        pc += 1
    outputs = [host.value(vid, env) for vid in method.outputs]
    return MethodRun(values=env, outputs=outputs, calls=calls, host_seconds=host_seconds,
                     seconds=time.perf_counter() - start)


def _delegate_call(method: Method, pc: int, index: int, args: Sequence[int], env: dict[int, Any], host: HostOps,
                   delegates: DelegateExecutor, fallback: DelegateExecutor | None) -> DelegateCallRun:
    entry = method.delegates[index]
    in_ids, out_ids = split_delegate_args(entry, args)
    inputs = [host.value(vid, env) for vid in in_ids]
    call = DelegateCallRun(delegate=index, instruction=pc, inputs=inputs, outputs=[])
    try:
        call.outputs, call.record = delegates(entry, inputs)
    except (HostOpError, KeyboardInterrupt):
        raise
    except Exception as exc:
        call.skipped = exc
        if fallback is None:
            raise DelegateSkipped(index, exc) from exc
        try:
            call.outputs, _ = fallback(entry, inputs)
        except Exception as again:
            raise DelegateSkipped(index, exc) from again
    for vid, value in zip(out_ids, call.outputs):
        env[vid] = value
    return call


def _frame(frames: list[dict[str, Any]]) -> str:
    """`` (model.py:24)``: the user's line the program's stack trace gives for an instruction, if any."""
    user = [f for f in frames if "/torch/" not in f.get("filename", "") and "/executorch/" not in f.get("filename", "")]
    last = (user or frames or [None])[-1]
    return f" ({str(last['filename']).rsplit('/', 1)[-1]}:{last['lineno']})" if last else ""


def _as_value(spec: dict[str, Any], value: Any) -> Any:
    """An input as the chain holds it: tensors as arrays in their declared dtype, scalars as Python numbers."""
    if spec.get("kind") != "Tensor":
        return value.item() if isinstance(value, np.ndarray) and value.size == 1 else value
    dtype = spec["dtype"] if spec["dtype"] != "bfloat16" else "float32"
    return np.asarray(value).astype(dtype, copy=False)



class FirstOf:
    """The first executor that runs a delegate (the reference, then torch's CPU ops): a fallback chain."""

    def __init__(self, *executors: DelegateExecutor):
        self.executors = executors

    def __call__(self, entry: DelegateEntry, inputs: list[Any]) -> tuple[list[Any], Any]:
        errors = []
        for executor in self.executors:
            try:
                return executor(entry, inputs)
            except (HostOpError, interpret.UnsupportedOpError, LookupError) as exc:
                errors.append(str(exc))
        raise HostOpError("; ".join(errors))
