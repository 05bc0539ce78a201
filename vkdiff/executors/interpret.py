"""Evaluate a decoded Vulkan delegate with the numpy reference ops, on its own constants.

This answers "does the fused program compute the same function as the model?"
without any GPU: every call is bound to its schema (``Delegate.bind``) and evaluated by
the reference op of the same name (``vkdiff.reference.OPS``). Tensor arguments are
taken in the dtype the graph declares for them (constants as stored, so float16
scales of a ``force_fp16`` lowering are what the reference sees; activations rounded
as the device stores them); the reference computes in float64; each output takes the
dims the graph declares. Dtype arguments the serializer wrote as ``Null`` are read
back from the outputs (``DTYPE_FROM_OUTPUT``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from vkdiff import reference
from vkdiff.datamodel import DTYPE_FROM_OUTPUT, Call, Delegate, UnknownOpError, schema_of

Env = dict[int, np.ndarray]
UnsupportedOpError = reference.UnsupportedOpError
"""An op of the delegate has no schema or no reference (→ ``NOT_RUN`` for numerics)."""


def _value(delegate: Delegate, env: Env, vid: int) -> Any:
    """A value as a reference op takes it: tensors in their declared dtype, lists element-wise, scalars as is."""
    if vid in env and vid not in delegate.tensors:
        return env[vid]
    if vid in env:
        array = env[vid]
    elif vid in delegate.constants:
        array = delegate.constants[vid]
    elif vid in delegate.tensors:
        raise UnsupportedOpError(f"value %{vid} is read before any op writes it")
    else:
        value = delegate.value(vid)
        if delegate.values[vid].get("kind") == "ValueList":
            return [_value(delegate, env, item) for item in value]
        return value
    return np.asarray(array).astype(delegate.tensors[vid].dtype, copy=False)


def arguments(delegate: Delegate, call: Call, env: Env) -> dict[str, Any]:
    """The call's arguments by schema name, with ``Null`` dtypes recovered from its outputs.

    A constant the op writes in place (a KV cache) is first copied into ``env``: the op mutates
    that copy, later ops read it, and the delegate's own constants stay untouched.
    """
    for argument in call.schema.arguments:
        vid = call.args.get(argument.name)
        if argument.mutable and vid in delegate.constants and vid not in env:
            env[vid] = np.array(delegate.constants[vid])
    args = {name: _value(delegate, env, vid) for name, vid in call.args.items()}
    for name, index in DTYPE_FROM_OUTPUT.get(call.schema.name, {}).items():
        if args.get(name) is None and index < len(call.outputs) and call.outputs[index] in delegate.tensors:
            args[name] = delegate.tensors[call.outputs[index]].dtype
    return args


def _store(delegate: Delegate, env: Env, call: Call, produced: Any) -> None:
    values = produced if isinstance(produced, tuple) else (produced,)
    if len(values) != len(call.outputs):
        raise UnsupportedOpError(f"{call.op.name} returned {len(values)} outputs, the graph declares "
                                 f"{len(call.outputs)}")
    for vid, value in zip(call.outputs, values):
        if vid not in delegate.tensors:
            env[vid] = value
            continue
        array = np.asarray(value)
        dims = delegate.tensors[vid].dims
        env[vid] = array.reshape(dims) if array.size == int(np.prod(dims)) else array


def _has_reference(op: str) -> bool:
    try:
        return schema_of(op).name in reference.OPS
    except UnknownOpError:
        return False


def missing_references(delegate: Delegate) -> list[str]:
    """Ops of the delegate with no schema or no reference."""
    return sorted(name for name in {o.name for o in delegate.ops} if not _has_reference(name))


def trace(delegate: Delegate, inputs: Sequence[np.ndarray], state: Env | None = None) -> Env:
    """Every value the delegate computes for ``inputs`` (in ``input_ids`` order), by value id.

    ``state`` carries the constants ops mutate (KV caches) from one call to the next: read
    before, updated after (a generation's prefill, then decode steps).

    Raises:
        UnsupportedOpError: an op has no schema or no reference (names every such op).
    """
    missing = missing_references(delegate)
    if missing:
        raise UnsupportedOpError(f"no reference for {', '.join(missing)}")
    env: Env = {vid: np.array(value) for vid, value in (state or {}).items()}
    env.update({vid: np.asarray(x) for vid, x in zip(delegate.input_ids, inputs)})
    for operation in delegate.ops:
        call = delegate.bind(operation)
        _store(delegate, env, call, reference.evaluate(call.schema.name, arguments(delegate, call, env)))
    if state is not None:
        state.update({vid: env[vid] for vid in delegate.constants if vid in env})
    return env


def evaluate_node(delegate: Delegate, call: Call, env: Env) -> tuple[tuple[np.ndarray, ...], np.ndarray | None]:
    """One node's outputs from the values in ``env`` (and its constants), with the reduction magnitude if any."""
    args = arguments(delegate, call, env)
    output, magnitude = reference.evaluate_with_magnitude(call.schema.name, args)
    outputs = output if isinstance(output, tuple) else (output,)
    shaped = []
    for vid, value in zip(call.outputs, outputs):
        array = np.asarray(value, np.float64)
        dims = delegate.tensors[vid].dims if vid in delegate.tensors else None
        shaped.append(array.reshape(dims) if dims is not None and array.size == int(np.prod(dims)) else array)
    return tuple(shaped), magnitude


def run(delegate: Delegate, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Outputs of the delegate for ``inputs`` (in ``input_ids`` order), float64.

    Raises:
        UnsupportedOpError: an op has no schema or no reference (names every such op).
    """
    env = trace(delegate, inputs)
    return [np.asarray(env[vid], dtype=np.float64) for vid in delegate.output_ids]
